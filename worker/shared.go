package worker

import (
	"sync"
	"time"
)

// Shared is one set of handler slots that several workers draw from: the
// workers of a sharded workq.Client, one per shard database, each with its
// own pool, claim loops, LISTEN connection and completions, run at most
// Config.concurrencyOf(queue) handlers of a (table, queue) between them,
// as one worker on one database would. Give the same Shared to each
// worker's Options (with its Rank); a worker without one has its own slots.
//
// While the slots of a (table, queue) are contended (another shard's claim
// loop waits for a slot, or its last claim came back full: it has ready
// work left), each shard gets a share of them proportional to its backlog:
// the ready and in-progress items of its queue (lease.Engine.QueueDepth,
// read after a full claim at most once a second, or at once after a short
// one; falling by at most half per read). A shard whose last claim came
// back short holds no slot beyond its work and restricts no other: an idle
// shard costs its polls and its LISTEN connection. Uncontended, a shard
// may use every free slot.
//
// With DrainFirst the shards are ordered by Options.Rank: a claim loop
// claims only while no claim loop of the same (table, queue) of a lower
// rank may have ready work (its last claim came back full, or it has not
// claimed yet). A shard whose claims fail counts as having none, so a shard that is
// down holds up no other.
type Shared struct {
	drainFirst bool

	mu     sync.Mutex
	groups map[string]*slotGroup // by "table/queue"
}

// SharedOptions configure a Shared.
type SharedOptions struct {
	// DrainFirst claims from a worker only while every worker of a lower
	// Rank has nothing ready in the same (table, queue): to move work off
	// a database (give it the lowest rank), or to prefer one.
	DrainFirst bool
}

// NewShared returns an empty set of shared slots.
func NewShared(o SharedOptions) *Shared {
	return &Shared{drainFirst: o.DrainFirst, groups: map[string]*slotGroup{}}
}

// slotGroup is the slots of one (table, queue) and the claim loops (one
// per worker) that draw from them.
type slotGroup struct {
	total, used int
	members     []*member
	// running handlers: at most total (runPermit). Claims (used) may run
	// ahead of them by what the claim loops prefetch (see acquire).
	running int
	// changed is closed (and replaced) when a handler slot frees while
	// some handler waits for one.
	changed    chan struct{}
	runWaiters int // handlers waiting for a slot
}

// member is one claim loop's seat at a slot group; its fields are under
// Shared.mu.
type member struct {
	s    *Shared
	g    *slotGroup
	rank int
	used int // slots held: claimed items whose handler has not returned, and a claim in flight
	// drained: the last claim came back short (or failed): nothing ready
	// now. A member that has not claimed yet is not drained.
	drained bool
	// backlog weighs the member's share: its queue's ready and in-progress
	// items when last read (see noted); 1 until then.
	backlog int64
	waiting bool // asked for slots and got none
	wake    func()
	// running handlers of m, and how many of its handlers wait for a slot.
	running, runWaiting int

	probed time.Time // when the claim loop last read its backlog (claim loop only)
}

// join seats a claim loop of (table, queue) key, whose worker has rank and
// runs up to total handlers of it; wake is called when slots it waits for
// may be free.
func (s *Shared) join(key string, total, rank int, wake func()) *member {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[key]
	if g == nil {
		g = &slotGroup{total: total, changed: make(chan struct{})}
		s.groups[key] = g
	}
	m := &member{s: s, g: g, rank: rank, backlog: 1, wake: wake}
	g.members = append(g.members, m)
	return m
}

// blocked reports whether DrainFirst holds m back: a member of a lower rank
// has (or may have) a backlog.
func (m *member) blocked() bool {
	if !m.s.drainFirst {
		return false
	}
	for _, o := range m.g.members {
		if o.rank < m.rank && !o.drained {
			return true
		}
	}
	return false
}

func (m *member) weight() int64 {
	return max(1, m.backlog)
}

// acquire takes up to want slots and returns how many it took (0: wait for
// the wake). Claimed items hold a slot until their handler returns; extra
// is what the claim loop may claim beyond the free handler slots (its
// prefetch, which its handlers start within a few milliseconds), so the
// claims of the group may run ahead of the handlers by it while the
// handlers at once stay bounded by the total (runPermit). It never takes
// more than that, and while another member contends no more than m's share
// of it (see Shared).
func (m *member) acquire(want, extra int) int {
	s := m.s
	s.mu.Lock()
	defer s.mu.Unlock()
	g := m.g
	capacity := g.total + max(0, extra)
	grant := min(want, capacity-g.used)
	if grant > 0 && m.blocked() {
		grant = 0
	}
	if grant > 0 {
		// The others that contend: waiting for a slot, or with ready work
		// left (or not known yet) that they will ask for.
		contended := false
		sum := m.weight()
		for _, o := range g.members {
			if o != m && !o.blocked() && (o.waiting || !o.drained) {
				contended = true
				sum += o.weight()
			}
		}
		if contended {
			// Rounded up: the shares cover every slot.
			share := max(1, int((int64(capacity)*m.weight()+sum-1)/sum))
			grant = min(grant, share-m.used)
		}
	}
	if grant <= 0 {
		m.waiting = true
		return 0
	}
	m.waiting = false
	m.used += grant
	g.used += grant
	return grant
}

