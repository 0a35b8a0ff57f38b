package worker

import (
	"context"
	"time"

	"github.com/workq/workq/internal/lease"
)

// Observer is told what the runtime does, for metrics and tracing: package
// metrics implements it for Prometheus, package tracing for OpenTelemetry,
// and Observers combines several. Set it in Options.Observer; without one
// the runtime pays a nil check per event and nothing else.
//
// Methods are called synchronously on the runtime's goroutines (claim
// loops, handler goroutines, completion flushers), concurrently for
// different queues and items: they must be safe for concurrent use, return
// quickly, never block, and not call back into the Worker. Embed
// NopObserver to implement only some of them (and to keep compiling when
// methods are added).
type Observer interface {
	// Claimed reports one claim statement of a (table, queue) that
	// returned items or failed; claims that found nothing are not reported.
	Claimed(ClaimEvent)
	// HandlerStart is called on the handler's goroutine just before the
	// handler runs. The context it returns is the handler's: ctx itself,
	// or one derived from it (a tracing span).
	HandlerStart(ctx context.Context, job *Job) context.Context
	// HandlerEnd is called when the handler returned err after took; ctx
	// is the one HandlerStart returned.
	HandlerEnd(ctx context.Context, job *Job, err error, took time.Duration)
	// Completed reports an attempt whose completion was applied
	// (r.Applied): r.Final() says how it ended.
	Completed(r Result)
	// LeaseLost reports an attempt whose lease this worker lost: a
	// heartbeat did not extend it, it could no longer be vouched for in
	// time, or its completion found it gone. Worker.Stats counts the same
	// events as LeaseLost.
	LeaseLost(it *lease.Item)
	// Flushed reports one completion flush of a table (after its retries).
	Flushed(FlushEvent)
	// Reclaimed reports the expired leases a claim loop reaped on its own
	// queue (Config.Reclaim), when it reaped any.
	Reclaimed(table lease.Table, queue string, r lease.Reaped)
}

// ClaimEvent is one claim statement of a (table, queue).
type ClaimEvent struct {
	Table   lease.Table
	Queue   string
	Items   []lease.Item // the claimed items; the observer must not keep or change the slice
	Lease   time.Duration
	Started time.Time // when the claim was sent
	Took    time.Duration
	Err     error
}

// PickupLatency is how long it was from the moment it became due (its
// run_at) until this claim took it, both on the database clock: the claim
// sets locked_until to its now() plus the lease, so no query is needed.
func (e ClaimEvent) PickupLatency(it *lease.Item) time.Duration {
	// The claim adds the lease in whole milliseconds, rounded up.
	leased := (e.Lease + time.Millisecond - 1) / time.Millisecond * time.Millisecond
	return max(0, it.LockedUntil.Add(-leased).Sub(it.RunAt))
}

// FlushEvent is one completion flush: a single statement that ends many
// attempts of one table (retried on an error; Tries counts the statements).
type FlushEvent struct {
	Table   lease.Table
	Queues  []string // the distinct queues of the flushed attempts
	Size    int      // completions in the flush
	Lost    int      // completions whose lease was gone
	Tries   int
	Started time.Time
	Took    time.Duration
	Err     error // the last try's error when the flush gave up
}

// Final is how an applied attempt ended: done, retry (back to ready after
// a backoff), failed (at once, or a retry with no attempts left), snoozed,
// released or cancelled (whatever the handler returned, once its cancel
// was requested). The Outcome of a Result the worker reports is already
// its Final; Final is for a Result made otherwise.
func (r Result) Final() lease.Outcome {
	switch {
	case r.Status == lease.StatusDone:
		return lease.Done
	case r.Status == lease.StatusFailed:
		return lease.Failed
	case r.Status == lease.StatusCancelled:
		return lease.Cancelled
	}
	return r.Outcome
}

// NopObserver implements Observer and does nothing; embed it.
type NopObserver struct{}

func (NopObserver) Claimed(ClaimEvent) {}
func (NopObserver) HandlerStart(ctx context.Context, _ *Job) context.Context {
	return ctx
}
func (NopObserver) HandlerEnd(context.Context, *Job, error, time.Duration) {}
func (NopObserver) Completed(Result)                                       {}
func (NopObserver) LeaseLost(*lease.Item)                                  {}
func (NopObserver) Flushed(FlushEvent)                                     {}
func (NopObserver) Reclaimed(lease.Table, string, lease.Reaped)            {}

