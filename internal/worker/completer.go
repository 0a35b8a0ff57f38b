package worker

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/outage"
)

// Result is the fate of one finished attempt, reported after its completion
// was flushed (or given up on).
type Result struct {
	Item lease.Item
	// Outcome is how the attempt ended, as runs.outcome records it: done,
	// retry (the item runs again after a backoff), failed (Permanent, or an
	// error on the item's last attempt), snoozed, released (given back at
	// shutdown) or cancelled. When Applied is false it is what the handler
	// asked for, which was not written.
	Outcome  lease.Outcome
	Error    string
	Applied  bool         // false: the lease was lost and the outcome discarded
	Status   lease.Status // final status when applied
	Started  time.Time
	Finished time.Time
}

type pendingCompletion struct {
	c lease.Completion
	// item is the attempt's (&attempt.job.Item), which nothing writes
	// after the claim: a pointer keeps the queue's entries small, as they
	// are copied into a batch and the batch into the statement's arrays.
	item     *lease.Item
	expiry   *atomic.Int64 // the attempt's local lease deadline (Worker.mono); nil: none
	started  time.Time
	finished time.Time
	after    func(Result) // optional, runs on the flush goroutine
	// owner and attempt, when set, say the completion is a handler's:
	// owner.afterFlush(attempt, result) runs on the flush goroutine, before
	// after.
	owner   *producer
	attempt *attempt
	// inTx: the handler completed the attempt in its own transaction
	// (CompleteTx), which may have committed; if this completion finds the
	// lease gone, the run archive tells whether that commit ended it.
	inTx bool
}

// A failed completion statement is retried for as long as a lease of its
// batch can still be vouched for: until the latest local lease deadline of
// its attempts (lease.LocalTTL after the claim or heartbeat that last
// confirmed it; heartbeats go on extending it while the database answers
// them), and at least flushMinTries times. Until then no other worker can
// have the item, so a database restart or failover shorter than that ends
// with the completion applied instead of the lease expiring and the
// finished work running again. After it the completion would most likely
// be fenced (owner token), and the worker gives up and leaves the rows to
// the reaper. A flush that has failed for a whole lease gives up even if
// heartbeats still succeed: the database answers but refuses the
// completion, and retrying it cannot help. But while the database cannot
// be reached at all (a restart or failover longer than the lease) it keeps
// trying past the deadline: nothing can reap the rows meanwhile, a
// completion is fenced by its owner token, so writing it late is safe, and
// the first try after the database is back applies it unless a reaper got
// there first (this worker's own claim loops hold their reaping while a
// flush retries: retrying). Stop's bound (the hard context) ends the
// retries first when the worker stops.
const (
	flushMinTries = 6
	// Pauses between tries: capped exponential with full jitter, from
	// flushPauseBase to flushPauseCap (a database that is back is found
	// within about that), never past the deadline.
	flushPauseBase = 25 * time.Millisecond
	flushPauseCap  = 250 * time.Millisecond
)

// completer batches the completions of one table into one statement: it
// flushes when flushBatch completions wait or flushInterval has passed since
// the first of them, whichever comes first. Flushes run on up to two
// goroutines so the next batch gathers while one is in the database.
//
// add never blocks a handler goroutine: its slot is free as soon as the
// handler returns. The completer bounds its backlog instead: while more
// than backlogLimit completions wait, its producers claim nothing
// (backedUp), and each flush wakes them again.
type completer struct {
	engine    *lease.Engine
	complete  func(*lease.Engine, context.Context, []lease.Completion) (lease.Applied, error)
	log       *slog.Logger
	outage    *outage.Log      // Worker.outage
	mono      func() int64     // Worker.mono
	schema    func(error) bool // Worker.schemaMissing
	lease     time.Duration    // the lease TTL: the longest a failing flush is retried
	interval  time.Duration
	max       int
	limit     int64
	stats     *counters
	onResult  func(Result)
	obs       observing       // the Worker's
	hardCtx   context.Context // ends retries at Stop's bound
	producers []*producer     // woken when a backlog clears

	mu     sync.Mutex
	queue  []pendingCompletion
	closed bool
	kick   chan struct{} // the first completion arrived, the batch filled, or stop

	backlog   atomic.Int64 // completions added and not yet reported
	retrying  atomic.Int32 // flushes retrying a failed statement: the producers hold their reaping
	throttled atomic.Bool  // a producer found the backlog full

	flushes chan []pendingCompletion
	wg      sync.WaitGroup

	// The slices of ended flushes, kept for later ones (a flush of 1,000
	// would otherwise allocate and zero about 350 KB): the batches take
	// fills, and the completions flush hands the statement. At most one
	// per flusher and one gathering are in use at once.
	spareBatches chan []pendingCompletion
	spareCS      chan []lease.Completion
}

