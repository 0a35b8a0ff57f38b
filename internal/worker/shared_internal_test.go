package worker

import (
	"sync/atomic"
	"testing"
)

// The shared slots: what one claim loop gets, given the others.
func TestSharedAcquire(t *testing.T) {
	type seat struct {
		rank    int
		used    int
		backlog int64
		waiting bool
	}
	cases := []struct {
		name       string
		drainFirst bool
		total      int
		others     []seat
		me         seat
		want       int // asked
		extra      int
		got        int
	}{
		{name: "alone: every free slot", total: 10, me: seat{backlog: 100}, want: 10, got: 10},
		{name: "alone: the prefetch on top", total: 10, me: seat{backlog: 100}, want: 30, extra: 20, got: 30},
		{name: "an idle other restricts nothing", total: 10, others: []seat{{rank: 1, used: 2}}, me: seat{backlog: 5}, want: 10, got: 8},
		{name: "equal backlogs: half each", total: 10, others: []seat{{rank: 1, backlog: 50, waiting: true}}, me: seat{backlog: 50}, want: 10, got: 5},
		{name: "9:1 backlog: 9 of 10", total: 10, others: []seat{{rank: 1, backlog: 10, waiting: true}}, me: seat{backlog: 90}, want: 10, got: 9},
		{name: "1:9 backlog: 1 of 10", total: 10, others: []seat{{rank: 1, backlog: 90}}, me: seat{backlog: 10}, want: 10, got: 1},
		{name: "share already held", total: 10, others: []seat{{rank: 1, backlog: 90, used: 4}}, me: seat{backlog: 10, used: 1}, want: 5, got: 0},
		{name: "none free", total: 4, others: []seat{{rank: 1, used: 4}}, me: seat{backlog: 10}, want: 4, got: 0},
		{name: "drain first: an earlier shard with a backlog holds a later one", drainFirst: true, total: 10,
			others: []seat{{rank: 0, backlog: 3}}, me: seat{rank: 1, backlog: 100}, want: 10, got: 0},
		{name: "drain first: an earlier shard not claimed yet holds a later one", drainFirst: true, total: 10,
			others: []seat{{rank: 0, backlog: backlogUnknown}}, me: seat{rank: 1}, want: 10, got: 0},
		{name: "drain first: a drained earlier shard lets it", drainFirst: true, total: 10,
			others: []seat{{rank: 0, used: 3}}, me: seat{rank: 1, backlog: 100}, want: 10, got: 7},
		{name: "drain first: a later shard never holds an earlier one", drainFirst: true, total: 10,
			others: []seat{{rank: 1, backlog: 100, waiting: true}}, me: seat{rank: 0, backlog: 1}, want: 10, got: 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := NewShared(SharedOptions{DrainFirst: tc.drainFirst})
			set := func(m *member, st seat) {
				m.used, m.waiting = st.used, st.waiting
				switch {
				case st.backlog == backlogUnknown: // not claimed yet
				case st.backlog == 0:
					m.drained = true
				default:
					m.backlog, m.weighed = st.backlog, true
				}
				m.g.used += st.used
			}
			for _, o := range tc.others {
				set(s.join("job_runs/q", tc.total, o.rank, func() {}), o)
			}
			me := s.join("job_runs/q", tc.total, tc.me.rank, func() {})
			set(me, tc.me)
			if got := me.acquire(tc.want, tc.extra); got != tc.got {
				t.Fatalf("acquire(%d, %d) = %d, want %d", tc.want, tc.extra, got, tc.got)
			}
			if me.waiting != (tc.got == 0) {
				t.Errorf("waiting = %v after a grant of %d", me.waiting, tc.got)
			}
		})
	}
}

// backlogUnknown stands for a seat that has not claimed yet.
const backlogUnknown = -1

// A release wakes the waiting seats; a drained backlog wakes those that
// DrainFirst held back; the run permits bound the handlers at once.
func TestSharedWakesAndPermits(t *testing.T) {
	s := NewShared(SharedOptions{DrainFirst: true})
	var woken atomic.Int32
	first := s.join("outbox/q", 2, 0, func() {})
	second := s.join("outbox/q", 2, 1, func() { woken.Add(1) })
	first.noted(true, 5)
	if got := second.acquire(2, 0); got != 0 {
		t.Fatalf("held back by the first: got %d", got)
	}
	first.noted(false, -1)
	if woken.Load() != 1 {
		t.Fatalf("the drained first woke the second %d times", woken.Load())
	}
	if got := second.acquire(2, 0); got != 2 {
		t.Fatalf("after the first drained: got %d", got)
	}
	second.noted(true, 5)
	never := make(chan struct{})
	for i := range 2 {
		if !second.runPermit(never) {
			t.Fatalf("permit %d of two refused", i+1)
		}
	}
	done := make(chan struct{})
	close(done)
	if first.runPermit(done) {
		t.Fatal("a third permit of two")
	}
	if got := first.acquire(1, 0); got != 0 || !first.waiting {
		t.Fatalf("none free: got %d", got)
	}
	second.runDone()
	second.release(1)
	if got := first.acquire(1, 0); got != 1 {
		t.Fatalf("after a release: got %d", got)
	}
	if !first.runPermit(never) {
		t.Fatal("a permit after one was given back")
	}
	// The weight follows what is read, falling by at most half a read.
	first.noted(true, 1000)
	first.noted(true, 10)
	if first.backlog != 500 {
		t.Errorf("after reads of 1000 and 10 the weight is %d, want 500", first.backlog)
	}
	first.noted(true, 4000)
	if first.backlog != 4000 {
		t.Errorf("a higher read sets the weight at once: %d", first.backlog)
	}
	u := s.Use()
	if len(u) != 1 || u[0].Total != 2 || u[0].Used[0] != 1 || u[0].Used[1] != 1 {
		t.Errorf("use: %+v", u)
	}
}

