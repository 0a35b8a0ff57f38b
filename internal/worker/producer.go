package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/outage"
)

// producer is the one claimer of a (table, queue) in this process. It claims
// min(batch, free slots) in one statement, hands each item to a fixed pool of
// handler goroutines (concurrency of them, started once: a goroutine per job
// cost measurable CPU in stack growth), heartbeats every lease it holds in
// one statement, and cancels a handler whose lease it can no longer vouch
// for before the database could give the item to someone else.
//
// A handler slot is taken from claim until the handler returns. A finished
// attempt then waits for its completion flush outside the slots (the
// completer bounds those separately), and its lease is still heartbeated
// until the flush commits: the row stays in progress in the database until
// then, and letting its lease lapse would have the reaper retry work that
// succeeded.
type producer struct {
	w      *Worker
	src    Source
	queue  string
	conc   int // handlers at once (Config.concurrencyOf the queue)
	engine *lease.Engine
	comp   *completer
	life   *lifecycle

	notified chan struct{} // new work may be there: a notification, or the listener (re)connected
	// listened: the listener (re)connected; the heartbeat beats at once to
	// catch the cancel requests of held items it did not hear.
	listened chan struct{}
	wake     chan struct{} // capacity came back: slots freed, or the completer caught up
	applied  chan struct{} // a completion was applied (Source.ClaimAfterCompletion)
	reaped   chan struct{} // the background reap requeued rows (reclaimSoon)

	reaping atomic.Bool // a reap of the queue's expired leases is running (reclaimSoon)

	mu       sync.Mutex
	held     map[*heldBatch]struct{} // the claims this producer holds leases of: every attempt not yet forgotten
	busy     int                     // claimed attempts whose handler has not returned (running or queued for a handler)
	wakeAt   int                     // >= 0: wake the claimer once busy drops to this
	handlers sync.WaitGroup
	work     chan *attempt // claimed items for the handler pool: concurrency + batch fit

	avgRun atomic.Int64 // moving average of handler run time, in nanoseconds

	failures failureLog // rate-limits the warnings about failed handlers

	// seat is the producer's place at the slots it shares with the
	// producers of the same (table, queue) on other workers
	// (Options.Shared); nil: only its own.
	seat *member

	prev []lease.Item // the last claim's items, for Source.ClaimOptions (claim loop only)
	// spare is an ended claim's items slice, cleared, for the next claim to
	// write into (lease.ClaimParams.Into; job runs without ClaimOptions,
	// claim loop only): the attempts hold copies of the items, so once
	// they exist nothing reads the slice. Dropped by an empty claim.
	spare []lease.Item
	woken bool // something outside this worker's completions asked for a claim since the last one (claim loop only)
	// completed are the applied completions since the last claim, for
	// Source.ClaimOptions (ClaimAfterCompletion with ClaimOptions only;
	// under mu).
	completed []Result

	// The claim loop's resume point (lease.ClaimParams.Resume): set after a
	// full claim, cleared after one that was not; lastFullScan is when the
	// loop last claimed without one (claim loop only).
	resume       *lease.ResumePoint
	lastFullScan time.Time
	// flow is the queue's flow-control state between claims (claim loop
	// only): a claim cut short by a limit is retried when the limit lets
	// it (flowRepoll at the latest), not at the next poll.
	flow lease.FlowCursor
}

// While a queue has a backlog, each claim resumes a margin before where the
// previous one started (lease.ClaimParams.Resume) instead of stepping over
// every index entry earlier claims left dead, and at least every
// fullScanEvery a claim reads the queue from its start: a ready row behind
// the resume point (a higher priority is never behind it; a row of a
// transaction that ran longer than resumeMargin, or given a run_at earlier
// than that) waits at most that long for it.
const (
	resumeMargin  = time.Second
	fullScanEvery = time.Second
)

// An attempt is queued from its claim until a handler goroutine takes it
// (running). Who settles it is decided by compare-and-swap: a handler
// goroutine starts it (queued to running) and finishes it (running to
// finished); a lost lease (lost) or the drain (released) ends it from queued
// or running; the watchdog gives back one that waited too long (queued to
// released). The winner owns the completion; the others discard their part.
const (
	attemptQueued int32 = iota // the zero value
	attemptRunning
	attemptFinished
	attemptLost
	attemptReleased
	attemptGivenBack // released by the watchdog before a handler took it
)

// A failed claim is retried after a pause from claimRetryBase doubling to
// claimRetryCap, with full jitter: a database that is back is claimed from
// within about claimRetryCap at worst, and at once when the listener
// reconnects first (it wakes every producer).
const (
	claimRetryBase = 25 * time.Millisecond
	claimRetryCap  = time.Second
)

// reclaimEvery is how often a producer reaps its queue's expired leases
// (when Config.Reclaim is on): leases only expire after a crash or a stall,
// so once a second is prompt enough.
const reclaimEvery = time.Second

// flowRepoll is how long a claim loop waits after a claim that a flow
// limit cut short before it claims again, when the limit does not say
// when it frees (a limit per key or per kind); it doubles, up to the
// poll interval, while such claims take nothing.
const flowRepoll = 50 * time.Millisecond

// heldBatch is one claim's attempts, held by its producer until each is
// forgotten (its completion flushed, or it was lost or released). The
// producer keeps its leases by claim, not by item: a map of items took an
// insert and a delete per job under the producer's lock, ~5% of the
// worker's CPU in a burn-down, where a claim is one insert and a forgotten
// attempt clears its slot, so it is garbage as soon as it was before.
type heldBatch struct {
	attempts []atomic.Pointer[attempt] // nil once forgotten
	left     atomic.Int32              // attempts not yet forgotten
}

