package worker

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/workq/workq/lease"
)

// producer is the one claimer of a (table, queue) in this process: it claims
// min(batch, free slots) in one statement, hands each item to a fixed pool of
// handler goroutines (concurrency of them, started once: a goroutine per job
// cost measurable CPU in stack growth), and heartbeats all of them with one
// statement per claim token.
type producer struct {
	w      *Worker
	queue  string
	engine *lease.Engine

	wake     chan struct{} // a notification or a finished job
	mu       sync.Mutex
	inflight map[int64]*running
	pending  atomic.Int64 // finished attempts whose completion is not flushed yet
	handlers sync.WaitGroup
	work     chan *running // claimed items for the handler pool
}

// Who settles an attempt: exactly one of the handler (finished), a lost
// heartbeat (lost) or the shutdown drain (released), by compare-and-swap from
// running. The winner owns the completion; the others discard their part.
const (
	attemptRunning int32 = iota
	attemptFinished
	attemptLost
	attemptReleased
)

func (r *running) settle(to int32) bool { return r.state.CompareAndSwap(attemptRunning, to) }

// reclaimEvery is how often a producer's claim also reaps its queue's
// expired leases (when Config.Reclaim is on).
const reclaimEvery = time.Second

// batchDone cancels a claim's deadline context when its last item ends.
type batchDone struct {
	left   atomic.Int32
	cancel context.CancelFunc
}

func (b *batchDone) finish() {
	if b != nil && b.left.Add(-1) == 0 {
		b.cancel()
	}
}

// running is one attempt in progress.
type running struct {
	item     lease.Item
	ctx      context.Context
	cancel   context.CancelCauseFunc
	batch    *batchDone   // nil without an execution timeout
	extended atomic.Int64 // unix nanos of the last successful claim or heartbeat
	state    atomic.Int32 // attemptRunning until one party settles the attempt
	started  atomic.Int64 // unix nanos when the handler started (0 before)

	// The attempt's run archive record, which the handler's goroutine opens
	// and the drain may have to close: whichever of the two comes second
	// ends it (see setRecord and endRecord).
	recMu    sync.Mutex
	recEnd   func(Result) // set once the record began
	released *Result      // the drain's result, when it came first
}

// setRecord hands over the attempt's open record; if the drain already
// reported the attempt released, the record is ended with that now.
func (r *running) setRecord(end func(Result)) {
	r.recMu.Lock()
	r.recEnd = end
	res := r.released
	r.recMu.Unlock()
	if res != nil {
		end(*res)
	}
}

// endRecord ends the attempt's record with res, or keeps res for setRecord
// when the handler's goroutine has not opened the record yet.
func (r *running) endRecord(res Result) {
	r.recMu.Lock()
	end := r.recEnd
	if end == nil {
		r.released = &res
	}
	r.recMu.Unlock()
	if end != nil {
		end(res)
	}
}

func newProducer(w *Worker, queue string) *producer {
	return &producer{
		w: w, queue: queue, engine: lease.New(w.pool, lease.JobRuns),
		wake: make(chan struct{}, 1), inflight: map[int64]*running{},
		work: make(chan *running, w.cfg.Concurrency),
	}
}

// startHandlers starts the handler pool; stopHandlers ends it once every
// handler returned.
func (p *producer) startHandlers() {
	for range p.w.cfg.Concurrency {
		go func() {
			for r := range p.work {
				p.execute(r)
			}
		}()
	}
}

func (p *producer) stopHandlers() { close(p.work) }

func (p *producer) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// free is how many more rows this producer may hold (rows stay in progress
// in the database until their completion is flushed, so those count too),
// and whether no handler is running.
func (p *producer) free() (n int, idle bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.w.cfg.Concurrency - len(p.inflight) - int(p.pending.Load()), len(p.inflight) == 0
}

