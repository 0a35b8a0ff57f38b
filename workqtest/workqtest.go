// Package workqtest tests workq handlers and the code that enqueues work,
// against a real database, without running a worker (River's rivertest).
//
// Work runs one job handler on given args inside the caller's transaction,
// as the runtime would (enqueue, claim, run, complete) and reports the
// outcome, including a snooze's duration and whether the handler completed
// the job in the transaction. RequireEnqueued, RequireSent and
// RequireTimer assert what code under test wrote (job runs, outbox
// messages, timers) and fail the test with a readable list of what is
// there when it is not what was expected. Roll the transaction back at
// the end of the test: nothing is left behind.
//
// Every function takes the Client whose work it tests and reads and
// writes that Client's schema (workq.Config.Schema): pass the plain
// transaction or pool, never client.InSchema(db).
package workqtest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/clienthook"
	"github.com/workq/workq/internal/dbschema"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/worker"
)

// Outcome is how an attempt ended, as the runtime would record it.
type Outcome string

// The outcomes of Work.
const (
	Done    Outcome = "done"    // the handler returned nil, or completed the job in the transaction
	Retry   Outcome = "retry"   // an error: the job runs again after a backoff (Failed when its attempts are used up)
	Failed  Outcome = "failed"  // Permanent(err), or an error on the last attempt
	Snoozed Outcome = "snoozed" // Snooze(d): again after d, no attempt used
	// Cancelled: an error wrapping workq.ErrCancelled; the job ends
	// cancelled and is not retried.
	Cancelled Outcome = "cancelled"
)

// Result is what one Work did.
type Result[T workq.Args] struct {
	Job     *workq.Job[T] // the attempt as the handler saw it
	Outcome Outcome
	// Err is the handler's error as the runtime got it: after the work
	// middleware, and with a retry time when NextRetry or the RetryPolicy
	// chose one (nil when it returned nil).
	Err    error
	Snooze time.Duration // with Snoozed: how long until it runs again
	// RetryAt, with Retry: when the job runs again (its run_at after the
	// attempt), as NextRetry, the RetryPolicy or the backoff chose.
	RetryAt time.Time
	// CompletedInTx: the handler completed the job in the transaction
	// (Job.CompleteTx) before it returned.
	CompletedInTx bool
	Status        workq.JobState // the job's state after the attempt: ready, done, failed or cancelled
}

