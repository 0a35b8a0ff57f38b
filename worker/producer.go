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
// min(batch, free slots) in one statement, runs each item on its own
// goroutine, and heartbeats all of them with one statement per claim token.
type producer struct {
	w      *Worker
	queue  string
	engine *lease.Engine

	wake     chan struct{} // a notification or a finished job
	mu       sync.Mutex
	inflight map[int64]*running
	pending  atomic.Int64 // finished attempts whose completion is not flushed yet
	handlers sync.WaitGroup
}

// running is one attempt in progress.
type running struct {
	item     lease.Item
	cancel   context.CancelCauseFunc
	extended atomic.Int64 // unix nanos of the last successful claim or heartbeat
	gone     atomic.Bool  // lease lost or released: the handler's result is discarded
}

func newProducer(w *Worker, queue string) *producer {
	return &producer{
		w: w, queue: queue, engine: lease.New(w.pool, lease.JobRuns),
		wake: make(chan struct{}, 1), inflight: map[int64]*running{},
	}
}

func (p *producer) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// free is how many more rows this producer may hold: rows stay in progress
// in the database until their completion is flushed, so those count too.
func (p *producer) free() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.w.cfg.Concurrency - len(p.inflight) - int(p.pending.Load())
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
	for {
		free := p.free()
		if free >= refill || (free > 0 && p.emptyInflight()) {
			n := min(cfg.Batch, free)
			claim, err := p.engine.Claim(ctx, lease.ClaimParams{
				Queue: p.queue, Max: n, Lease: cfg.Lease, WorkerID: cfg.WorkerID, ReclaimExpired: cfg.Reclaim,
			})
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
			if len(claim.Items) == n && n > 0 {
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

func (p *producer) emptyInflight() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.inflight) == 0
}

func (p *producer) start(c lease.Claim) {
	if len(c.Items) == 0 {
		return
	}
	p.w.stats.claimed.Add(int64(len(c.Items)))
	now := time.Now().UnixNano()
	p.mu.Lock()
	for _, it := range c.Items {
		ctx, cancel := context.WithCancelCause(context.Background())
		r := &running{item: it, cancel: cancel}
		r.extended.Store(now)
		p.inflight[it.ID] = r
		p.handlers.Add(1)
		p.w.stats.inFlight.Add(1)
		go p.execute(ctx, r)
	}
	p.mu.Unlock()
}

func (p *producer) execute(ctx context.Context, r *running) {
	defer p.handlers.Done()
	cfg := p.w.cfg
	if cfg.ExecTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.ExecTimeout)
		defer cancel()
	}
	rec := p.w.runs.begin(r.item, cfg.WorkerID, p.w.log)
	job := &Job{Item: r.item, logger: rec.logger}
	started := time.Now()
	err := p.call(ctx, job)
	finished := time.Now()
	r.cancel(nil)

	gone := r.gone.Load()
	if !gone {
		p.pending.Add(1)
	}
	p.mu.Lock()
	delete(p.inflight, r.item.ID)
	p.mu.Unlock()
	p.w.stats.inFlight.Add(-1)

	if gone {
		// Lost lease or released at shutdown: someone else may own the row.
		if errors.Is(context.Cause(ctx), ErrLeaseLost) {
			rec.end(Result{Item: r.item, Outcome: "lease_lost", Error: errString(err), Started: started, Finished: finished})
		}
		p.signal()
		return
	}
	c := p.outcome(r.item, err)
	p.w.completer.add(pendingCompletion{c: c, item: r.item, started: started, finished: finished, after: func(res Result) {
		rec.end(res)
		p.pending.Add(-1)
		p.signal()
	}})
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
		if r.gone.Load() {
			continue
		}
		items[id] = r
		byToken[r.item.OwnerToken] = append(byToken[r.item.OwnerToken], id)
	}
	p.mu.Unlock()
	now := time.Now()
	for token, ids := range byToken {
		extended, lost, err := p.engine.Heartbeat(ctx, token, ids, leaseTTL)
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
	if r.gone.Swap(true) {
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
		if !r.gone.Swap(true) {
			release = append(release, r)
		}
	}
	p.mu.Unlock()
	for _, r := range release {
		r.cancel(ErrShutdown)
		p.w.completer.add(pendingCompletion{
			c:    lease.Completion{ID: r.item.ID, Token: r.item.OwnerToken, Outcome: lease.Released},
			item: r.item, started: time.Unix(0, r.extended.Load()), finished: time.Now(),
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