// attempt is one claimed attempt, from claim until its completion is
// flushed (or it is lost or released).
type attempt struct {
	// job is what the handler gets, and job.Item the claimed item the
	// runtime reads (its id, token, run id): one allocation per attempt
	// for both. Only the runtime writes the item.
	job     Job
	ctx     context.Context
	cancel  context.CancelCauseFunc
	batch   *batchContext // nil without an execution timeout
	held    *heldBatch
	slot    int          // in held.attempts
	claimed int64        // Worker.mono when the claim's rows arrived: the queue wait the watchdog bounds starts here
	expiry  atomic.Int64 // Worker.mono after which the lease can no longer be vouched for
	state   atomic.Int32 // attemptQueued, then see the constants
	// cancelled is set once the job's cancel was requested and its
	// handler's context cancelled with ErrCancelled.
	cancelled atomic.Bool
	started   atomic.Int64 // unix nanos when the handler started (0 before)

	// The attempt's run archive record, which the handler's goroutine opens
	// and the drain may have to close: whichever of the two comes second
	// ends it (see setRecord and endRecord).
	recMu    sync.Mutex
	recEnd   func(Result) // set once the record began
	released *Result      // the drain's result, when it came first
}

// settle ends a queued or running attempt as lost or released.
func (a *attempt) settle(to int32) bool {
	return a.state.CompareAndSwap(attemptQueued, to) || a.state.CompareAndSwap(attemptRunning, to)
}

// live reports whether the attempt is queued or running.
func (a *attempt) live() bool {
	s := a.state.Load()
	return s == attemptQueued || s == attemptRunning
}

// setRecord hands over the attempt's open record; if the drain already
// reported the attempt released, the record is ended with that now.
func (a *attempt) setRecord(end func(Result)) {
	a.recMu.Lock()
	a.recEnd = end
	res := a.released
	a.recMu.Unlock()
	if res != nil {
		end(*res)
	}
}

// endRecord ends the attempt's record with res, or keeps res for setRecord
// when the handler's goroutine has not opened the record yet.
func (a *attempt) endRecord(res Result) {
	a.recMu.Lock()
	end := a.recEnd
	if end == nil {
		a.released = &res
	}
	a.recMu.Unlock()
	if end != nil {
		end(res)
	}
}

func newProducer(w *Worker, src Source, queue string, comp *completer, life *lifecycle) *producer {
	conc := w.cfg.concurrencyOf(queue)
	return &producer{
		w: w, src: src, queue: queue, conc: conc, engine: comp.engine, comp: comp, life: life,
		notified: make(chan struct{}, 1), listened: make(chan struct{}, 1), wake: make(chan struct{}, 1), applied: make(chan struct{}, 1),
		reaped: make(chan struct{}, 1),
		held:   map[*heldBatch]struct{}{}, work: make(chan *attempt, conc+w.cfg.Batch), wakeAt: -1,
	}
}

// startHandlers starts the handler pool; stopHandlers ends the idle part of
// it (a handler still running returns on its own).
func (p *producer) startHandlers() {
	for range p.conc {
		go func() {
			for a := range p.work {
				p.execute(a)
			}
		}()
	}
}

func (p *producer) stopHandlers() { close(p.work) }

func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// notify tells the claimer that new work may be there.
func (p *producer) notify() { poke(p.notified) }

// prefetchHorizon bounds the work a producer holds beyond its free handler
// slots: at most about this much, at the handlers' observed pace.
const prefetchHorizon = 20 * time.Millisecond

// maxQueueWait is how long a claimed item may wait for a handler before the
// watchdog gives it back (released: ready at once, attempt given back).
// Items claimed ahead of the free slots normally start within
// prefetchHorizon; one still waiting after this is behind handlers that
// stalled, and another worker should have it.
const maxQueueWait = time.Second

// slots returns how many items the claimer may claim now: 0 when it must
// wait, in which case a freed slot or the completer wakes it; short says a
// slot is free but the claimer waits for more (see below).
//
// Without a backlog (the last claim was not full) it claims up to the free
// handler slots. With one (more), it claims only once refill slots are free,
// so a busy producer does not claim one row per finished job (patient
// false lifts that, see run), and it may claim beyond the free slots what
// its handlers will start within prefetchHorizon at their observed pace:
// fast handlers get large claims, whose cost per row is far lower, while the
// items of slow handlers are never held back from other workers (a 1s
// handler earns no extra row).
func (p *producer) slots(more, patient bool, refill int) (n int, short bool) {
	if p.comp.backedUp() {
		return 0, false
	}
	cfg := p.w.cfg
	p.mu.Lock()
	defer p.mu.Unlock()
	free := p.conc - p.busy
	room, need := free, 1
	if more && p.busy > 0 {
		room += p.prefetch()
		if patient {
			need = refill
		}
	}
	if room < need {
		p.wakeAt = p.busy - (need - room)
		return 0, free > 0
	}
	p.wakeAt = -1
	return min(cfg.Batch, room), false
}

// prefetch is how many items beyond the free slots the handlers start within
// prefetchHorizon: horizon / average run time per handler, times the
// handlers, at most one batch; none before a handler has finished (the pace
// is unknown).
func (p *producer) prefetch() int {
	cfg := p.w.cfg
	avg := p.avgRun.Load()
	if avg == 0 {
		return 0
	}
	return int(min(int64(cfg.Batch), int64(prefetchHorizon)*int64(p.conc)/max(avg, int64(time.Microsecond))))
}

// slotFreed returns a handler slot and wakes the claimer if it was waiting
// for exactly this.
func (p *producer) slotFreed() {
	p.w.stats.inFlight.Add(-1)
	p.freeQueued()
}

// freeQueued is slotFreed for an item whose in-flight count already went
// with its give-back: the item held a place in the handler channel until
// now, so the claimer could not count it free before (busy never exceeds
// what the channel holds).
func (p *producer) freeQueued() {
	if p.seat != nil {
		p.seat.release(1)
	}
	p.mu.Lock()
	p.busy--
	wake := p.wakeAt >= 0 && p.busy <= p.wakeAt
	if wake {
		p.wakeAt = -1
	}
	p.mu.Unlock()
	if wake {
		poke(p.wake)
	}
}

