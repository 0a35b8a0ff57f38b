package workq

import (
	"context"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/worker"
	"github.com/workq/workq/workqtype"
)

// Args are the arguments of a typed job: a struct (or any value that
// encodes to a JSON object) whose Kind names the job's kind. Its JSON
// encoding is the job's payload; its worker receives it decoded.
//
//	type EmailArgs struct{ To string `json:"to"` }
//	func (EmailArgs) Kind() string { return "email.send" }
type Args interface {
	Kind() string
}

// ArgsWithOpts is Args that set their own enqueue defaults (queue,
// priority, max attempts, dedup key...). Options given to Enqueue win
// over them field by field.
type ArgsWithOpts interface {
	Args
	EnqueueOpts() EnqueueOpts
}

// ArgsWithLimitKey is Args that name their job's limit key
// (EnqueueOpts.LimitKey) themselves, from their own fields: a tenant's
// report names its tenant. It is used when the options given to Enqueue,
// and the Args' own EnqueueOpts, leave LimitKey empty; "" from it is no
// key.
//
//	func (a ReportArgs) LimitKey() string { return a.TenantID }
type ArgsWithLimitKey interface {
	Args
	LimitKey() string
}

// RawArgs are untyped job arguments: a kind and its payload (a struct or
// map to marshal, or raw JSON as json.RawMessage or []byte; nil is {}).
// They are for code that routes by kind name, as the CLI and the HTTP API
// do; typed Args are the usual way.
type RawArgs struct {
	KindName string
	Payload  any
}

// Kind returns KindName.
func (r RawArgs) Kind() string { return r.KindName }

// EnqueueOpts are how a job is enqueued; zero fields take the Args'
// EnqueueOpts, then the Client's defaults.
type EnqueueOpts struct {
	Queue       string        // default "default"
	Priority    int16         // higher runs first
	RunAt       time.Time     // not before this time (zero: now + Delay)
	Delay       time.Duration // not before now + Delay (measured on the database clock)
	MaxAttempts int           // 0: the Client's default (4)
	// DedupKey: while a run with this key is ready or running, Enqueue
	// returns it (Enqueued.Duplicate) instead of adding another.
	DedupKey string
	// Unique makes the job unique by kind, and as asked by args, queue and
	// period, in the states given (by default also done: "once per
	// hour"); not with DedupKey. The zero value: not unique.
	Unique UniqueOpts
	// Metadata is stored with the job: its handler reads it (Job.Metadata),
	// the HTTP API and the dashboard show it. Keys of 1-128 bytes, at most
	// 64 KiB of JSON in all. The trace context of the enqueuing span, when
	// tracing, is added to it (traceparent, tracestate), unless it sets
	// traceparent itself.
	Metadata map[string]string
	// LimitKey is the key that per-key flow limits and fair claims count
	// the job by (FlowLimit.PerKey, SetFairness): a tenant, a customer, a
	// downstream account. 1 to 256 bytes of UTF-8 without NUL; empty:
	// none (or the Args' LimitKey method's, ArgsWithLimitKey). On a
	// sharded Client a job with a LimitKey and no DedupKey or Unique goes
	// to its key's shard (LimitKey), so one database counts all of a
	// key's jobs. See docs/go.md, "Limit keys".
	LimitKey string
}

// UniqueOpts make a job unique (River's UniqueOpts): while a run with the
// same unique key is in one of ByStates, Enqueue returns that run
// (Enqueued.Duplicate) instead of adding another, also under concurrent
// enqueues (a unique index decides). The key is the kind, plus what the By
// fields add. See docs/go.md, "Unique jobs".
type UniqueOpts struct {
	// ByArgs adds the args (the payload as JSON values: the order of keys
	// and spacing do not count).
	ByArgs bool
	// ByPeriod, at least a second, adds the period that holds the job's run
	// time (RunAt, or now + Delay on the enqueuing client's clock), counted
	// in whole periods from the Unix epoch: with an hour, one job per hour
	// of the clock.
	ByPeriod time.Duration
	// ByQueue adds the queue.
	ByQueue bool
	// ByStates are the states in which a run holds its key. Empty:
	// JobStateReady, JobStateInProgress and JobStateDone (every state but
	// failed and cancelled). They must include ready and in_progress.
	ByStates []JobState
}