func newCompleter(w *Worker, e *lease.Engine, hardCtx context.Context) *completer {
	return &completer{
		engine: e, complete: w.completeFn, log: w.log, outage: w.outage, mono: w.mono, schema: w.schemaMissing, lease: w.cfg.Lease,
		interval: w.cfg.FlushInterval, max: w.cfg.FlushBatch,
		limit: int64(backlogLimit(w.cfg.FlushBatch)), stats: &w.stats, onResult: w.onResult, obs: w.obs, hardCtx: hardCtx,
		kick: make(chan struct{}, 1), flushes: make(chan []pendingCompletion), spareBatches: make(chan []pendingCompletion, 3), spareCS: make(chan []lease.Completion, 2),
	}
}

// backlogLimit is how many completions may wait before producers stop
// claiming: two flushes in the database and two batches gathering.
func backlogLimit(flushBatch int) int { return 4 * flushBatch }

func (c *completer) start() {
	c.wg.Add(3)
	go c.gather()
	for range 2 {
		go c.flusher()
	}
}

// backedUp reports whether producers should hold off claiming. A producer
// that gets true waits for the wake of a flush that ends below the limit.
// The flag is set before the backlog is read again: a flush that lowered
// the backlog just before the flag was set, and so woke nobody, is seen by
// that second read (without it a producer could wait for a flush that never
// comes, until its next poll).
func (c *completer) backedUp() bool {
	if c.backlog.Load() < c.limit {
		return false
	}
	c.throttled.Store(true)
	return c.backlog.Load() >= c.limit
}

// add queues one completion without blocking.
func (c *completer) add(p pendingCompletion) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		// A handler that outlived the drain: its lease expires and the reaper
		// makes the item available again.
		c.log.Warn("completion arrived after shutdown; leaving the lease to expire", "table", c.engine.Table(), "id", p.c.ID)
		c.report(p, lease.Applied{}, false)
		return
	}
	c.queue = append(c.queue, p)
	n := len(c.queue)
	c.mu.Unlock()
	c.backlog.Add(1)
	if n == 1 || n == c.max {
		poke(c.kick)
	}
}

// stop flushes what is queued and returns when every flush has ended.
func (c *completer) stop() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	poke(c.kick)
	c.wg.Wait()
}

func (c *completer) size() (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue), c.closed
}

func (c *completer) take() []pendingCompletion {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := min(len(c.queue), c.max)
	var batch []pendingCompletion
	select {
	case batch = <-c.spareBatches:
	default:
	}
	if cap(batch) < n {
		batch = make([]pendingCompletion, n)
	}
	batch = batch[:n]
	copy(batch, c.queue)
	rest := copy(c.queue, c.queue[n:])
	clear(c.queue[rest:])
	c.queue = c.queue[:rest]
	return batch
}

func (c *completer) gather() {
	defer c.wg.Done()
	defer close(c.flushes)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		n, closed := c.size()
		if n == 0 {
			if closed {
				return
			}
			<-c.kick
			continue
		}
		if n < c.max && !closed {
			// Wait for the batch to fill, or for the interval since its first
			// completion arrived (roughly now: the kick woke us).
			timer.Reset(c.interval)
		wait:
			for {
				select {
				case <-c.kick:
					if n, closed = c.size(); n >= c.max || closed {
						break wait
					}
				case <-timer.C:
					break wait
				}
			}
			timer.Stop()
		}
		c.flushes <- c.take()
	}
}

func (c *completer) flusher() {
	defer c.wg.Done()
	for batch := range c.flushes {
		cs := c.flush(batch)
		c.backlog.Add(-int64(len(batch)))
		c.recycle(batch, cs)
		if c.backlog.Load() < c.limit && c.throttled.Swap(false) {
			for _, p := range c.producers {
				poke(p.wake)
			}
		}
	}
}