// runPermit waits for a handler slot of the group, or for done (the
// attempt's context: a handler of a lost or released item starts at once
// to see it cancelled, without a slot); ok says a slot was taken, to give
// back with runDone. While handlers of other members wait too, m gets no
// more running handlers than its share of the total by backlog: the
// claims' shares (acquire) would not hold if the slots went to whichever
// handler asked first, as the members' claims run ahead of their handlers.
func (m *member) runPermit(done <-chan struct{}) (ok bool) {
	s, g := m.s, m.g
	s.mu.Lock()
	m.runWaiting++
	g.runWaiters++
	for {
		if g.running < g.total && m.mayRun() {
			m.runWaiting--
			g.runWaiters--
			m.running++
			g.running++
			s.mu.Unlock()
			return true
		}
		ch := g.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-done:
			s.mu.Lock()
			m.runWaiting--
			g.runWaiters--
			s.mu.Unlock()
			return false
		}
		s.mu.Lock()
	}
}

// mayRun reports whether m may take a free handler slot (under mu): while
// it runs fewer than its share, or while no other member that waits runs
// fewer than its own (so no slot idles while a handler waits).
func (m *member) mayRun() bool {
	if m.running < m.runShare() {
		return true
	}
	for _, o := range m.g.members {
		if o != m && o.runWaiting > 0 && o.running < o.runShare() {
			return false
		}
	}
	return true
}

// runShare is m's share of the handler slots (under mu): its part by
// backlog of the slots among the members that run or wait, rounded down
// (the shares fit in the slots), at least 1.
func (m *member) runShare() int {
	g := m.g
	sum := m.weight()
	for _, o := range g.members {
		if o != m && (o.runWaiting > 0 || o.running > 0) {
			sum += o.weight()
		}
	}
	return max(1, int(int64(g.total)*m.weight()/sum))
}

// runDone gives back a handler slot, waking the handlers that wait.
func (m *member) runDone() {
	s, g := m.s, m.g
	s.mu.Lock()
	m.running--
	g.running--
	if g.runWaiters > 0 {
		close(g.changed)
		g.changed = make(chan struct{})
	}
	s.mu.Unlock()
}

// release gives back n slots and wakes the members waiting for one.
func (m *member) release(n int) {
	if n <= 0 {
		return
	}
	m.s.mu.Lock()
	m.used -= n
	m.g.used -= n
	wake := m.g.waiters()
	m.s.mu.Unlock()
	for _, f := range wake {
		f()
	}
}

// waiters returns the wake functions of the waiting members (under mu).
func (g *slotGroup) waiters() []func() {
	var out []func()
	for _, o := range g.members {
		if o.waiting {
			out = append(out, o.wake)
		}
	}
	return out
}

// noted records a claim of m: full (it got all it asked) or not (short,
// or failed); depth >= 0 is its queue's ready and in-progress items, read
// after it (-1: not read). The weight follows the depth read, falling at
// most by half per read: a queue kept topped up reads high and low by
// turns, and its share must not swing with each read. A member that
// drained wakes the waiting members (DrainFirst may have held them back).
func (m *member) noted(full bool, depth int64) {
	m.s.mu.Lock()
	was := m.drained
	m.drained = !full
	if depth >= 0 {
		m.backlog = max(1, depth, m.backlog/2)
	}
	var wake []func()
	if m.drained && !was {
		wake = m.g.waiters()
	}
	m.s.mu.Unlock()
	for _, f := range wake {
		f()
	}
}

// isDrained reports whether m's last claim came back short.
func (m *member) isDrained() bool {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	return m.drained
}

// SharedUse is one (table, queue)'s slots in a Shared, for tests and
// metrics: the slots and, per worker rank, how many it holds.
type SharedUse struct {
	Key   string // "table/queue"
	Total int
	Used  map[int]int // by Options.Rank
}

// Use returns how the slots are used now.
func (s *Shared) Use() []SharedUse {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []SharedUse
	for k, g := range s.groups {
		u := SharedUse{Key: k, Total: g.total, Used: map[int]int{}}
		for _, m := range g.members {
			u.Used[m.rank] += m.used
		}
		out = append(out, u)
	}
	return out
}