// IsZero reports whether o asks for nothing: the job is not unique.
func (o UniqueOpts) IsZero() bool {
	return !o.ByArgs && o.ByPeriod == 0 && !o.ByQueue && len(o.ByStates) == 0
}

// JobState is a job run's state, as the HTTP API and the CLI name it.
type JobState string

// Job states. Ready includes jobs due later (scheduled, or waiting to be
// retried).
const (
	JobStateReady      JobState = workqtype.StateReady
	JobStateInProgress JobState = workqtype.StateInProgress
	JobStateDone       JobState = workqtype.StateDone
	JobStateFailed     JobState = workqtype.StateFailed
	JobStateCancelled  JobState = workqtype.StateCancelled
	// JobStatePending is a workflow's task waiting for its dependencies
	// (never a unique job's state).
	JobStatePending JobState = workqtype.StatePending
)

func (o UniqueOpts) jobq() jobq.Unique {
	u := jobq.Unique{ByArgs: o.ByArgs, ByPeriod: o.ByPeriod, ByQueue: o.ByQueue}
	for _, s := range o.ByStates {
		u.States = append(u.States, string(s))
	}
	return u
}

// merge returns o with its zero fields taken from d.
func (o EnqueueOpts) merge(d EnqueueOpts) EnqueueOpts {
	if o.Queue == "" {
		o.Queue = d.Queue
	}
	if o.Priority == 0 {
		o.Priority = d.Priority
	}
	if o.RunAt.IsZero() && o.Delay == 0 {
		o.RunAt, o.Delay = d.RunAt, d.Delay
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = d.MaxAttempts
	}
	if o.DedupKey == "" {
		o.DedupKey = d.DedupKey
	}
	if o.Unique.IsZero() {
		o.Unique = d.Unique
	}
	if o.Metadata == nil {
		o.Metadata = d.Metadata
	}
	if o.LimitKey == "" {
		o.LimitKey = d.LimitKey
	}
	return o
}

// Job is one attempt of a typed job, as its worker sees it.
type Job[T Args] struct {
	ID          int64
	Kind        string
	Queue       string
	Args        T
	Attempt     int // 1 on the first attempt
	MaxAttempts int
	Priority    int16
	RunAt       time.Time // when it became due
	CreatedAt   time.Time
	// Metadata is what the job was enqueued with (EnqueueOpts.Metadata),
	// and the enqueuing span's trace context when it was traced; nil when
	// none.
	Metadata map[string]string
	// LimitKey is the key per-key flow limits and fair claims count the
	// job by (EnqueueOpts.LimitKey); "" when it has none.
	LimitKey string
	// Shard is the database the job is on (DefaultShard for a Client of
	// NewClient): a handler's own transaction, for CompleteTx and the
	// ...Tx methods, is opened on client.Shard(job.Shard)'s pool.
	Shard string
	// RunID names this attempt: the run archive's id of it (Attempt.RunID,
	// the runs directory's RUN_ID, the run_id of the logs); ParseRunID
	// reads the job and the lease version back from it. LeaseVersion is
	// the claim's fencing token: every claim of the job increments it, and
	// a completion is applied only while it is the job's (a lease lost to
	// a reaper is ErrLeaseLost). Both are zero on a Job the runtime did
	// not claim (workqtest.RequireEnqueued's).
	RunID        uuid.UUID
	LeaseVersion int64

	raw  *worker.Job
	task *TaskOf // Workflow's answer, once read
}

