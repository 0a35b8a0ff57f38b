package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/workq/workq/internal/dbschema"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/workqtype"
)

// Job is one claimed attempt handed to a handler.
type Job struct {
	// Item is the claimed item. It is read-only for handlers and
	// middleware: the runtime reads it (id, owner token, run id) from other
	// goroutines while the handler runs, to heartbeat, release and
	// complete the attempt.
	lease.Item
	// Schema is the workq schema the item is in ("" is the default,
	// workq); CompleteTx writes there.
	Schema string
	// Shard is the database the item is on, as the worker's Options.Shard
	// names it: for a workq.Client the shard's name (workq.DefaultShard,
	// "default", for a Client of NewClient), so a handler opens its own
	// transaction on the item's database with client.Shard(job.Shard).
	// "" for a worker given no shard.
	Shard string

	base *slog.Logger
	file *slog.Logger // attempt.log (with the base handler) when a runs dir is set
	once sync.Once
	log  *slog.Logger

	completedInTx atomic.Bool // CompleteTx ended the attempt in the handler's transaction

	outMu  sync.Mutex
	output []byte // SetOutput's JSON, written with a Done completion
}

// SetOutput records output (JSON) as the attempt's output: the completion
// that ends it done stores it with the item. A later call replaces it; nil
// clears it.
func (j *Job) SetOutput(output []byte) {
	j.outMu.Lock()
	j.output = output
	j.outMu.Unlock()
}

// Output returns what SetOutput recorded (nil: none).
func (j *Job) Output() []byte {
	j.outMu.Lock()
	defer j.outMu.Unlock()
	return j.output
}

// ErrCompletedInTx is returned by a CompleteTx that finds the attempt
// ended after an earlier CompleteTx of it (whose transaction committed).
var ErrCompletedInTx = errors.New("the attempt was already completed in a transaction")

// CompletedInTx reports whether the handler completed the attempt in its
// own transaction with CompleteTx (which may since have rolled back).
func (j *Job) CompletedInTx() bool { return j.completedInTx.Load() }

// CompleteTx completes the job's attempt as done inside tx, the handler's
// own transaction, fenced by the attempt's owner token like every
// completion: the business write and "job done" commit together or not at
// all. If this worker no longer holds the lease it returns an error
// wrapping ErrLeaseLost and writes nothing; roll tx back then.
//
// The handler returns after tx has committed; its result then changes
// nothing, since the attempt already ended (the runtime reads the run
// archive, or the done table the row moved to, to learn so). If tx rolls back instead, the handler's result is
// applied as usual: return an error to retry the job.
func CompleteTx(ctx context.Context, tx pgx.Tx, job *Job) error {
	if job == nil {
		return fmt.Errorf("complete in the transaction: %w", workqtype.Invalid("job", "nil job"))
	}
	if err := workqtype.CheckTx(ctx, tx); err != nil {
		return fmt.Errorf("complete %s %d in the transaction: %w", job.Table, job.ID, err)
	}
	rw, err := dbschema.NewRewriter(job.Schema)
	if err != nil {
		return fmt.Errorf("complete %s %d in the transaction: %w", job.Table, job.ID, err)
	}
	a, err := lease.New(rw.Wrap(tx), job.Table).Complete(ctx, []lease.Completion{
		{ID: job.ID, Token: job.OwnerToken, RunID: job.RunID, Outcome: lease.Done, Output: job.Output()}})
	if err != nil {
		return fmt.Errorf("complete %s %d in the transaction: %w", job.Table, job.ID, err)
	}
	if len(a.Lost) > 0 {
		if job.completedInTx.Load() { // an earlier CompleteTx's transaction committed, most likely
			return fmt.Errorf("complete %s %d in the transaction: %w", job.Table, job.ID, ErrCompletedInTx)
		}
		return fmt.Errorf("complete %s %d in the transaction: %w", job.Table, job.ID, ErrLeaseLost)
	}
	job.completedInTx.Store(true)
	return nil
}

// Logger returns the attempt logger: its records carry the job's identity
// and, with a runs directory, also go to that attempt's attempt.log. It is
// built on first use, so handlers that never log pay nothing for it.
func (j *Job) Logger() *slog.Logger {
	j.once.Do(func() {
		l := j.file
		if l == nil {
			l = j.base
		}
		if l == nil { // a Job built outside the runtime (a test, a direct call)
			l = slog.New(slog.DiscardHandler)
		}
		j.log = l.With("table", j.Table, "id", j.ID, "kind", j.Kind, "run_id", j.RunID, "attempt", j.Attempt)
	})
	return j.log
}