// While both wait, the handler slots go by backlog: 9 and 1 of 10.
func TestSharedRunShares(t *testing.T) {
	s := NewShared(SharedOptions{})
	big := s.join("job_runs/q", 10, 0, func() {})
	small := s.join("job_runs/q", 10, 1, func() {})
	big.noted(true, 900)
	small.noted(true, 100)
	if got := big.runShare(); got != 10 {
		t.Errorf("nobody else runs or waits: share %d, want 10", got)
	}
	hold(big, 1, 0)
	hold(small, 1, 0)
	if b, sm := big.runShare(), small.runShare(); b != 9 || sm != 1 {
		t.Errorf("shares %d and %d, want 9 and 1", b, sm)
	}
	// At its share, big waits while small is under its own; not once small
	// has its share.
	hold(big, 10, 9)
	if big.mayRun() || !small.mayRun() {
		t.Errorf("big at its share, small at none: big may %v, small may %v", big.mayRun(), small.mayRun())
	}
	hold(big, 10, 8)
	hold(small, 1, 1)
	if !big.mayRun() {
		t.Error("both at their shares: a free slot must not idle")
	}
}

// Items claimed ahead of the handlers (the prefetch) must not undo the
// shares by backlog (issue 28): a shard's claimed items and its claim in
// flight keep its share of the handler slots for it, another shard's
// prefetch does not cap its claims, and a shard whose backlog is not read
// yet counts as much as the others, not as a backlog of 1.
func TestSharedPrefetchKeepsShares(t *testing.T) {
	const total = 8
	cases := []struct {
		name string
		// set up big (rank 0) and small (rank 1), then check
		run func(t *testing.T, big, small *member)
	}{
		{"a claim in flight keeps its shard's share of the handler slots", func(t *testing.T, big, small *member) {
			big.noted(true, 400)
			small.noted(true, 40)
			if got := big.acquire(7, 0); got != 7 { // claimed, not started yet
				t.Fatalf("big acquire(7) = %d", got)
			}
			hold(small, 2, 1) // one running, one waiting for a slot
			if small.mayRun() {
				t.Error("small, at its share of 1, took a slot of big's claim in flight")
			}
		}},
		{"claimed items waiting for a handler keep their shard's share", func(t *testing.T, big, small *member) {
			big.noted(true, 400)
			small.noted(true, 40)
			hold(big, 12, 3) // 3 running, 9 claimed ahead
			hold(small, 3, 1)
			if small.mayRun() {
				t.Error("small, at its share of 1, took a slot while big has items under its share")
			}
			hold(big, 6, 6) // nothing waiting: a free slot must not idle
			if !small.mayRun() {
				t.Error("big has nothing waiting: small must take the free slot")
			}
		}},
		{"another shard's prefetch does not cap a shard's share of the claims", func(t *testing.T, big, small *member) {
			small.noted(true, 40)
			big.noted(true, 400)
			hold(small, 20, 0) // claimed ahead while it was alone
			// Big's share of 8 slots + 16 prefetch is 22.
			if got := big.acquire(20, 16); got != 20 {
				t.Errorf("big acquire(20, 16) = %d with small holding 20, want 20", got)
			}
		}},
		{"a shard not weighed yet counts as much as the weighed ones", func(t *testing.T, big, small *member) {
			small.noted(true, 40)
			if got := small.acquire(8, 0); got != 4 {
				t.Errorf("small acquire(8) = %d beside a shard not weighed yet, want its even share 4", got)
			}
		}},
		{"a shard not weighed yet keeps its even share of the handler slots", func(t *testing.T, big, small *member) {
			small.noted(true, 40)
			hold(small, 6, 4)
			if small.mayRun() {
				t.Error("small took a fifth slot while big, not weighed yet, has not claimed")
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := NewShared(SharedOptions{})
			big := s.join("job_runs/q", total, 0, func() {})
			small := s.join("job_runs/q", total, 1, func() {})
			tc.run(t, big, small)
		})
	}
}

// hold sets m's slots: used claimed (and not finished), running of them
// running and the rest waiting for a handler slot.
func hold(m *member, used, running int) {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	m.g.used += used - m.used
	m.g.running += running - m.running
	m.used, m.running, m.runWaiting = used, running, min(used-running, 8)
}