// Logger returns the attempt's logger: its records carry the job's
// identity and, with a runs directory, also go to the attempt's log file.
func (j *Job[T]) Logger() *slog.Logger {
	if j.raw == nil {
		return slog.New(slog.DiscardHandler)
	}
	return j.raw.Logger()
}

// Worker works the jobs of one Args type. Its result is the attempt's: nil
// completes the job, an error retries it with backoff until its attempts
// are used up, Permanent(err) fails it at once, Snooze(d) runs it again
// after d without using an attempt.
//
// A Worker may also implement Timeout(*Job[T]) time.Duration to bound
// each attempt (zero or negative: the Client's default), instead of the
// Client's one timeout for every kind, and NextRetry(*Job[T]) time.Time to
// choose when a failed attempt runs again (River's shape; the zero time:
// Config.RetryPolicy or the default backoff). A retry chosen so still uses
// an attempt, and the last attempt still fails.
type Worker[T Args] interface {
	Work(ctx context.Context, job *Job[T]) error
}

// WorkFunc makes a Worker of a function.
func WorkFunc[T Args](f func(ctx context.Context, job *Job[T]) error) Worker[T] {
	return workFunc[T](f)
}

type workFunc[T Args] func(ctx context.Context, job *Job[T]) error

func (f workFunc[T]) Work(ctx context.Context, job *Job[T]) error { return f(ctx, job) }

// timeouter is the optional per-kind timeout of a Worker.
type timeouter[T Args] = WorkerWithTimeout[T]

// WorkerWithTimeout is a Worker that bounds each attempt of its kind
// (zero or less: the Client's default). The method is found by type
// assertion on the value given to AddWorker: assert it at compile time,
//
//	var _ workq.WorkerWithTimeout[ReportArgs] = (*reportWorker)(nil)
//
// and register the same type (a pointer here), or it is silently unused.
type WorkerWithTimeout[T Args] interface {
	Worker[T]
	Timeout(job *Job[T]) time.Duration
}

// nextRetrier is the optional per-kind retry policy of a Worker.
type nextRetrier[T Args] = WorkerWithNextRetry[T]

// WorkerWithNextRetry is a Worker that chooses when its kind's failed
// attempts run again (a zero time: the default backoff); see
// WorkerWithTimeout for the compile-time check.
type WorkerWithNextRetry[T Args] interface {
	Worker[T]
	NextRetry(job *Job[T]) time.Time
}

// flowLimiter is the optional per-kind flow limits of a Worker.
type flowLimiter[T Args] = WorkerWithFlowLimits[T]

// WorkerWithFlowLimits is a Worker that declares its kind's flow limits
// in code, next to Timeout and NextRetry: a rate or a concurrency of the
// kind in a queue (FlowLimit). Table is job runs and Kind is the worker's
// kind whatever they say; Queue empty is "default"; PerKey is refused (a
// rule per key is its queue's: declare it in Config.FlowLimits). They are
// set at Start as Config.FlowLimits are. See WorkerWithTimeout for the
// compile-time check.
type WorkerWithFlowLimits[T Args] interface {
	Worker[T]
	FlowLimits() []FlowLimit
}

// AddWorker registers w for the kind of T's Args on ws. It panics if the
// kind is not a valid name or already has a worker: both are programming
// errors found at start-up. AddWorkerSafely returns them instead.
func AddWorker[T Args](ws *Workers, w Worker[T]) {
	if err := AddWorkerSafely(ws, w); err != nil {
		panic(err)
	}
}