// observe feeds one handler's run time into the moving average (1/8 weight;
// a lost update under contention only slows the average down).
func (p *producer) observe(d time.Duration) {
	old := p.avgRun.Load()
	if old == 0 {
		p.avgRun.Store(int64(d))
		return
	}
	p.avgRun.Store(old + (int64(d)-old)/8)
}

// run claims until ctx ends. Handlers keep running after it returns; drain
// waits for them.
//
// It claims when there may be work (hint: a notification, the poll, or a
// start) or when the last claim came back full (more), and there are free
// slots. A hint stays until a claim consumes it, so a notification that
// arrives while every slot is busy is acted on as soon as one frees.
func (p *producer) run(ctx context.Context) {
	cfg := p.w.cfg
	poll := time.NewTicker(cfg.Poll)
	defer poll.Stop()
	refill := max(1, min(cfg.Batch, p.conc)/4)
	hint, more := true, false
	p.woken = true
	claimErrors := 0      // failed claims in a row
	outageErrors := 0     // of which the outage log took
	retryStep := int32(0) // the backoff step of the next failure
	var lastReclaim time.Time
	// Waiting for refill free slots must not leave free slots idle for long
	// while work waits (slow handlers free them one by one): after
	// prefetchHorizon the claimer takes what is free.
	impatient := time.NewTimer(time.Hour)
	impatient.Stop()
	defer impatient.Stop()
	// The source's next due row (Source.NextDue), when it falls due before
	// the next poll.
	due := time.NewTimer(time.Hour)
	due.Stop()
	defer due.Stop()
	pastDue := false
	// A claim that a flow limit cut short claims again when the limit lets
	// it (FlowCursor.Wait), or after flowRepoll.
	limited := time.NewTimer(time.Hour)
	limited.Stop()
	defer limited.Stop()
	limitedEmpty := 0 // limited claims in a row that took nothing
	waiting, patient := false, true
	if p.seat != nil {
		// The weight of the shared slots' shares, read while the first
		// claims run (the seat keeps its share until then).
		p.weigh(ctx, 0)
	}
	for ctx.Err() == nil {
		if hint || more {
			n, short := p.slots(more, patient, refill)
			if short && !waiting {
				waiting = true
				impatient.Reset(prefetchHorizon)
			}
			if n > 0 && p.seat != nil {
				// The shared slots (Options.Shared) may hold it back: a
				// release there wakes it. After a failed claim it asks for
				// one: a claim that hangs on a database that is down must
				// not hold the slots the other shards work with.
				if claimErrors > 0 {
					n = 1
				}
				n = p.seat.acquire(n, p.prefetch())
			}
			if n > 0 {
				hint = false
				if waiting {
					waiting = false
					impatient.Stop()
				}
				patient = true
				got, err := p.claim(ctx, n)
				p.shareClaim(ctx, n, got, err)
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					hint = true
					claimErrors++
					p.w.stats.claimErrors.Add(1)
					backoff := retryStep
					retryStep = min(retryStep+1, 8)
					switch {
					case p.w.schemaMissing(err):
						backoff = 8 // said once; retry at the slowest pace
					case p.w.outage.Failed(err, "table", p.src.Table, "queue", p.queue):
						outageErrors++ // the outage says it once, and when it ends
					case claimErrors == 1:
						p.w.log.Warn("claim failed; retrying with backoff", "table", p.src.Table, "queue", p.queue, "err", err)
					default:
						p.w.log.Debug("claim failed again", "table", p.src.Table, "queue", p.queue, "errors", claimErrors, "err", err)
					}
					// The listener connecting again (after a database
					// restart) ends the pause at once, and the backoff
					// starts over: the next failures are most likely pooled
					// connections that died with the old server.
					pause := time.NewTimer(Backoff(backoff, claimRetryBase, claimRetryCap) + time.Millisecond)
					select {
					case <-ctx.Done():
						pause.Stop()
						return
					case <-pause.C:
					case <-p.notified:
						pause.Stop()
						retryStep = 0
					}
					continue
				}
				p.w.outage.OK()
				if claimErrors > 0 {
					p.w.schemaBack()
					level := slog.LevelInfo
					if outageErrors == claimErrors {
						level = slog.LevelDebug // the outage log said the database is back
					}
					p.w.log.Log(ctx, level, "claiming again", "table", p.src.Table, "queue", p.queue, "after_errors", claimErrors)
					claimErrors, outageErrors, retryStep = 0, 0, 0
				}
				if more = got == n; more {
					// The queue likely has more: claim again at once (reaping
					// beside it when that is due, or a busy queue would never
					// reap).
					if !cfg.NoReclaim && time.Since(lastReclaim) >= reclaimEvery {
						lastReclaim = time.Now()
						p.reclaimSoon(ctx)
					}
					continue
				}
				pastDue = p.armNextDue(ctx, due, pastDue)
				if p.flow.Limited() {
					// The queue's own rate or throttle says when it frees
					// (nothing of the queue starts before); a key's or a
					// kind's does not: claim again after flowRepoll,
					// doubling while such claims take nothing.
					if got == 0 {
						limitedEmpty = min(limitedEmpty+1, 5)
					} else {
						limitedEmpty = 0
					}
					d := p.flow.Wait()
					if d <= 0 {
						d = flowRepoll << (max(limitedEmpty, 1) - 1)
					}
					limited.Reset(min(d, cfg.Poll) + time.Millisecond)
				} else {
					limitedEmpty = 0
				}
			}
		}
		// Reap the queue's expired leases while there is nothing to claim,
		// beside the claim loop (reclaimSoon), so that a job notified
		// meanwhile never waits for the reap; rows it requeues are claimed
		// at once.
		if !cfg.NoReclaim && time.Since(lastReclaim) >= reclaimEvery {
			lastReclaim = time.Now()
			p.reclaimSoon(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-p.notified:
			hint, p.woken = true, true
		case <-p.applied:
			hint = true
		case <-p.reaped:
			hint = true
		case <-p.wake:
		case <-poll.C:
			hint, p.woken = true, true
		case <-impatient.C:
			waiting, patient = false, false
		case <-due.C:
			hint, p.woken = true, true
		case <-limited.C:
			hint = true
		}
	}
}

