package worker

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/workq/workq/lease"
)

// Result is the fate of one finished attempt, reported after its completion
// was flushed (or given up on).
type Result struct {
	Item     lease.Item
	Outcome  lease.Outcome
	Error    string
	Applied  bool         // false: the lease was lost and the outcome discarded
	Status   lease.Status // final status when applied
	Started  time.Time
	Finished time.Time
}

type pendingCompletion struct {
	c        lease.Completion
	item     lease.Item
	started  time.Time
	finished time.Time
	after    func(Result) // optional, runs on the flush goroutine
}

// completer batches completions into one statement: it flushes when
// flushBatch completions wait or flushInterval has passed since the first of
// them, whichever comes first. Flushes run on up to two goroutines so the
// next batch gathers while one is in the database.
type completer struct {
	engine   *lease.Engine
	log      *slog.Logger
	interval time.Duration
	max      int
	stats    *counters
	onResult func(Result)

	in      chan pendingCompletion
	flushes chan []pendingCompletion
	wg      sync.WaitGroup

	mu     sync.RWMutex // add holds it shared while sending; stop exclusively to close in
	closed bool
}

func newCompleter(e *lease.Engine, log *slog.Logger, interval time.Duration, max int, stats *counters, onResult func(Result)) *completer {
	return &completer{
		engine: e, log: log, interval: interval, max: max, stats: stats, onResult: onResult,
		in:      make(chan pendingCompletion, 4*max),
		flushes: make(chan []pendingCompletion, 1),
	}
}

func (c *completer) start() {
	c.wg.Add(3)
	go c.gather()
	for range 2 {
		go c.flusher()
	}
}

// add queues one completion. It blocks when the completer is backed up,
// which in turn slows the handlers: backpressure rather than unbounded memory.
func (c *completer) add(p pendingCompletion) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		// A handler that outlived the drain: its lease expires and the reaper
		// makes the item available again.
		c.log.Warn("completion arrived after shutdown; leaving the lease to expire", "table", c.engine.Table(), "id", p.c.ID)
		c.report(p, lease.Applied{}, false)
		return
	}
	c.in <- p
}

// stop flushes what is queued and returns when every flush has ended. It
// waits for adds in progress, which the running flushes unblock.
func (c *completer) stop() {
	c.mu.Lock()
	c.closed = true
	close(c.in)
	c.mu.Unlock()
	c.wg.Wait()
}

func (c *completer) gather() {
	defer c.wg.Done()
	defer close(c.flushes)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		first, ok := <-c.in
		if !ok {
			return
		}
		batch := []pendingCompletion{first}
		timer.Reset(c.interval)
	collect:
		for len(batch) < c.max {
			select {
			case p, ok := <-c.in:
				if !ok {
					break collect
				}
				batch = append(batch, p)
			case <-timer.C:
				break collect
			}
		}
		timer.Stop()
		c.flushes <- batch
	}
}

func (c *completer) flusher() {
	defer c.wg.Done()
	for batch := range c.flushes {
		c.flush(batch)
	}
}

// flush applies one batch, retrying a failed statement with backoff. The
// statement is idempotent in effect: a retry after an unseen success finds
// the rows no longer owned and reports them as lost, never applies twice.
func (c *completer) flush(batch []pendingCompletion) {
	cs := make([]lease.Completion, len(batch))
	for i, p := range batch {
		cs[i] = p.c
	}
	var applied lease.Applied
	var err error
	for try := range 6 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		applied, err = c.engine.Complete(ctx, cs)
		cancel()
		if err == nil {
			break
		}
		c.stats.flushErrors.Add(1)
		c.log.Warn("completion flush failed; retrying", "table", c.engine.Table(), "batch", len(cs), "try", try+1, "err", err)
		time.Sleep(Backoff(int32(try), 50*time.Millisecond, 2*time.Second) + 10*time.Millisecond)
	}
	if err != nil {
		c.log.Error("completion flush gave up; the leases will expire and the reaper will retry these items",
			"table", c.engine.Table(), "batch", len(cs), "err", err)
	}
	for _, p := range batch {
		c.report(p, applied, err == nil)
	}
}

// report delivers one completion's result; flushed says whether its
// statement ran (false: it gave up, or arrived after shutdown).
func (c *completer) report(p pendingCompletion, applied lease.Applied, flushed bool) {
	st, ok := applied.Status[p.c.ID]
	r := Result{Item: p.item, Outcome: p.c.Outcome, Error: p.c.Error, Applied: ok && flushed, Status: st,
		Started: p.started, Finished: p.finished}
	c.count(r, flushed)
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
		return
	}
	switch {
	case r.Status == lease.StatusDone:
		c.stats.done.Add(1)
	case r.Status == lease.StatusFailed:
		c.stats.failed.Add(1)
	case r.Outcome == lease.Retry:
		c.stats.retried.Add(1)
	case r.Outcome == lease.Snoozed:
		c.stats.snoozed.Add(1)
	case r.Outcome == lease.Released:
		c.stats.released.Add(1)
	}
}