// run claims until ctx ends. Handlers keep running after it returns; drain
// waits for them.
func (p *producer) run(ctx context.Context) {
	cfg := p.w.cfg
	poll := time.NewTimer(0)
	defer poll.Stop()
	// Refill once a quarter of the usual batch is free, so a full producer
	// does not claim one row per finished job.
	refill := max(1, min(cfg.Batch, cfg.Concurrency)/4)
	claimErrors := 0
	// Inline reclaim scans the queue's in-progress rows; leases only expire
	// after a crash or a stall, so once a second is prompt enough.
	var lastReclaim time.Time
	for ctx.Err() == nil {
		free, idle := p.free()
		if free >= refill || (free > 0 && idle) {
			n := min(cfg.Batch, free)
			reclaim := cfg.Reclaim && time.Since(lastReclaim) >= reclaimEvery
			// The statement runs to completion even if shutdown starts meanwhile:
			// a claim cancelled client-side can still commit on the server, and
			// its rows would then sit until their leases expire. Rows it returns
			// are run and drained like any others.
			claimCtx, cancelClaim := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			claim, err := p.engine.Claim(claimCtx, lease.ClaimParams{
				Queue: p.queue, Max: n, Lease: cfg.Lease, WorkerID: cfg.WorkerID, ReclaimExpired: reclaim,
			})
			cancelClaim()
			if err == nil && reclaim {
				lastReclaim = time.Now()
			}
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				claimErrors++
				p.w.stats.claimErrors.Add(1)
				p.w.log.Warn("claim failed", "queue", p.queue, "err", err)
				if !sleepCtx(ctx, Backoff(int32(min(claimErrors, 8)), 100*time.Millisecond, 5*time.Second)) {
					return
				}
				continue
			}
			claimErrors = 0
			p.start(claim)
			if len(claim.Items) == n {
				continue // the queue likely has more: claim again at once
			}
		}
		poll.Reset(cfg.Poll)
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-poll.C:
		}
	}
}

func (p *producer) start(c lease.Claim) {
	if len(c.Items) == 0 {
		return
	}
	p.w.stats.claimed.Add(int64(len(c.Items)))
	now := time.Now().UnixNano()
	// The execution timeout is one deadline per claimed batch: every item of
	// a claim starts at once (a claim never takes more than the idle handler
	// goroutines), and a timer per job cost ~15% of the worker's CPU. The
	// batch context is cancelled when its last item finishes.
	parent := context.Background()
	var done *batchDone
	if timeout := p.w.cfg.ExecTimeout; timeout > 0 {
		var cancel context.CancelFunc
		parent, cancel = context.WithTimeout(parent, timeout)
		done = &batchDone{cancel: cancel}
		done.left.Store(int32(len(c.Items)))
	}
	p.mu.Lock()
	batch := make([]*running, len(c.Items))
	for i, it := range c.Items {
		ctx, cancel := context.WithCancelCause(parent)
		r := &running{item: it, ctx: ctx, cancel: cancel, batch: done}
		r.extended.Store(now)
		p.inflight[it.ID] = r
		batch[i] = r
	}
	p.handlers.Add(len(batch))
	p.w.stats.inFlight.Add(int64(len(batch)))
	p.mu.Unlock()
	// Never blocks: the pool channel holds concurrency items and a claim
	// never takes more than the free slots.
	for _, r := range batch {
		p.work <- r
	}
}

func (p *producer) execute(r *running) {
	defer p.handlers.Done()
	defer r.batch.finish()
	if r.state.Load() != attemptRunning {
		// Released (or lost) before a handler goroutine took it: do not run it.
		p.forget(r)
		p.signal()
		return
	}
	cfg := p.w.cfg
	rec := p.w.runs.begin(&r.item, cfg.WorkerID, p.w.log)
	r.setRecord(rec.end)
	job := &Job{Item: r.item, base: p.w.log, file: rec.file}
	started := time.Now()
	r.started.Store(started.UnixNano())
	err := p.call(r.ctx, job)
	finished := time.Now()
	r.cancel(nil)

	won := r.settle(attemptFinished)
	if won {
		// Before leaving inflight, so the slot is never counted free twice; it
		// frees (and wakes the claimer) once the completion is flushed.
		p.pending.Add(1)
	}
	p.forget(r)
	if !won {
		p.signal()
		if r.state.Load() == attemptLost {
			rec.end(Result{Item: r.item, Outcome: "lease_lost", Error: errString(err), Started: started, Finished: finished})
		}
		// Released: the drain's completion ends the attempt's record.
		return
	}
	c := p.outcome(r.item, err)
	p.w.completer.add(pendingCompletion{c: c, item: r.item, started: started, finished: finished, after: func(res Result) {
		rec.end(res)
		p.pending.Add(-1)
		p.signal()
	}})
}

// forget removes a settled attempt from the in-flight set. The caller wakes
// the claimer when that frees a slot.
func (p *producer) forget(r *running) {
	p.mu.Lock()
	delete(p.inflight, r.item.ID)
	p.mu.Unlock()
	p.w.stats.inFlight.Add(-1)
}

