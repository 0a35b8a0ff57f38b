package worker

import (
	"sync"
	"time"
	"unicode/utf8"

	"github.com/workq/workq/internal/lease"
)

// Failed handlers are logged at warn level, at most failureLogBurst lines
// per (table, queue) per failureLogWindow; the failures over that are
// counted and reported in one line once the window has ended. A queue
// whose every job fails (a webhook receiver down) thus shows up in the log
// at once, without a line per job.
const (
	failureLogBurst  = 10
	failureLogWindow = time.Minute
	// failureLogErrBytes bounds the error text in the log line (a panic's
	// carries its stack); the run archive keeps the whole error.
	failureLogErrBytes = 1024
)

// failureLog is the rate limit of one producer's failure lines.
type failureLog struct {
	mu         sync.Mutex
	start      time.Time // the current window's start
	logged     int       // lines logged in the current window
	suppressed int       // failures not logged in the current window
}

// report logs the failed attempt it, which ends with c, unless the window's
// lines are used up.
func (f *failureLog) report(p *producer, it *lease.Item, c lease.Completion, now time.Time) {
	f.mu.Lock()
	ended := f.roll(now, p.w.failWindow)
	ok := f.logged < p.w.failBurst
	if ok {
		f.logged++
	} else {
		f.suppressed++
	}
	f.mu.Unlock()
	p.logSuppressed(ended)
	if !ok {
		return
	}
	outcome := c.Outcome
	if outcome == lease.Retry && it.Attempt >= it.MaxAttempts {
		outcome = lease.Failed // no attempts left
	}
	args := []any{"table", it.Table, "queue", it.Queue, "id", it.ID, "kind", it.Kind,
		"attempt", it.Attempt, "max_attempts", it.MaxAttempts, "outcome", outcome}
	if outcome == lease.Retry {
		args = append(args, "retry_in", c.Delay)
	}
	args = append(args, "run_id", it.RunID, "err", truncate(c.Error, failureLogErrBytes))
	p.w.log.Warn("handler failed", args...)
}

// flush reports the failures a window did not log: once the window has
// ended, or at once with force (the worker is stopping).
func (f *failureLog) flush(p *producer, force bool, now time.Time) {
	f.mu.Lock()
	n := 0
	if f.suppressed > 0 {
		if force {
			n, f.suppressed = f.suppressed, 0
		} else {
			n = f.roll(now, p.w.failWindow)
		}
	}
	f.mu.Unlock()
	p.logSuppressed(n)
}

// roll starts a new window when the current one has ended, and returns how
// many failures the ended window did not log.
func (f *failureLog) roll(now time.Time, window time.Duration) int {
	if now.Sub(f.start) < window {
		return 0
	}
	n := f.suppressed
	f.start, f.logged, f.suppressed = now, 0, 0
	return n
}

func (p *producer) logSuppressed(n int) {
	if n > 0 {
		p.w.log.Warn("handler failures not logged (rate limit)", "table", p.src.Table, "queue", p.queue,
			"count", n, "limit", p.w.failBurst, "window", p.w.failWindow)
	}
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