// shareClaim gives back to the shared slots what a claim of n did not
// use, and tells them whether it came back full (short or failed: nothing
// ready, and a shard that is down holds up no other); after a full one it
// reads the queue's ready and in-progress items (weigh) at most once per
// backlogProbeEvery, or within a tenth of it after a short claim.
func (p *producer) shareClaim(ctx context.Context, n, got int, err error) {
	m := p.seat
	if m == nil {
		return
	}
	wasDrained := m.isDrained()
	m.release(n - got)
	full := err == nil && got == n
	m.noted(full, -1)
	since := time.Since(m.probed)
	if full && (since >= backlogProbeEvery || wasDrained && since >= backlogProbeEvery/10) {
		p.weigh(ctx, got)
	}
}

// weigh reads the queue's ready and in-progress items (Engine.QueueDepth,
// at least floor) in the background and sets the seat's weight with it:
// off the claim path, so a slow read (a loaded database or host) does not
// stop the claims, and leave the handlers without work and the shared
// slots to the other shards. One read at a time, bounded by
// backlogProbeEvery (and the lease): the seat keeps its share of the
// handler slots until its first read ends.
func (p *producer) weigh(ctx context.Context, floor int) {
	m := p.seat
	if !m.probing.CompareAndSwap(false, true) {
		return
	}
	m.probed = time.Now()
	p.life.loops.Add(1) // within the claim loop's own: Stop waits for it
	go func() {
		defer p.life.loops.Done()
		defer m.probing.Store(false)
		qctx, cancel := context.WithTimeout(ctx, min(backlogProbeEvery, p.w.cfg.Lease/2))
		ds, err := p.engine.QueueDepth(qctx)
		cancel()
		depth := int64(-1)
		if err == nil {
			depth = int64(floor)
			for _, d := range ds {
				if d.Queue == p.queue {
					depth = max(depth, d.Ready+d.InProgress)
				}
			}
		}
		m.weigh(depth)
	}()
}

// backlogProbeEvery is how often a claim loop with a backlog and shared
// slots reads its queue's depth to weigh its share, and the bound of a
// read.
const backlogProbeEvery = time.Second

// armNextDue sets t to fire when the queue's next ready row falls due, if
// the source can tell (Source.NextDue) and that is before the next poll. A
// row already due that the claim did not get (locked by another claimer,
// the queue's limit, or due just after the claim) gets one quick retry;
// pastDue carries that across calls so that a queue held back by its limit
// waits for the poll, never spins.
func (p *producer) armNextDue(ctx context.Context, t *time.Timer, pastDue bool) bool {
	if p.src.NextDue == nil {
		return false
	}
	qctx, cancel := context.WithTimeout(ctx, p.w.cfg.Lease/2)
	defer cancel()
	wait, ok, err := p.src.NextDue(qctx, p.w.db, p.queue)
	switch {
	case err != nil:
		if ctx.Err() == nil && !p.w.schemaMissing(err) && !p.w.outage.Failed(err, "table", p.src.Table, "queue", p.queue) {
			p.w.log.Warn("next due time unknown; polling", "table", p.src.Table, "queue", p.queue, "err", err)
		}
		return false
	case !ok || wait >= p.w.cfg.Poll:
		return false
	case wait <= 0:
		if !pastDue {
			t.Reset(time.Millisecond)
		}
		return true
	}
	// A millisecond late rather than early: the claim compares with the
	// database clock, and waking before it would cost a claim for nothing.
	t.Reset(wait + time.Millisecond)
	return false
}

// reclaimSoon reaps this queue's expired leases (reclaim) on a goroutine of
// its own, one reap at a time, and wakes the claim loop when rows were
// requeued. The reap used to run in the claim loop: a notification that
// arrived meanwhile waited for it, 11 ms at the median and up to 83 ms on a
// machine at load 20 (docs/notes-i32-latency.md), about one batch in a
// hundred at 100 batches a second.
func (p *producer) reclaimSoon(ctx context.Context) {
	if !p.reaping.CompareAndSwap(false, true) {
		return
	}
	p.life.loops.Add(1) // within the claim loop's own: Stop waits for it
	go func() {
		defer p.life.loops.Done()
		defer p.reaping.Store(false)
		if p.reclaim(ctx) > 0 {
			poke(p.reaped)
		}
	}()
}

// reclaim reaps this queue's expired leases, so a deployment without a
// standalone reaper still recovers a crashed worker's items, and returns
// how many rows it requeued.
func (p *producer) reclaim(ctx context.Context) int {
	if p.comp.retrying.Load() > 0 {
		// This worker's own completions wait for the database (a flush
		// retrying): their leases may have expired meanwhile, and reaping
		// them would run finished work again. Reap after they are written.
		return 0
	}
	rctx, cancel := context.WithTimeout(ctx, p.w.cfg.Lease/2)
	defer cancel()
	got, err := p.w.reapFn(p.engine, rctx, p.queue, p.w.cfg.Batch)
	if err != nil {
		if ctx.Err() == nil && !p.w.schemaMissing(err) && !p.w.outage.Failed(err, "table", p.src.Table, "queue", p.queue) {
			p.w.log.Warn("reclaim of expired leases failed", "table", p.src.Table, "queue", p.queue, "err", err)
		}
		return 0
	}
	if got.Requeued+got.Failed > 0 {
		p.w.log.Info("reclaimed expired leases", "table", p.src.Table, "queue", p.queue, "requeued", got.Requeued, "failed", got.Failed)
		if obs := p.w.obs.get(); obs != nil {
			obs.Reclaimed(p.src.Table, p.queue, got)
		}
	}
	return got.Requeued
}