// Observers combines observers into one that calls each in order (nil
// entries are dropped; none left gives nil). HandlerStart chains the
// contexts: each observer gets the one the previous returned.
func Observers(obs ...Observer) Observer {
	var list multiObserver
	for _, o := range obs {
		if o != nil {
			list = append(list, o)
		}
	}
	switch len(list) {
	case 0:
		return nil
	case 1:
		return list[0]
	}
	return list
}

type multiObserver []Observer

func (m multiObserver) Claimed(e ClaimEvent) {
	for _, o := range m {
		o.Claimed(e)
	}
}

func (m multiObserver) HandlerStart(ctx context.Context, job *Job) context.Context {
	for _, o := range m {
		ctx = o.HandlerStart(ctx, job)
	}
	return ctx
}

func (m multiObserver) HandlerEnd(ctx context.Context, job *Job, err error, took time.Duration) {
	for _, o := range m {
		o.HandlerEnd(ctx, job, err, took)
	}
}

func (m multiObserver) Completed(r Result) {
	for _, o := range m {
		o.Completed(r)
	}
}

func (m multiObserver) LeaseLost(it *lease.Item) {
	for _, o := range m {
		o.LeaseLost(it)
	}
}

func (m multiObserver) Flushed(e FlushEvent) {
	for _, o := range m {
		o.Flushed(e)
	}
}

func (m multiObserver) Reclaimed(t lease.Table, q string, r lease.Reaped) {
	for _, o := range m {
		o.Reclaimed(t, q, r)
	}
}

// QueueLoad is what a worker holds of one (table, queue) at one moment.
type QueueLoad struct {
	Table    lease.Table
	Queue    string
	InFlight int // claimed attempts holding a handler slot: running, or waiting for a handler
}

// TableLoad is what waits in a worker's completion buffer of one table.
type TableLoad struct {
	Table   lease.Table
	Pending int64 // finished attempts whose completion is not flushed yet
}

// Load returns, for every (table, queue) the worker serves, the attempts in
// flight, and for every table the completions waiting for their flush. It
// is for gauges read at scrape time; a worker not running returns nil.
func (w *Worker) Load() ([]QueueLoad, []TableLoad) {
	w.mu.Lock()
	r := w.run
	w.mu.Unlock()
	select {
	case <-w.Stopped():
		return nil, nil
	default:
	}
	if r == nil {
		return nil, nil
	}
	queues := make([]QueueLoad, 0, len(r.producers))
	for _, p := range r.producers {
		p.mu.Lock()
		busy := p.busy
		p.mu.Unlock()
		queues = append(queues, QueueLoad{Table: p.src.Table, Queue: p.queue, InFlight: busy})
	}
	tables := make([]TableLoad, 0, len(r.completers))
	for t, c := range r.completers {
		tables = append(tables, TableLoad{Table: t, Pending: c.backlog.Load()})
	}
	return queues, tables
}

// Idler is implemented by an Observer that at times has nothing to do (the
// Client's events while nobody subscribes): while Idle reports true the
// runtime skips it and builds no events for it, so an idle observer costs
// one call per event site. Idle must be cheap (an atomic load) and safe for
// concurrent use. An Observers combination is idle when all its members
// are; a member that is not an Idler is never idle.
type Idler interface {
	Idle() bool
}

// Idle reports whether every observer of m is idle.
func (m multiObserver) Idle() bool {
	for _, o := range m {
		if i, ok := o.(Idler); !ok || !i.Idle() {
			return false
		}
	}
	return true
}

// observing is a Worker's Observer, skipped while it is idle.
type observing struct {
	o    Observer
	idle func() bool // nil: never idle
}

func newObserving(o Observer) observing {
	r := observing{o: o}
	if i, ok := o.(Idler); ok {
		r.idle = i.Idle
	}
	return r
}

// get returns the observer, or nil when there is none or it is idle. A
// site that reports a start and an end (a handler run, a flush) gets it
// once and uses it for both.
func (r observing) get() Observer {
	if r.o == nil || (r.idle != nil && r.idle()) {
		return nil
	}
	return r.o
}