// recycle keeps an ended flush's slices for later ones (spareBatches,
// spareCS), cleared first: nothing holds them now, and a kept slice must
// not keep attempts and handlers' outputs from the garbage collector.
func (c *completer) recycle(batch []pendingCompletion, cs []lease.Completion) {
	clear(batch)
	clear(cs)
	select {
	case c.spareBatches <- batch[:0]:
	default:
	}
	select {
	case c.spareCS <- cs[:0]:
	default:
	}
}

// flush applies one batch, retrying a failed statement until the batch's
// lease deadline (see flushMinTries; Stop's bound ends it sooner). A retry
// after an unseen commit finds the tokens gone; the run archive then tells
// which completions that commit applied (Engine.Resolve), so results, stats
// and meta.json stay true. It returns the completions it built, which the
// caller may reuse once it returns.
func (c *completer) flush(batch []pendingCompletion) []lease.Completion {
	var cs []lease.Completion
	select {
	case cs = <-c.spareCS:
	default:
	}
	for _, p := range batch {
		cs = append(cs, p.c)
	}
	var applied lease.Applied
	var err error
	var started time.Time
	obs := c.obs.get()
	if obs != nil {
		started = time.Now()
	}
	var firstFailure int64
	quiet := false // the failures were the database being unreachable: the outage log tells of them and of its end
	try := 0
	for ; ; try++ {
		ctx, cancel := context.WithTimeout(c.hardCtx, 30*time.Second)
		applied, err = c.complete(c.engine, ctx, cs)
		cancel()
		if err == nil {
			c.outage.OK()
			break
		}
		c.stats.flushErrors.Add(1)
		now := c.mono()
		if try == 0 {
			firstFailure = now
			c.retrying.Add(1)
			defer c.retrying.Add(-1)
		}
		switch {
		case try == 0 && c.schema(err): // the worker says it once
		case try == 0 && c.outage.Failed(err, "table", c.engine.Table()): // the outage says it once
			quiet = true
		case try == 0:
			c.log.Warn("completion flush failed; retrying until its leases' deadline (past it while the database is unreachable)", "table", c.engine.Table(), "batch", len(cs),
				"deadline_in", time.Duration(c.deadline(batch, firstFailure)-now).Round(time.Millisecond), "err", err)
		default:
			c.log.Debug("completion flush failed again", "table", c.engine.Table(), "batch", len(cs), "try", try+1, "err", err)
		}
		left := time.Duration(c.deadline(batch, firstFailure) - now)
		if try+1 >= flushMinTries && left <= 0 && !unreachable(err) {
			break
		}
		pause := Backoff(int32(min(try, 8)), flushPauseBase, flushPauseCap) + time.Millisecond
		if left > 0 {
			pause = min(pause, left)
		}
		if !sleepCtx(c.hardCtx, pause) {
			break
		}
	}
	switch {
	case err != nil:
		c.log.Error("completion flush gave up; the leases will expire and the reaper will retry these items",
			"table", c.engine.Table(), "batch", len(cs), "tries", try+1, "err", err)
	case try == 0 && len(applied.Lost) > 0 && anyInTx(batch):
		c.resolve(cs, &applied)
	case try > 0:
		if len(applied.Lost) > 0 {
			c.resolve(cs, &applied)
		}
		level := slog.LevelInfo
		if quiet && len(applied.Lost) == 0 {
			level = slog.LevelDebug
		}
		c.log.Log(context.Background(), level, "completion flush succeeded after retries", "table", c.engine.Table(), "batch", len(cs), "tries", try+1,
			"lost", len(applied.Lost))
	}
	if obs != nil {
		obs.Flushed(FlushEvent{Table: c.engine.Table(), Queues: queuesOf(batch), Size: len(batch), Lost: len(applied.Lost),
			Tries: try + 1, Started: started, Took: time.Since(started), Err: err})
	}
	for _, p := range batch {
		c.report(p, applied, err == nil)
	}
	return cs
}

// unreachable says whether err is the database not being reachable at all:
// no connection (refused, broken, timed out) or a server that does not take
// connections now (restarting, shutting down, or not accepting them). A
// completion flush goes on past its leases' deadline only then.
func unreachable(err error) bool {
	var ce *pgconn.ConnectError
	return outage.Unreachable(err) || errors.As(err, &ce)
}