// Work enqueues args (with opts) through client, claims that job as the
// runtime would, runs w on it once as client's worker would run it, and
// applies the outcome, all on db:
//
//   - the test's pgx.Tx: nothing is committed, and a rollback at the end
//     leaves nothing behind; the handler's own writes must then go through
//     the same transaction (a handler that completes the job in a
//     transaction of its own would wait on the test's lock);
//   - the pool: the job is committed before the handler runs, so the
//     handler may use transactions of its own (Job.CompleteTx).
//
// As the worker does, Work runs w inside client's work middleware
// (workq.Config.WorkMiddleware), bounds the attempt by the worker's
// execution timeout (workq.Config.JobTimeout) and w's Timeout, and
// times a retry by w's NextRetry, then the Client's RetryPolicy, then the
// backoff of Config.BackoffBase and BackoffCap. A panic is not recovered: the test fails with
// its stack.
//
// The attempt is the job's first unless an option says otherwise
// (WithAttempt).
//
// A setup failure (the job not enqueued or not claimable, say for a RunAt
// in the future; args whose Kind is not the one T's Worker registers; an
// attempt past the job's max attempts) fails tb. w's own error is in the
// Result, never a test failure: assert it.
func Work[T workq.Args](ctx context.Context, tb testing.TB, client *workq.Client, db workq.DB, w workq.Worker[T], args T, opts *workq.EnqueueOpts, wopts ...WorkOption) *Result[T] {
	tb.Helper()
	var cfg workConfig
	for _, o := range wopts {
		o(&cfg)
	}
	if cfg.set && (cfg.attempt < 1 || cfg.attempt > maxAttempt) {
		tb.Fatalf("workqtest: WithAttempt(%d): the attempt is 1 to %d", cfg.attempt, maxAttempt)
	}
	var zero T
	if args.Kind() != zero.Kind() {
		tb.Fatalf("workqtest: args of kind %q, but a Worker of %T works kind %q", args.Kind(), zero, zero.Kind())
	}
	ws := workq.NewWorkers()
	if err := workq.AddWorkerSafely(ws, w); err != nil {
		tb.Fatalf("workqtest: %v", err)
	}
	run, err := clienthook.JobHandler(client, ws, zero.Kind())
	if err != nil {
		tb.Fatalf("workqtest: %v", err)
	}
	var e workq.Enqueued
	switch db := db.(type) {
	case pgx.Tx:
		e, err = client.EnqueueTx(ctx, db, args, opts)
	case interface {
		Begin(context.Context) (pgx.Tx, error)
	}:
		err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			e, err = client.EnqueueTx(ctx, tx, args, opts)
			return err
		})
	default:
		tb.Fatalf("workqtest: Work needs a pgx.Tx or a pool, got %T", db)
	}
	if err != nil {
		tb.Fatalf("workqtest: enqueue %s: %v", args.Kind(), err)
	}
	if e.Duplicate {
		tb.Fatalf("workqtest: enqueue %s: job %d holds its dedup or unique key", args.Kind(), e.ID)
	}
	tx := inSchema(tb, client, db)
	item, ok, err := lease.New(tx, lease.JobRuns).ClaimByIDAttempt(ctx, e.ID, run.Worker.Lease, "workqtest", int32(cfg.attempt))
	if err != nil {
		tb.Fatalf("workqtest: claim job %d: %v", e.ID, err)
	}
	if !ok {
		tb.Fatalf("workqtest: job %d (%s) is not ready to claim (a RunAt or Delay in the future?)", e.ID, args.Kind())
	}
	if item.Attempt > item.MaxAttempts {
		tb.Fatalf("workqtest: WithAttempt(%d): job %d (%s) has only %d attempts (EnqueueOpts.MaxAttempts)", cfg.attempt, e.ID, args.Kind(), item.MaxAttempts)
	}
	row, err := admin.Get(ctx, tx, lease.JobRuns, e.ID)
	if err != nil {
		tb.Fatalf("workqtest: read job %d: %v", e.ID, err)
	}
	item.Kind, item.Payload = row.Kind, row.Payload
	item.LimitKey, _ = row.Details["limit_key"].(string)
	if row.Metadata != nil {
		if item.Metadata, err = json.Marshal(row.Metadata); err != nil {
			tb.Fatalf("workqtest: job %d: %v", e.ID, err)
		}
	}
	raw := &worker.Job{Item: item, Schema: client.Schema(), Shard: client.ShardName()}
	job := new(workq.Job[T])
	if err := clienthook.Fill(job, raw); err != nil {
		tb.Fatalf("workqtest: %v", err)
	}
	res := &Result[T]{Job: job}
	hctx := ctx
	if d := run.Worker.ExecTimeout; d > 0 {
		var cancel context.CancelFunc
		hctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	res.Err = run.Handler(hctx, raw)
	res.CompletedInTx = raw.CompletedInTx()
	c := worker.CompletionOf(item, res.Err, run.Worker.BackoffBase, run.Worker.BackoffCap)
	switch c.Outcome {
	case lease.Done:
		res.Outcome = Done
	case lease.Snoozed:
		res.Outcome, res.Snooze = Snoozed, c.Delay
	case lease.Failed:
		res.Outcome = Failed
	case lease.Cancelled:
		res.Outcome = Cancelled
	default:
		res.Outcome = Retry
	}
	if !res.CompletedInTx {
		applied, err := lease.New(tx, lease.JobRuns).Complete(ctx, []lease.Completion{c})
		if err != nil {
			tb.Fatalf("workqtest: complete job %d: %v", e.ID, err)
		}
		if st, ok := applied.Status[e.ID]; ok && st == lease.StatusFailed {
			res.Outcome = Failed // a retry on the last attempt
		}
	} else if res.Outcome != Done {
		res.Outcome = Done // the transaction ended the attempt; the handler's later result changes nothing
	}
	after, err := admin.Get(ctx, tx, lease.JobRuns, e.ID)
	if err != nil {
		tb.Fatalf("workqtest: read job %d: %v", e.ID, err)
	}
	res.Status = workq.JobState(after.Status)
	if res.Outcome == Retry {
		res.RetryAt = after.RunAt
	}
	return res
}

// maxAttempt is the largest attempt WithAttempt takes (max_attempts is an
// integer column).
const maxAttempt = 1<<31 - 1