// claim claims up to n items and starts them. The claim can be cancelled
// (Stop does) or time out (lease/2): its statement may then still run, and
// commit, on the server, because a client that gives up on a statement does
// not stop it there (and a loaded server process may not even have read it
// yet). The producer minted the claim's token, so it closes the connection
// and releases whatever the token holds once that server process is done
// with the claim (Engine.ReleaseClaim ends the process while it is still
// this connection's, known by the connection's local address), instead of
// letting those rows sit until their leases expire and cost an attempt
// that never ran.
func (p *producer) claim(ctx context.Context, n int) (int, error) {
	cfg := p.w.cfg
	sent := p.w.mono()
	cctx, cancel := context.WithTimeout(ctx, cfg.Lease/2)
	defer cancel()
	conn, err := p.w.pool.Acquire(cctx)
	if err != nil {
		return 0, err // nothing was sent
	}
	params := lease.ClaimParams{Queue: p.queue, Max: n, Lease: cfg.Lease, WorkerID: cfg.ID, Flow: &p.flow}
	if p.src.ClaimOptions != nil {
		cc := ClaimContext{Queue: p.queue, Prev: p.prev, Woken: p.woken}
		p.mu.Lock()
		cc.Completed, p.completed = p.completed, nil
		p.mu.Unlock()
		params.Options = p.src.ClaimOptions(cc)
	}
	p.woken = false
	// Only job runs' claims write into a passed slice; a Source with
	// ClaimOptions reads the last claim's items as the next one's Prev.
	reuse := p.src.Table == lease.JobRuns && p.src.ClaimOptions == nil
	if reuse {
		params.Into, p.spare = p.spare, nil
	}
	if now := time.Now(); p.resume != nil && now.Sub(p.lastFullScan) < fullScanEvery {
		params.Resume = p.resume
	} else {
		p.lastFullScan = now
	}
	var started time.Time
	obs := p.w.obs.get()
	if obs != nil {
		started = time.Now()
	}
	c, err := p.w.claimFn(lease.New(p.w.rw.Wrap(conn), p.src.Table), cctx, params)
	if !reuse {
		p.prev = c.Items
	}
	p.resume = nil
	if err == nil && len(c.Items) == n {
		p.resume = lease.ResumeFrom(p.src.Table, c.Items, resumeMargin)
	}
	if obs != nil && (err != nil || len(c.Items) > 0) {
		obs.Claimed(ClaimEvent{Table: p.src.Table, Queue: p.queue, Items: c.Items, Lease: cfg.Lease,
			Started: started, Took: time.Since(started), Err: err})
	}
	if err != nil {
		// The connection's server process may still be running the claim:
		// it must not take another statement from the pool. Named before
		// the close, which may drop what the connection knows of it.
		backend := claimBackend(conn.Conn().PgConn())
		_ = conn.Conn().Close(context.WithoutCancel(ctx))
		conn.Release()
		// A statement refused for want of the schema never ran: nothing to
		// release (and releasing would fail the same way, for a lease).
		if c.Token != uuid.Nil && !lease.IsSchemaMissing(err) {
			p.releaseClaim(c.Token, backend, outage.Unreachable(err))
		}
		return 0, err
	}
	conn.Release()
	p.w.noteTimeline(c.Items)
	p.start(c, sent)
	got := len(c.Items)
	if reuse && got > 0 {
		// The attempts have their copies; the slice, cleared so that it
		// keeps no payload alive, is the next claim's. A claim writes
		// [0, len) and the kept slice was cleared whole, so clearing what
		// this claim wrote clears it whole again. An empty claim drops it:
		// an idle queue's producer keeps no slice (up to ~370 KB).
		clear(c.Items)
		p.spare = c.Items[:0]
	}
	return got, nil
}

// claimBackend names the server process of a claim's connection, by its
// PID and the connection's local TCP address, which is what the server sees
// as its client on a direct connection (lease.ReleaseClaim).
func claimBackend(c *pgconn.PgConn) lease.ClaimBackend {
	b := lease.ClaimBackend{PID: c.PID()}
	if addr, ok := c.Conn().LocalAddr().(*net.TCPAddr); ok {
		ap := addr.AddrPort()
		b.Addr, b.Port = ap.Addr().Unmap(), int(ap.Port())
	}
	return b
}

// releaseClaim releases, in the background, whatever token holds once its
// claim's server process is done, retrying for up to a lease and never past
// Stop's bound. If it cannot, the rows' leases expire and the reaper retries
// them. outaged says the claim failed because the database was unreachable.
func (p *producer) releaseClaim(token uuid.UUID, backend lease.ClaimBackend, outaged bool) {
	p.life.bg.Add(1)
	go func() {
		defer p.life.bg.Done()
		ctx, cancel := context.WithTimeout(p.life.hardCtx, p.w.cfg.Lease)
		defer cancel()
		for try := int32(0); ; try++ {
			n, err := p.engine.ReleaseClaim(ctx, token, backend)
			if err == nil {
				if n > 0 {
					p.w.stats.claimsReleased.Add(int64(n))
					// Expected after the database was unreachable (a
					// partition delivers the claim late): the outage
					// lines said so.
					level := slog.LevelWarn
					if outaged {
						level = slog.LevelInfo
					}
					p.w.log.Log(ctx, level, "released the rows of a claim whose result was lost", "table", p.src.Table, "queue", p.queue, "rows", n)
				}
				return
			}
			pause := Backoff(min(try, 6), 50*time.Millisecond, time.Second)
			if errors.Is(err, lease.ErrClaimInFlight) {
				// Ended, it is gone in a moment; running, perhaps longer.
				pause = Backoff(min(try, 5), 10*time.Millisecond, 250*time.Millisecond)
			}
			if !sleepCtx(ctx, pause) {
				// Expected while the database is unreachable: the outage
				// log tells of it; the reaper retries the rows after.
				if !p.w.outage.Failed(err, "table", p.src.Table, "queue", p.queue, "unreleased_claim", token) {
					p.w.log.Warn("could not release a failed claim's rows; their leases will expire and the reaper retries them",
						"table", p.src.Table, "queue", p.queue, "token", token, "err", err)
				}
				return
			}
		}
	}()
}

