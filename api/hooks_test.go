package api

import (
	"sync"
	"time"
)

// clock is a frozen clock that a test advances.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// freezeFailures freezes the clock of s's limit on failed tokens; the
// result advances it. Call it before s serves.
func freezeFailures(s *Server) func(time.Duration) {
	c := &clock{t: time.Now()}
	s.failures.SetNow(c.now)
	return c.advance
}

// freezeReady freezes the clock of s's /readyz cache; the result advances
// it. Call it before s serves.
func freezeReady(s *Server) func(time.Duration) {
	c := &clock{t: time.Now()}
	s.ready.now = c.now
	return c.advance
}