// WorkOption changes how Work runs its attempt.
type WorkOption func(*workConfig)

type workConfig struct {
	attempt int // the attempt to run, when set
	set     bool
}

// WithAttempt makes Work run the job's attempt n (1 is the first) as
// though attempts 1 to n-1 had been used and failed: the handler sees
// Job.Attempt == n, the backoff and NextRetry are those of attempt n, and
// an error on the job's last attempt (n == MaxAttempts) fails it. Test "it
// fails twice and then succeeds" as three calls, WithAttempt(1), (2) and
// (3). n above the job's max attempts fails the test.
func WithAttempt(n int) WorkOption {
	return func(c *workConfig) { c.attempt, c.set = n, true }
}

// inSchema returns db with its statements put into client's schema (db
// already in it stays as it is).
func inSchema(tb testing.TB, client *workq.Client, db workq.DB) workq.DB {
	tb.Helper()
	rw, err := dbschema.NewRewriter(client.Schema())
	if err != nil {
		tb.Fatalf("workqtest: %v", err)
	}
	return rw.Wrap(db)
}

// Opts narrow what a Require function accepts; zero fields match any.
type Opts struct {
	Queue    string
	Priority int16 // 0: any
	// MaxAttempts: 0 any.
	MaxAttempts int
	// Status: "" any. Outbox messages and timers have the same states as
	// job runs.
	Status workq.JobState
}

func (o *Opts) match(it admin.Item) []string {
	if o == nil {
		return nil
	}
	var diffs []string
	if o.Queue != "" && it.Queue != o.Queue {
		diffs = append(diffs, fmt.Sprintf("queue %q, want %q", it.Queue, o.Queue))
	}
	if o.Priority != 0 && it.Priority != o.Priority {
		diffs = append(diffs, fmt.Sprintf("priority %d, want %d", it.Priority, o.Priority))
	}
	if o.MaxAttempts != 0 && int(it.MaxAttempts) != o.MaxAttempts {
		diffs = append(diffs, fmt.Sprintf("max attempts %d, want %d", it.MaxAttempts, o.MaxAttempts))
	}
	if o.Status != "" && it.Status != string(o.Status) {
		diffs = append(diffs, fmt.Sprintf("status %s, want %s", it.Status, o.Status))
	}
	return diffs
}

// listed returns the newest items of table (kind or topic, "" for all).
func listed(ctx context.Context, tb testing.TB, db workq.DB, table lease.Table, kind string) []admin.Item {
	tb.Helper()
	page, err := admin.List(ctx, db, table, admin.Filter{Kind: kind, Limit: admin.MaxLimit})
	if err != nil {
		tb.Fatalf("workqtest: list %s: %v", table, err)
	}
	return page.Items
}

// require finds the newest item of table with kind that matches opts, or
// fails tb listing what is there.
func require(ctx context.Context, tb testing.TB, db workq.DB, table lease.Table, what, kind string, opts *Opts) admin.Item {
	tb.Helper()
	items := listed(ctx, tb, db, table, kind)
	var near []string
	for _, it := range items {
		diffs := opts.match(it)
		if len(diffs) == 0 {
			full, err := admin.Get(ctx, db, table, it.ID) // a list leaves the payload out
			if err != nil {
				tb.Fatalf("workqtest: read %s %d: %v", table, it.ID, err)
			}
			return full
		}
		near = append(near, fmt.Sprintf("  id %d: %s", it.ID, strings.Join(diffs, ", ")))
	}
	if len(near) > 0 {
		tb.Fatalf("workqtest: no %s %q matches:\n%s", what, kind, strings.Join(near, "\n"))
	}
	var kinds []string
	for _, it := range listed(ctx, tb, db, table, "") {
		kinds = append(kinds, fmt.Sprintf("%q", it.Kind))
	}
	if len(kinds) == 0 {
		tb.Fatalf("workqtest: no %s %q: none at all was written", what, kind)
	}
	tb.Fatalf("workqtest: no %s %q; there are: %s", what, kind, strings.Join(kinds, ", "))
	return admin.Item{}
}

