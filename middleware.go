package workq

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/kinds"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/worker"
)

// QueueConfig is the settings of one queue (River's QueueConfig).
type QueueConfig struct {
	// MaxWorkers is how many handlers of the queue run at once in this
	// Client, per table (1 to 10000; 0: Config.MaxWorkers).
	MaxWorkers int
}

// RetryPolicy returns how long after a failed attempt (attempt, 1 on the
// first) an item runs again. A result of zero or less takes the default
// full-jitter backoff (Config.BackoffBase, Config.BackoffCap).
type RetryPolicy func(attempt int, err error) time.Duration

// RetryAt makes a handler's err retry its item at t instead of after the
// backoff (Worker.NextRetry and Config.RetryPolicy are passed over). It is a
// retry like any other error: it uses an attempt, an item with none left
// fails, and Permanent or Snooze win. t is on this process's clock: the
// delay until t is added to the database's now(). A zero t chooses no
// time (NextRetry, the RetryPolicy or the backoff then do); a t in the past
// retries at once. The item's last error
// is err's text (nil err: "retry requested").
func RetryAt(t time.Time, err error) error { return worker.RetryAt(t, err) }

// RetryIn is RetryAt(time.Now().Add(d), err): err retries its item after
// d instead of after the backoff.
func RetryIn(d time.Duration, err error) error { return worker.RetryIn(d, err) }

// EnqueueMiddleware runs around every job enqueue of the Client (Enqueue,
// EnqueueMany, EnqueueManyFast and their Tx forms; River's
// JobInsertMiddleware): jobs are the jobs being enqueued, one for Enqueue,
// each with Opts set (the options given, merged with the Args' own
// EnqueueOpts; the Client's defaults fill what is still zero after the
// middleware). It may read or change them (Args and Opts), refuse the
// enqueue by returning an error without calling next (nothing is written),
// or call next and inspect or replace its results. EnqueueManyFast's next
// returns nil results (COPY reports none). The first middleware of
// Config.EnqueueMiddleware is the outermost.
type EnqueueMiddleware func(ctx context.Context, jobs []*EnqueueParams,
	next func(ctx context.Context) ([]Enqueued, error)) ([]Enqueued, error)

// WorkMiddleware runs around every handler execution of the Client, of
// every kind of work (jobs, outbox and inbox messages, timers; River's
// WorkerMiddleware). It may wrap ctx (values, deadlines), time, log or
// recover the run, and return next's error or another one (Permanent,
// Snooze, RetryAt...). The first middleware of Config.WorkMiddleware is
// the outermost. A claimed item without a handler fails before any
// middleware runs.
type WorkMiddleware func(ctx context.Context, info WorkInfo, next func(ctx context.Context) error) error

// WorkInfo is the read-only view of one attempt that work middleware gets:
// what it is, never its lease (no owner token).
type WorkInfo struct {
	Table       string // "job_runs", "outbox", "inbox" or "timers"
	ID          int64
	Kind        string // job runs: the job's kind ("" for other tables)
	Topic       string // outbox, inbox and timers: the topic
	Source      string // inbox: who sent the message
	Queue       string
	Attempt     int // 1 on the first attempt
	MaxAttempts int
	Shard       string // the database the item is on (Job.Shard)

	raw *worker.Job
}

// Logger returns the attempt's logger, as the handler's Logger does.
func (i WorkInfo) Logger() *slog.Logger {
	if i.raw == nil {
		return slog.New(slog.DiscardHandler)
	}
	return i.raw.Logger()
}

func workInfo(j *worker.Job) WorkInfo {
	i := itemInfo(&j.Item, j.Shard)
	i.raw = j
	return i
}

// itemInfo is the WorkInfo of item it on shard (its Logger discards).
func itemInfo(it *lease.Item, shard string) WorkInfo {
	i := WorkInfo{Table: string(it.Table), ID: it.ID, Topic: it.Topic, Queue: it.Queue, Attempt: int(it.Attempt),
		MaxAttempts: int(it.MaxAttempts), Shard: shard}
	k, _ := kinds.Of(it.Table)
	switch k.ClaimedKind {
	case kinds.WordKind:
		i.Kind = it.Kind
	case kinds.WordSource:
		i.Source = it.Kind
	}
	return i
}

// wrapHandler returns h run inside the work middleware, its error then
// given the retry policy's delay; h itself when there is neither.
func wrapHandler(h worker.HandlerFunc, mws []WorkMiddleware, policy RetryPolicy) worker.HandlerFunc {
	if len(mws) == 0 && policy == nil {
		return h
	}
	return func(ctx context.Context, job *worker.Job) error {
		var err error
		if len(mws) == 0 {
			err = h(ctx, job)
		} else {
			info := workInfo(job)
			next := func(ctx context.Context) error { return h(ctx, job) }
			for i := len(mws) - 1; i >= 0; i-- {
				m, inner := mws[i], next
				next = func(ctx context.Context) error { return m(ctx, info, inner) }
			}
			err = next(ctx)
		}
		if policy != nil && retryable(err) {
			if d := policy(int(job.Attempt), err); d > 0 {
				err = worker.RetryIn(d, err)
			}
		}
		return err
	}
}

// retryable reports whether err retries with the default backoff: an error
// that is not a snooze, permanent, or already given its retry time.
func retryable(err error) bool {
	if err == nil || worker.IsSnoozed(err) || worker.IsPermanent(err) {
		return false
	}
	_, timed := worker.RetryTime(err)
	return !timed
}

// aroundEnqueue runs the enqueue middleware around next, which enqueues
// the jobs made of params (single: Enqueue's one job, whose errors name no
// index).
func (c *Client) aroundEnqueue(ctx context.Context, params []EnqueueParams, single bool,
	next func(ctx context.Context, jobs []jobq.Job) ([]Enqueued, error)) ([]Enqueued, error) {
	if len(c.enqueueMW) == 0 {
		jobs, err := jobsOf(params, single, c.kinds)
		if err != nil {
			return nil, err
		}
		return next(ctx, jobs)
	}
	ps := make([]*EnqueueParams, len(params))
	for i, p := range params {
		if _, err := job(p.Args, p.Opts); err != nil {
			return nil, indexed(err, i, single)
		}
		var o EnqueueOpts
		if p.Opts != nil {
			o = *p.Opts
		}
		if a, ok := p.Args.(ArgsWithOpts); ok {
			o = o.merge(a.EnqueueOpts())
		}
		// The middleware may change what it gets in place: its own copy of
		// the maps and slices, never the caller's options (reused, perhaps
		// by other goroutines) or those the Args return for every job.
		o.Metadata = maps.Clone(o.Metadata)
		o.Unique.ByStates = slices.Clone(o.Unique.ByStates)
		ps[i] = &EnqueueParams{Args: p.Args, Opts: &o}
	}
	call := func(ctx context.Context) ([]Enqueued, error) {
		final := make([]EnqueueParams, len(ps))
		for i, p := range ps {
			final[i] = *p
		}
		jobs, err := jobsOf(final, single, c.kinds)
		if err != nil {
			return nil, err
		}
		return next(ctx, jobs)
	}
	for i := len(c.enqueueMW) - 1; i >= 0; i-- {
		m, inner := c.enqueueMW[i], call
		call = func(ctx context.Context) ([]Enqueued, error) { return m(ctx, ps, inner) }
	}
	return call(ctx)
}