// Decode unmarshals the payload into v.
func (j *Job) Decode(v any) error {
	if err := json.Unmarshal(j.Payload, v); err != nil {
		return Permanent(fmt.Errorf("decode payload of %s %d: %w", j.Table, j.ID, err))
	}
	return nil
}

// HandlerFunc works one job. Returning nil acks it; an error retries it with
// backoff (failed once its attempts are used up); Permanent(err) fails it at
// once; Snooze(d) runs it again after d without using an attempt; an error
// wrapping ErrCancelled ends it cancelled. When ctx is cancelled because the
// lease was lost (context.Cause is ErrLeaseLost), the result is discarded;
// when it is cancelled because someone cancelled the job (context.Cause is
// ErrCancelled), the attempt ends cancelled whatever the handler returns.
type HandlerFunc func(ctx context.Context, job *Job) error

// ErrLeaseLost is the cause of a handler context cancelled because this worker
// no longer holds the job's lease.
var ErrLeaseLost = lease.ErrLeaseLost

// ErrCancelled is the cause of a handler context cancelled because the job
// was cancelled while it ran (admin.Cancel, workq.Client.Cancel, the API,
// the CLI or the dashboard): the worker holding it learns it from a
// notification, or at the latest from its next heartbeat (lease/3). The
// attempt ends cancelled whatever the handler returns. A handler may also
// return an error wrapping ErrCancelled to cancel its own job (no retry).
var ErrCancelled = workqtype.ErrCancelled

// ErrShutdown is the cause of a handler context cancelled because the worker
// is shutting down and the drain timeout passed; the job is released.
var ErrShutdown = workqtype.ErrShutdown

type permanentError struct{ err error }

func (e *permanentError) Error() string { return "permanent: " + e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as not worth retrying: the job fails at once.
func Permanent(err error) error {
	if err == nil {
		err = errors.New("permanent failure")
	}
	return &permanentError{err}
}

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

type snoozeError struct{ d time.Duration }

func (e *snoozeError) Error() string { return fmt.Sprintf("snoozed for %s", e.d) }

// Snooze asks to run the job again after d without counting an attempt.
func Snooze(d time.Duration) error {
	if d < 0 {
		d = 0
	}
	return &snoozeError{d}
}

// IsSnoozed reports whether err was made by Snooze: the handler asked to
// run the job again later, which is not a failure.
func IsSnoozed(err error) bool {
	var s *snoozeError
	return errors.As(err, &s)
}

// SnoozeDuration returns the delay of an error made by Snooze (ok false
// for any other error).
func SnoozeDuration(err error) (d time.Duration, ok bool) {
	var s *snoozeError
	if errors.As(err, &s) {
		return s.d, true
	}
	return 0, false
}

// retryAtError is a handler's error that asks for its retry at a time of
// the handler's choosing (RetryAt).
type retryAtError struct {
	at  time.Time
	err error
}

func (e *retryAtError) Error() string { return e.err.Error() }
func (e *retryAtError) Unwrap() error { return e.err }

// RetryAt makes a handler's err retry the item at t instead of after the
// full-jitter backoff (a per-kind retry policy; the Client's workers use it
// for Worker.NextRetry). It is a retry like any other error: it counts an
// attempt, an item with none left fails, and Permanent or Snooze (inside or
// around it) win. t is on this process's clock: the delay until t is what
// the database adds to its own now(). A zero t keeps the default backoff; a
// t in the past retries at once. The item's last_error is err's text.
func RetryAt(t time.Time, err error) error {
	if err == nil {
		err = errors.New("retry requested")
	}
	return &retryAtError{at: t, err: err}
}

// RetryIn is RetryAt(time.Now().Add(d), err).
func RetryIn(d time.Duration, err error) error { return RetryAt(time.Now().Add(max(d, 0)), err) }

// RetryTime returns the time an error made by RetryAt or RetryIn asks for
// (ok false for any other error, or a zero time).
func RetryTime(err error) (t time.Time, ok bool) {
	var r *retryAtError
	if errors.As(err, &r) && !r.at.IsZero() {
		return r.at, true
	}
	return time.Time{}, false
}

// Backoff is exponential backoff with full jitter:
// random(0, min(base * 2^attempt, cap)).
func Backoff(attempt int32, base, cap time.Duration) time.Duration {
	ceiling := cap
	if attempt < 62 {
		if d := base << attempt; d > 0 && d < cap {
			ceiling = d
		}
	}
	if ceiling <= 0 {
		return 0
	}
	return rand.N(ceiling + 1)
}