// anyInTx reports whether an attempt of batch was completed in its
// handler's transaction (CompleteTx).
func anyInTx(batch []pendingCompletion) bool {
	return slices.ContainsFunc(batch, func(p pendingCompletion) bool { return p.inTx })
}

// deadline is when a flush of batch that first failed at firstFailure gives
// up (Worker.mono): the latest local lease deadline of its attempts, but at
// most one lease after the first failure.
func (c *completer) deadline(batch []pendingCompletion, firstFailure int64) int64 {
	var latest int64
	for i := range batch {
		if e := batch[i].expiry; e != nil {
			latest = max(latest, e.Load())
		}
	}
	return min(latest, firstFailure+int64(c.lease))
}

// queuesOf returns the distinct queues of a batch (usually one or a few).
func queuesOf(batch []pendingCompletion) []string {
	var qs []string
	for i := range batch {
		if q := batch[i].item.Queue; !slices.Contains(qs, q) {
			qs = append(qs, q)
		}
	}
	return qs
}

// resolve asks the run archive about the completions a retried flush
// reported lost: those an earlier, unseen commit applied count as applied.
func (c *completer) resolve(cs []lease.Completion, applied *lease.Applied) {
	lost := make(map[int64]bool, len(applied.Lost))
	for _, id := range applied.Lost {
		lost[id] = true
	}
	var ask []lease.Completion
	for _, cp := range cs {
		if lost[cp.ID] {
			ask = append(ask, cp)
		}
	}
	ctx, cancel := context.WithTimeout(c.hardCtx, 30*time.Second)
	found, err := c.engine.Resolve(ctx, ask)
	cancel()
	if err != nil {
		c.log.Warn("could not resolve a retried flush from the run archive; reporting its rows as lost",
			"table", c.engine.Table(), "rows", len(ask), "err", err)
		return
	}
	still := applied.Lost[:0]
	for _, id := range applied.Lost {
		if st, ok := found[id]; ok {
			applied.Status[id] = st
		} else {
			still = append(still, id)
		}
	}
	applied.Lost = still
}

// report delivers one completion's result; flushed says whether its
// statement ran (false: it gave up, or arrived after shutdown).
func (c *completer) report(p pendingCompletion, applied lease.Applied, flushed bool) {
	st, ok := applied.Status[p.c.ID]
	r := Result{Item: *p.item, Outcome: p.c.Outcome, Error: p.c.Error, Applied: ok && flushed, Status: st,
		Started: p.started, Finished: p.finished}
	if p.inTx && ok && st == lease.StatusDone && r.Outcome != lease.Done {
		// The handler's transaction completed the attempt (CompleteTx) and
		// committed; what the handler returned afterwards changed nothing.
		r.Outcome, r.Error = lease.Done, ""
	}
	if r.Applied {
		// What the completion did: a retry on the last attempt failed the
		// item, and a cancel requested meanwhile cancelled it.
		r.Outcome = r.Final()
	}
	c.count(r, flushed)
	if p.owner != nil {
		p.owner.afterFlush(p.attempt, r)
	}
	if p.after != nil {
		p.after(r)
	}
	if c.onResult != nil {
		c.onResult(r)
	}
}

func (c *completer) count(r Result, flushed bool) {
	if !flushed {
		c.stats.unflushed.Add(1)
		return
	}
	if !r.Applied {
		c.stats.leaseLost.Add(1)
		if obs := c.obs.get(); obs != nil {
			// A copy: &r.Item would move every call's r to the heap.
			it := r.Item
			obs.LeaseLost(&it)
		}
		return
	}
	if obs := c.obs.get(); obs != nil {
		obs.Completed(r)
	}
	switch r.Final() {
	case lease.Done:
		c.stats.done.Add(1)
	case lease.Failed:
		c.stats.failed.Add(1)
	case lease.Retry:
		c.stats.retried.Add(1)
	case lease.Snoozed:
		c.stats.snoozed.Add(1)
	case lease.Released:
		c.stats.released.Add(1)
	case lease.Cancelled:
		c.stats.cancelled.Add(1)
	}
}