func (p *producer) start(c lease.Claim, sent int64) {
	if len(c.Items) == 0 {
		return
	}
	p.w.stats.claimed.Add(int64(len(c.Items)))
	expiry := sent + int64(lease.LocalTTL(p.w.cfg.Lease))
	// The execution timeout is one deadline per claimed batch: the items of a
	// claim start at once, or within prefetchHorizon for those claimed beyond
	// the free slots, and a timer per job cost ~15% of the worker's CPU. The
	// batch context is cancelled when its last item finishes.
	parent := p.w.base
	var done *batchContext
	if timeout := p.w.cfg.ExecTimeout; timeout > 0 {
		done = newBatchContext(p.w.base, timeout, len(c.Items))
		parent = done
	}
	batch := make([]*attempt, len(c.Items))
	// The lease is counted from when the claim was sent (expiry, above);
	// the wait for a handler from when its rows arrived. Counted from the
	// send, a claim whose reply took most of maxQueueWait (a slow link, a
	// loaded server) had its prefetched rows given back before a handler
	// could take them (fault scenario 3, "over the slow link").
	arrived := p.w.mono()
	held := &heldBatch{attempts: make([]atomic.Pointer[attempt], len(batch))}
	held.left.Store(int32(len(batch)))
	for i, it := range c.Items {
		ctx, cancel := context.WithCancelCause(parent)
		a := &attempt{job: Job{Item: it}, ctx: ctx, cancel: cancel, batch: done, held: held, slot: i, claimed: arrived}
		a.expiry.Store(expiry)
		held.attempts[i].Store(a)
		batch[i] = a
	}
	p.mu.Lock()
	p.held[held] = struct{}{}
	p.busy += len(batch)
	p.handlers.Add(len(batch))
	p.mu.Unlock()
	p.w.stats.inFlight.Add(int64(len(batch)))
	// Never blocks: the pool channel holds concurrency + batch items, and a
	// claim never takes more than the free slots plus at most one batch.
	for _, a := range batch {
		p.work <- a
	}
}

func (p *producer) execute(a *attempt) {
	defer p.handlers.Done()
	defer a.batch.finish()
	if !a.state.CompareAndSwap(attemptQueued, attemptRunning) {
		// Released, lost or given back before a handler goroutine took it:
		// do not run it. Its place in the handler channel frees only now.
		if a.state.Load() == attemptGivenBack {
			p.freeQueued()
		} else {
			p.slotFreed()
		}
		p.forget(a)
		return
	}
	cfg := p.w.cfg
	rec := p.w.runs.begin(&a.job.Item, cfg.ID, p.w.log)
	a.setRecord(rec.end)
	job := &a.job
	job.Schema, job.Shard, job.base, job.file = p.w.rw.Schema(), p.w.shard, p.w.log, rec.file
	ctx := a.ctx
	if p.seat != nil && p.seat.runPermit(ctx.Done()) {
		// One set of handler slots over the workers sharing them.
		defer p.seat.runDone()
	}
	obs := p.w.obs.get()
	if obs != nil {
		ctx = obs.HandlerStart(ctx, job)
	}
	started := time.Now()
	a.started.Store(started.UnixNano())
	err := p.call(ctx, job)
	finished := time.Now()
	a.cancel(nil)
	p.observe(finished.Sub(started))
	if obs != nil {
		obs.HandlerEnd(ctx, job, err, finished.Sub(started))
	}

	won := a.state.CompareAndSwap(attemptRunning, attemptFinished)
	p.slotFreed()
	if !won {
		p.forget(a)
		if a.state.Load() == attemptLost {
			rec.end(Result{Item: a.job.Item, Outcome: "lease_lost", Error: errString(err), Started: started, Finished: finished})
		}
		// Released: the drain's completion ends the attempt's record.
		return
	}
	c := p.outcome(a.job.Item, err)
	if c.Outcome == lease.Done {
		c.Output = job.Output()
	}
	if d, ok := ThrottleDuration(err); ok && !a.cancelled.Load() {
		p.throttle(ctx, a.job.Item, d)
	}
	if a.cancelled.Load() && c.Outcome != lease.Cancelled {
		// The completion statement ends a cancel-requested attempt
		// cancelled whatever it carries; saying so keeps the failure log
		// from reporting a retry.
		c.Outcome, c.Delay = lease.Cancelled, 0
		if err != nil {
			c.Error = err.Error()
		}
	}
	if c.Outcome == lease.Retry || c.Outcome == lease.Failed {
		p.failures.report(p, &a.job.Item, c, finished)
	}
	p.w.stats.pending.Add(1)
	p.comp.add(pendingCompletion{c: c, item: &a.job.Item, expiry: &a.expiry, started: started, finished: finished, inTx: job.completedInTx.Load(),
		owner: p, attempt: a})
}

// afterFlush is what follows the flush of a handler's completion (the
// completer calls it, on its flush goroutine; a method rather than a
// closure per job): the attempt's record ends, its lease is forgotten and
// a claim that waits for completions is woken.
func (p *producer) afterFlush(a *attempt, res Result) {
	a.recEnd(res)
	p.forget(a)
	p.w.stats.pending.Add(-1)
	if p.src.ClaimAfterCompletion && res.Applied {
		if p.src.ClaimOptions != nil {
			p.mu.Lock()
			p.completed = append(p.completed, res)
			p.mu.Unlock()
		}
		poke(p.applied)
	}
}

// forget removes a settled attempt from the leases this producer holds,
// once (a second call does nothing). The same item may be held under a
// newer claim too (lost, reaped and claimed again while the old handler ran
// on): that attempt stays.
func (p *producer) forget(a *attempt) {
	if !a.held.attempts[a.slot].CompareAndSwap(a, nil) {
		return
	}
	if a.held.left.Add(-1) == 0 {
		p.mu.Lock()
		delete(p.held, a.held)
		p.mu.Unlock()
	}
}