// call runs the handler, turning a panic into an error that carries the stack.
func (p *producer) call(ctx context.Context, job *Job) (err error) {
	defer func() {
		if v := recover(); v != nil {
			p.w.stats.panics.Add(1)
			err = fmt.Errorf("panic: %v\n%s", v, debug.Stack())
		}
	}()
	h, ok := p.w.handlers[job.Kind]
	if !ok {
		return fmt.Errorf("no handler registered for kind %q on worker %s", job.Kind, p.w.cfg.WorkerID)
	}
	return h(ctx, job)
}

func (p *producer) outcome(it lease.Item, err error) lease.Completion {
	c := lease.Completion{ID: it.ID, Token: it.OwnerToken}
	var snooze *snoozeError
	switch {
	case err == nil:
		c.Outcome = lease.Done
	case errors.As(err, &snooze):
		c.Outcome, c.Delay = lease.Snoozed, snooze.d
	case IsPermanent(err):
		c.Outcome, c.Error = lease.Failed, err.Error()
	default:
		c.Outcome, c.Error = lease.Retry, err.Error()
		c.Delay = Backoff(it.Attempt, p.w.cfg.BackoffBase, p.w.cfg.BackoffCap)
	}
	return c
}

// heartbeat extends every in-flight lease every lease/3 with one statement
// per claim token. An item whose lease did not extend, or that has gone a
// whole lease without a successful heartbeat, is cancelled with ErrLeaseLost.
func (p *producer) heartbeat(ctx context.Context) {
	lease := p.w.cfg.Lease
	t := time.NewTicker(lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.beat(ctx, lease)
	}
}

func (p *producer) beat(ctx context.Context, leaseTTL time.Duration) {
	byToken := map[uuid.UUID][]int64{}
	p.mu.Lock()
	items := make(map[int64]*running, len(p.inflight))
	for id, r := range p.inflight {
		if r.state.Load() != attemptRunning {
			continue
		}
		items[id] = r
		byToken[r.item.OwnerToken] = append(byToken[r.item.OwnerToken], id)
	}
	p.mu.Unlock()
	now := time.Now()
	for token, ids := range byToken {
		// Bounded, so one hung statement cannot stop every later heartbeat
		// (and with it the "no heartbeat for a whole lease" check).
		hctx, cancel := context.WithTimeout(ctx, leaseTTL/3)
		extended, lost, err := p.engine.Heartbeat(hctx, token, ids, leaseTTL)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			p.w.log.Warn("heartbeat failed", "queue", p.queue, "items", len(ids), "err", err)
			for _, id := range ids {
				if r := items[id]; now.Sub(time.Unix(0, r.extended.Load())) >= leaseTTL {
					p.lose(r, "no successful heartbeat for a whole lease")
				}
			}
			continue
		}
		for _, id := range extended {
			items[id].extended.Store(now.UnixNano())
		}
		for _, id := range lost {
			p.lose(items[id], "heartbeat did not extend the lease")
		}
	}
}

func (p *producer) lose(r *running, why string) {
	if !r.settle(attemptLost) {
		return
	}
	p.w.stats.leaseLost.Add(1)
	p.w.log.Warn("lease lost; cancelling the handler", "table", r.item.Table, "id", r.item.ID,
		"run_id", r.item.RunID, "attempt", r.item.Attempt, "why", why)
	r.cancel(ErrLeaseLost)
}

// drain waits up to timeout for in-flight handlers, then cancels the rest
// and releases their leases so another worker can take them at once.
func (p *producer) drain(timeout time.Duration) {
	done := make(chan struct{})
	go func() { p.handlers.Wait(); close(done) }()
	select {
	case <-done:
		return
	case <-time.After(timeout):
	}
	p.mu.Lock()
	var release []*running
	for _, r := range p.inflight {
		if r.settle(attemptReleased) {
			release = append(release, r)
		}
	}
	p.mu.Unlock()
	for _, r := range release {
		r.cancel(ErrShutdown)
		p.w.completer.add(pendingCompletion{
			c:    lease.Completion{ID: r.item.ID, Token: r.item.OwnerToken, Outcome: lease.Released},
			item: r.item, started: startedAt(r), finished: time.Now(),
			after: r.endRecord, // finish the attempt's meta.json and close its attempt.log
		})
	}
	if len(release) > 0 {
		p.w.log.Info("released unfinished jobs at shutdown", "queue", p.queue, "count", len(release))
	}
	// Give cancelled handlers a moment to return; Go cannot stop one that
	// ignores its context, and the process may exit under it.
	select {
	case <-done:
	case <-time.After(2 * time.Second):
	}
}

// startedAt is when r's handler started, or the zero time if it never did.
func startedAt(r *running) time.Time {
	if ns := r.started.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