// RequireEnqueued asserts that a job run of T's kind matching opts was
// enqueued (visible on db: the test's transaction or pool) and returns the
// newest such job, its args decoded.
func RequireEnqueued[T workq.Args](ctx context.Context, tb testing.TB, client *workq.Client, db workq.DB, opts *Opts) *workq.Job[T] {
	tb.Helper()
	var zero T
	it := require(ctx, tb, inSchema(tb, client, db), lease.JobRuns, "job", zero.Kind(), opts)
	job := new(workq.Job[T])
	err := clienthook.Fill(job, &worker.Job{Item: lease.Item{Table: lease.JobRuns, ID: it.ID, Queue: it.Queue, Kind: it.Kind,
		Payload: it.Payload, Priority: it.Priority, Attempt: it.Attempts, MaxAttempts: it.MaxAttempts, RunAt: it.RunAt, CreatedAt: it.CreatedAt}})
	if err != nil {
		tb.Fatalf("workqtest: job %d: %v", it.ID, err)
	}
	job.Metadata = it.Metadata
	job.LimitKey, _ = it.Details["limit_key"].(string)
	return job
}

// RequireNotEnqueued asserts that no job run of T's kind matching opts was
// enqueued.
func RequireNotEnqueued[T workq.Args](ctx context.Context, tb testing.TB, client *workq.Client, db workq.DB, opts *Opts) {
	tb.Helper()
	var zero T
	for _, it := range listed(ctx, tb, inSchema(tb, client, db), lease.JobRuns, zero.Kind()) {
		if len(opts.match(it)) == 0 {
			tb.Fatalf("workqtest: job %d of kind %q was enqueued; want none", it.ID, zero.Kind())
		}
	}
}

// RequireSent asserts that an outbox message of topic matching opts was
// written and returns the newest, its payload decoded into T.
func RequireSent[T any](ctx context.Context, tb testing.TB, client *workq.Client, db workq.DB, topic string, opts *Opts) *workq.Message[T] {
	tb.Helper()
	return message[T](tb, require(ctx, tb, inSchema(tb, client, db), lease.Outbox, "outbox message", topic, opts), lease.Outbox)
}

// RequireTimer asserts that a timer of topic matching opts was scheduled
// and returns the newest, its payload decoded into T.
func RequireTimer[T any](ctx context.Context, tb testing.TB, client *workq.Client, db workq.DB, topic string, opts *Opts) *workq.Message[T] {
	tb.Helper()
	return message[T](tb, require(ctx, tb, inSchema(tb, client, db), lease.Timers, "timer", topic, opts), lease.Timers)
}

func message[T any](tb testing.TB, it admin.Item, table lease.Table) *workq.Message[T] {
	tb.Helper()
	li := lease.Item{Table: table, ID: it.ID, Queue: it.Queue, Kind: it.Kind, Topic: it.Kind,
		Payload: it.Payload, Priority: it.Priority, Attempt: it.Attempts, MaxAttempts: it.MaxAttempts, RunAt: it.RunAt, CreatedAt: it.CreatedAt}
	// The table's own columns, as a claim of the item would read them.
	for name, v := range it.Details {
		switch name {
		case "message_id":
			li.MessageID = fmt.Sprint(v)
		case "partition_key":
			li.PartitionKey, _ = v.(string)
		case "correlation_id":
			li.CorrelationID, _ = v.(string)
		case "headers":
			li.Headers, _ = v.(json.RawMessage)
		case "due_time":
			li.DueTime, _ = v.(time.Time)
		}
	}
	if table == lease.Outbox && li.Headers == nil {
		li.Headers = json.RawMessage("{}") // as stored when the message has none
	}
	m := new(workq.Message[T])
	if err := clienthook.Fill(m, &worker.Job{Item: li}); err != nil {
		tb.Fatalf("workqtest: %s %d: %v", table, it.ID, err)
	}
	return m
}

// PanicTB returns a testing.TB whose Fatal and Error panic, for runnable
// examples and programs that use this package outside a test. Only Helper,
// Fatalf, Errorf, Fatal, Error and Logf may be called on it.
func PanicTB() testing.TB { return panicTB{} }

type panicTB struct{ testing.TB }

func (panicTB) Helper()                         {}
func (panicTB) Fatalf(format string, a ...any)  { panic(fmt.Sprintf(format, a...)) }
func (panicTB) Errorf(format string, a ...any)  { panic(fmt.Sprintf(format, a...)) }
func (panicTB) Fatal(a ...any)                  { panic(fmt.Sprint(a...)) }
func (panicTB) Error(a ...any)                  { panic(fmt.Sprint(a...)) }
func (panicTB) Logf(format string, args ...any) {}