// AddWorkerSafely is AddWorker returning its error.
func AddWorkerSafely[T Args](ws *Workers, w Worker[T]) (err error) {
	var zero T
	kind := zero.Kind()
	tw, hasTimeout := w.(timeouter[T])
	nr, hasNextRetry := w.(nextRetrier[T])
	var flow []FlowLimit
	if fl, ok := w.(flowLimiter[T]); ok {
		for _, l := range fl.FlowLimits() {
			if l.PerKey {
				return workqtype.Invalid("FlowLimits", fmt.Sprintf("kind %q declares a limit per key: a rule per key is its queue's (Config.FlowLimits)", kind))
			}
			l.Table, l.Kind = TableJobRuns, kind
			if l.Queue == "" {
				l.Queue = "default"
			}
			if err := l.rule().Check(true); err != nil {
				return fmt.Errorf("workq: kind %q: flow limit %s: %w", kind, l, err)
			}
			flow = append(flow, l)
		}
	}
	defer func() {
		if err == nil {
			ws.flow = append(ws.flow, flow...)
		}
	}()
	decodeEmpty := decodesEmptyArgs[T]()
	return ws.addJob(kind, func(ctx context.Context, raw *worker.Job) error {
		job := new(Job[T])
		if err := job.fillArgs(raw, decodeEmpty); err != nil {
			return err
		}
		if hasTimeout {
			if d := tw.Timeout(job); d > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, d)
				defer cancel()
			}
		}
		err := w.Work(ctx, job)
		if hasNextRetry && retryable(err) {
			if t := nr.NextRetry(job); !t.IsZero() {
				err = worker.RetryAt(t, err)
			}
		}
		return err
	})
}

// fill sets j to the typed view of a claimed job attempt, its payload
// decoded into T's Args (an error made with Permanent when it does not
// decode).
func (j *Job[T]) fill(raw *worker.Job) error { return j.fillArgs(raw, decodesEmptyArgs[T]()) }

// decodesEmptyArgs reports whether empty args ({}) must be decoded into a
// T: unless T is a struct without its own UnmarshalJSON or UnmarshalText,
// which {} leaves at its zero value. Not decoding them is the common case of a job that
// carries nothing (the bench's, River's).
func decodesEmptyArgs[T any]() bool {
	t := reflect.TypeFor[T]()
	p := reflect.PointerTo(t)
	return t.Kind() != reflect.Struct || p.Implements(reflect.TypeFor[json.Unmarshaler]()) ||
		p.Implements(reflect.TypeFor[encoding.TextUnmarshaler]()) // which encoding/json refuses {} for
}

// fillArgs is fill, decoding empty args only when decodeEmpty
// (decodesEmptyArgs, worked out once per worker).
func (j *Job[T]) fillArgs(raw *worker.Job, decodeEmpty bool) error {
	*j = Job[T]{ID: raw.ID, Kind: raw.Kind, Queue: raw.Queue, Attempt: int(raw.Attempt), MaxAttempts: int(raw.MaxAttempts),
		Priority: raw.Priority, RunAt: raw.RunAt, CreatedAt: raw.CreatedAt, Metadata: workqtype.DecodeMetadata(raw.Metadata), LimitKey: raw.LimitKey, Shard: raw.Shard,
		RunID: raw.RunID, LeaseVersion: raw.LeaseVersion, raw: raw}
	if !decodeEmpty && string(raw.Payload) == "{}" {
		return nil
	}
	if err := json.Unmarshal(raw.Payload, &j.Args); err != nil {
		return worker.Permanent(fmt.Errorf("decode args of job %d (%s): %w", raw.ID, raw.Kind, err))
	}
	return nil
}

// CompleteTx completes the job inside tx, the handler's own transaction,
// fenced by the attempt's lease like every completion: the business write
// and "job done" commit together or not at all (River's JobCompleteTx).
// When this worker no longer holds the lease it returns an error wrapping
// ErrLeaseLost and writes nothing: roll tx back. Return from the handler
// after tx commits; if tx rolls back, the handler's result applies as
// usual.
func (j *Job[T]) CompleteTx(ctx context.Context, tx pgx.Tx) error {
	if j.raw == nil {
		return errors.New("workq: CompleteTx on a job the runtime did not claim")
	}
	return worker.CompleteTx(ctx, tx, j.raw)
}