// holding calls f for every attempt this producer holds the lease of (not
// forgotten), under p.mu.
func (p *producer) holding(f func(a *attempt)) {
	for b := range p.held {
		for i := range b.attempts {
			if a := b.attempts[i].Load(); a != nil {
				f(a)
			}
		}
	}
}

// newest is, of the attempts held for each item, the one of its latest
// claim (the highest lease version): an item lost, reaped and claimed again
// while its old handler ran on is held twice, and only the new lease is
// the producer's to extend (the heartbeat), cancel (a cancel by id) or
// release (the drain). The older attempt stays held until it is forgotten:
// the watchdog can still lose it, and once the newer one is forgotten it
// is the item's newest. Under p.mu.
func (p *producer) newest(keep func(a *attempt) bool) map[int64]*attempt {
	byID := make(map[int64]*attempt)
	p.holding(func(a *attempt) {
		if !keep(a) {
			return
		}
		if o, ok := byID[a.job.Item.ID]; !ok || a.job.Item.LeaseVersion > o.job.Item.LeaseVersion {
			byID[a.job.Item.ID] = a
		}
	})
	return byID
}

// call routes the job and runs its handler, turning a panic into an error
// that carries the stack.
func (p *producer) call(ctx context.Context, job *Job) (err error) {
	defer func() {
		if v := recover(); v != nil {
			p.w.stats.panics.Add(1)
			err = fmt.Errorf("panic: %v\n%s", v, debug.Stack())
		}
	}()
	h, err := p.src.Route(job)
	if err != nil {
		return err
	}
	return h(ctx, job)
}

func (p *producer) outcome(it lease.Item, err error) lease.Completion {
	return CompletionOf(it, err, p.w.cfg.BackoffBase, p.w.cfg.BackoffCap)
}

// CompletionOf is the completion the runtime makes of a handler's result
// err on attempt it: nil is Done, Snooze(d) and Throttle(d) are Snoozed after d, Permanent
// is Failed, an error wrapping ErrCancelled is Cancelled, any other error
// is Retry after the full-jitter backoff of base and cap, or at the time
// RetryAt asks for (the completion statement fails an item whose attempts
// are used up).
func CompletionOf(it lease.Item, err error, base, cap time.Duration) lease.Completion {
	c := lease.Completion{ID: it.ID, Token: it.OwnerToken, RunID: it.RunID}
	if err == nil {
		// Before errors.As's targets, which it moves to the heap.
		c.Outcome = lease.Done
		return c
	}
	var snooze *snoozeError
	var throttled *throttleError
	switch {
	case errors.As(err, &snooze):
		c.Outcome, c.Delay = lease.Snoozed, snooze.d
	case errors.As(err, &throttled):
		// Not a failure: no attempt used, and the archive says why.
		c.Outcome, c.Delay, c.Error = lease.Snoozed, throttled.d, throttled.Error()
	case IsPermanent(err):
		c.Outcome, c.Error = lease.Failed, err.Error()
	case errors.Is(err, ErrCancelled):
		c.Outcome, c.Error = lease.Cancelled, err.Error()
	default:
		c.Outcome, c.Error = lease.Retry, err.Error()
		if at, ok := RetryTime(err); ok {
			c.Delay = max(0, time.Until(at))
		} else {
			c.Delay = Backoff(it.Attempt, base, cap)
		}
	}
	return c
}

// heartbeat extends, every lease/3 and in one statement, every lease this
// producer holds: running attempts and finished ones whose completion is
// not flushed yet. A running attempt whose lease did not extend is lost and
// its handler is cancelled; a finished one is left to its flush, which
// finds out for itself.
//
// It also beats at once when the listener starts listening (first or
// again): a cancel requested before (a claim can beat the listener's
// connection, or the connection was down) sent a notification nobody
// heard, and the next beat may be a third of the lease away.
func (p *producer) heartbeat(ctx context.Context) {
	everyOr(ctx, p.w.cfg.Lease/3, p.listened, func() { p.beat(ctx) })
}

// every calls f every d until ctx ends.
func every(ctx context.Context, d time.Duration, f func()) { everyOr(ctx, d, nil, f) }

// everyOr is every that also calls f at once when now receives (nil:
// never).
func everyOr(ctx context.Context, d time.Duration, now <-chan struct{}, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-now:
		}
		f()
	}
}

func (p *producer) beat(ctx context.Context) {
	ttl := p.w.cfg.Lease
	p.mu.Lock()
	byID := p.newest(func(a *attempt) bool {
		s := a.state.Load()
		return s == attemptQueued || s == attemptRunning || s == attemptFinished
	})
	p.mu.Unlock()
	held := make([]lease.Held, 0, len(byID))
	for id, a := range byID {
		held = append(held, lease.Held{ID: id, Token: a.job.Item.OwnerToken})
	}
	if len(held) == 0 {
		return
	}
	sent := p.w.mono()
	// Bounded, so one hung statement cannot hold up the next heartbeat; the
	// watchdog cancels handlers meanwhile if the leases run out.
	hctx, cancel := context.WithTimeout(ctx, ttl/3)
	beats, err := p.engine.Beat(hctx, held, ttl)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			p.w.stats.heartbeatErrors.Add(1)
			if !p.w.schemaMissing(err) && !p.w.outage.Failed(err, "table", p.src.Table, "queue", p.queue, "heartbeat_items", len(held)) {
				p.w.log.Warn("heartbeat failed", "table", p.src.Table, "queue", p.queue, "items", len(held), "err", err)
			}
		}
		return
	}
	p.w.outage.OK()
	expiry := sent + int64(lease.LocalTTL(ttl))
	for _, id := range beats.Extended {
		byID[id].expiry.Store(expiry)
	}
	for _, id := range beats.Lost {
		if a := byID[id]; a.live() {
			p.lose(a, "heartbeat did not extend the lease (expired, reaped or taken over)")
		}
	}
	for _, id := range beats.CancelRequested {
		p.cancelAttempt(byID[id], "heartbeat")
	}
}

