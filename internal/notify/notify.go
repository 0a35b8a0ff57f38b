// Package notify decides when a write into a work table also wakes the
// table's workers with NOTIFY. Every client that writes work (job runs,
// outbox, inbox, timers) shares this rule.
package notify

import (
	"sync"
	"time"
)

// Debouncer allows at most one NOTIFY per queue per interval, because every
// transaction that notifies takes a global lock at commit. The NOTIFY is
// part of the writing statement, so it is delivered when (and only if) that
// transaction commits; a skipped one only adds up to one poll interval of
// latency, since workers also poll. Safe for concurrent use.
type Debouncer struct {
	interval time.Duration // negative: never notify

	mu   sync.Mutex
	last map[string]time.Time
}

// New returns a debouncer with the given interval; a negative interval
// disables NOTIFY, zero notifies on every write.
func New(interval time.Duration) *Debouncer {
	return &Debouncer{interval: interval, last: map[string]time.Time{}}
}

// Should reports whether a write on queue should also NOTIFY now.
func (d *Debouncer) Should(queue string) bool {
	if d.interval < 0 {
		return false
	}
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if now.Sub(d.last[queue]) < d.interval {
		return false
	}
	d.last[queue] = now
	return true
}