// cancelRequested cancels the handler of item id if this producer runs it
// (a notification on the cancel channel named it).
func (p *producer) cancelRequested(id int64) {
	// A scan of the held attempts (a few thousand at most), without the
	// map newest builds: every worker hears every cancel.
	var a *attempt
	p.mu.Lock()
	p.holding(func(h *attempt) {
		if h.job.Item.ID == id && (a == nil || h.job.Item.LeaseVersion > a.job.Item.LeaseVersion) {
			a = h
		}
	})
	p.mu.Unlock()
	if a != nil {
		p.cancelAttempt(a, "notification")
	}
}

// cancelAttempt cancels a live attempt's handler with ErrCancelled, once.
// The attempt goes on to its completion as usual, which ends it cancelled
// (and ends a still queued one before its handler starts).
func (p *producer) cancelAttempt(a *attempt, via string) {
	if !a.live() || !a.cancelled.CompareAndSwap(false, true) {
		return
	}
	p.w.stats.cancelRequests.Add(1)
	p.w.log.Info("job cancelled; cancelling the handler", "table", a.job.Item.Table, "id", a.job.Item.ID,
		"run_id", a.job.Item.RunID, "attempt", a.job.Item.Attempt, "via", via)
	a.cancel(ErrCancelled)
}

// watchdog cancels a running attempt once no claim or heartbeat has
// confirmed its lease for lease.LocalTTL: by the database clock the lease
// has not expired yet, so its handler stops before another worker can claim
// the item (a worker cut off from the database must not run on).
func (p *producer) watchdog(ctx context.Context) {
	every(ctx, min(max(p.w.cfg.Lease/40, 10*time.Millisecond), time.Second), p.watch)
}

// watch is one round of the watchdog.
func (p *producer) watch() {
	now := p.w.mono()
	var late, waiting []*attempt
	p.mu.Lock()
	p.holding(func(a *attempt) {
		switch {
		case !a.live():
		case a.expiry.Load() <= now:
			late = append(late, a)
		case a.state.Load() == attemptQueued && now-a.claimed > int64(maxQueueWait):
			waiting = append(waiting, a)
		}
	})
	p.mu.Unlock()
	for _, a := range late {
		p.lose(a, "no heartbeat confirmed the lease in time; cancelled before it can expire in the database")
	}
	p.giveBack(waiting)
	p.failures.flush(p, false, time.Now())
}

// giveBack releases claimed items that never got a handler (see
// maxQueueWait). The handler goroutine that dequeues one later skips it.
func (p *producer) giveBack(waiting []*attempt) {
	n := 0
	for _, a := range waiting {
		if !a.state.CompareAndSwap(attemptQueued, attemptGivenBack) {
			continue // a handler took it meanwhile
		}
		n++
		p.w.stats.inFlight.Add(-1)
		p.comp.add(pendingCompletion{
			c:    lease.Completion{ID: a.job.Item.ID, Token: a.job.Item.OwnerToken, RunID: a.job.Item.RunID, Outcome: lease.Released},
			item: &a.job.Item, expiry: &a.expiry, finished: time.Now(),
			after: func(Result) { p.forget(a) },
		})
	}
	if n > 0 {
		// The handlers' pace is not what it was: claim nothing ahead of the
		// free slots until handlers finish again.
		p.avgRun.Store(0)
		p.w.log.Warn("gave back claimed items that waited too long for a handler", "table", p.src.Table, "queue", p.queue,
			"count", n, "waited_over", maxQueueWait)
	}
}

func (p *producer) lose(a *attempt, why string) {
	if !a.settle(attemptLost) {
		return
	}
	p.w.stats.leaseLost.Add(1)
	if obs := p.w.obs.get(); obs != nil {
		obs.LeaseLost(&a.job.Item)
	}
	p.w.log.Warn("lease lost; cancelling the handler", "table", a.job.Item.Table, "id", a.job.Item.ID,
		"run_id", a.job.Item.RunID, "attempt", a.job.Item.Attempt, "why", why)
	a.cancel(ErrLeaseLost)
}

// drain waits, until ctx ends, for in-flight handlers, then cancels the rest
// and releases their leases so another worker can take them at once.
func (p *producer) drain(ctx context.Context) {
	done := make(chan struct{})
	go func() { p.handlers.Wait(); close(done) }()
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	p.mu.Lock()
	var release []*attempt
	// The newest attempt of each item only: an older one still live (its
	// lease lost, not yet noticed) would be reported released under the
	// item's id along with it.
	for _, a := range p.newest(func(*attempt) bool { return true }) {
		if a.settle(attemptReleased) {
			release = append(release, a)
		}
	}
	p.mu.Unlock()
	for _, a := range release {
		a.cancel(ErrShutdown)
		p.comp.add(pendingCompletion{
			c:    lease.Completion{ID: a.job.Item.ID, Token: a.job.Item.OwnerToken, RunID: a.job.Item.RunID, Outcome: lease.Released},
			item: &a.job.Item, expiry: &a.expiry, started: startedAt(a), finished: time.Now(),
			after: func(res Result) {
				a.endRecord(res) // finish the attempt's meta.json and close its attempt.log
				p.forget(a)
			},
		})
	}
	if len(release) > 0 {
		p.w.log.Info("released unfinished work at shutdown", "table", p.src.Table, "queue", p.queue, "count", len(release))
	}
	// Give cancelled handlers a moment to return; Go cannot stop one that
	// ignores its context, and the process may exit under it.
	grace := time.NewTimer(handlerGrace)
	defer grace.Stop()
	select {
	case <-done:
	case <-grace.C:
	case <-p.life.hardCtx.Done():
	}
}

// startedAt is when a's handler started, or the zero time if it never did.
func startedAt(a *attempt) time.Time {
	if ns := a.started.Load(); ns != 0 {
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
