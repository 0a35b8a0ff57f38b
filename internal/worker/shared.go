package worker

import (
	"sync"
	"sync/atomic"
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
// read in the background when the claim loop starts, then after a full
// claim at most once a second, or at once after a short one; falling by at
// most half per read). A shard not weighed yet counts as much as the
// heaviest one weighed. A shard whose last claim came back short holds no
// slot beyond its work and restricts no other: an idle shard costs its
// polls and its LISTEN connection. Uncontended, a shard may use every free
// slot.
//
// The shares hold at both ends: for the claims (acquire), which may run
// ahead of the handlers by the claim loops' prefetch, and for the handlers
// at once (runPermit). A shard's claimed items that wait for a handler,
// its claim in flight and, while its first backlog read is in flight, its
// whole share keep that share of the handler slots for it: a freed slot
// goes beyond its share to another shard only when nothing of the first
// waits for it, so items claimed ahead (or a slow claim or read) cannot
// hand the slots to whichever shard happens to have handlers waiting.
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
	// ahead of them by what the claim loops prefetch (see acquire): each
	// member's within its share, whatever the others hold.
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
	// items when last read (see noted); weighed says it was read (or its
	// first read failed): until then the member weighs as much as the
	// heaviest member weighed (see weight), and while it is not weighed
	// and not drained it keeps its share of the handler slots (reserve).
	backlog int64
	weighed bool
	waiting bool // asked for slots and got none
	wake    func()
	// claiming is the slots of m's claim in flight (part of used).
	claiming int
	// running handlers of m, and how many of its handlers wait for a slot.
	running, runWaiting int

	probed  time.Time   // when the claim loop last read its backlog (claim loop only)
	probing atomic.Bool // a backlog read is in flight
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

// weight is m's backlog; not weighed yet, the heaviest weighed member's
// (1 when none is): a shard whose read is slower than another's must not
// count as a backlog of 1 beside it (under mu).
func (m *member) weight() int64 {
	if m.weighed {
		return max(1, m.backlog)
	}
	w := int64(1)
	for _, o := range m.g.members {
		if o.weighed {
			w = max(w, o.backlog)
		}
	}
	return w
}

// acquire takes up to want slots and returns how many it took (0: wait for
// the wake): the slots of a claim, in flight until noted. Claimed items
// hold a slot until their handler returns; extra is what the claim loop
// may claim beyond the free handler slots (its prefetch, which its
// handlers start within a few milliseconds), so the claims of the group
// may run ahead of the handlers by it while the handlers at once stay
// bounded by the total (runPermit). Uncontended it takes no more than
// that, less what the group holds. While another member contends it takes
// no more than m's share of it (see Shared), and no more than would start
// within the prefetch: that, less the handlers running and the items that
// start before m's (its own waiting, and the others' within their shares
// of the handler slots). Items another shard claimed beyond its share (its
// prefetch, or while it was alone) wait behind m's (mayRun), so they do
// not keep m from its share.
func (m *member) acquire(want, extra int) int {
	s := m.s
	s.mu.Lock()
	defer s.mu.Unlock()
	g := m.g
	capacity := g.total + max(0, extra)
	grant := 0
	if !m.blocked() {
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
			ahead := g.running + m.pending()
			for _, o := range g.members {
				if o != m {
					ahead += o.reserveWith(m)
				}
			}
			grant = min(want, share-m.used, capacity-ahead)
		} else {
			grant = min(want, capacity-g.used)
		}
	}
	if grant <= 0 {
		m.waiting = true
		return 0
	}
	m.waiting = false
	m.used += grant
	m.claiming += grant
	g.used += grant
	return grant
}

// runPermit waits for a handler slot of the group, or for done (the
// attempt's context: a handler of a lost or released item starts at once
// to see it cancelled, without a slot); ok says a slot was taken, to give
// back with runDone. m gets no more running handlers than its share of the
// total by backlog while another member has work under its own share
// (mayRun): the claims' shares (acquire) would not hold if the slots went
// to whichever handler asked first, as the members' claims run ahead of
// their handlers.
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
// it runs fewer than its share, or while the free slots are more than the
// others keep for their work under their own shares (reserve), so a slot
// idles only while work of its own member is on its way to it.
func (m *member) mayRun() bool {
	g := m.g
	free := g.total - g.running
	if free <= 0 {
		return false
	}
	if m.running < m.runShare() {
		return true
	}
	kept := 0
	for _, o := range g.members {
		if o != m {
			kept += o.reserve()
		}
	}
	return free > kept
}

// pending is m's work on its way to a handler slot (under mu): items
// claimed and not running (waiting for a handler or a slot) and its claim
// in flight, unless its last claim came back short or failed (a claim on a
// database that is down may hang; it must not keep slots from the others).
func (m *member) pending() int {
	p := m.used - m.running
	if m.drained {
		p -= m.claiming
	}
	return max(p, m.runWaiting, 0)
}

// weighing reports whether m keeps its share of the handler slots before
// its first backlog read (under mu): not weighed, not drained, and free to
// claim (DrainFirst).
func (m *member) weighing() bool {
	return !m.weighed && !m.drained && !m.blocked()
}

// reserve is how many free handler slots m keeps for its pending work
// under its share (under mu); before its first backlog read, its whole
// share.
func (m *member) reserve() int { return m.reserveWith(nil) }

// reserveWith is reserve with also counted among the members with work
// (nil: none more).
func (m *member) reserveWith(also *member) int {
	room := m.runShareWith(also) - m.running
	if !m.weighing() {
		room = min(room, m.pending())
	}
	return max(0, room)
}

// runShare is m's share of the handler slots (under mu): its part by
// backlog of the slots among the members that run, have work pending or
// are being weighed, rounded down (the shares fit in the slots), at least 1.
func (m *member) runShare() int { return m.runShareWith(nil) }

// runShareWith is runShare with also counted among the members with work
// (nil: none more).
func (m *member) runShareWith(also *member) int {
	g := m.g
	sum := m.weight()
	for _, o := range g.members {
		if o != m && (o == also || o.running > 0 || o.pending() > 0 || o.weighing()) {
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
	g.runChanged()
	s.mu.Unlock()
}

// runChanged wakes the handlers waiting for a slot (under mu): a slot
// freed, or what the members keep for their work changed.
func (g *slotGroup) runChanged() {
	if g.runWaiters > 0 {
		close(g.changed)
		g.changed = make(chan struct{})
	}
}

// release gives back n slots (of a claim in flight first: what it did not
// get) and wakes the members waiting for one.
func (m *member) release(n int) {
	if n <= 0 {
		return
	}
	m.s.mu.Lock()
	m.used -= n
	m.claiming = max(0, m.claiming-n)
	m.g.used -= n
	m.g.runChanged()
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

// noted records the end of a claim of m (its slots not got are given back
// with release first): full (it got all it asked) or not (short, or
// failed); depth >= 0 is its queue's ready and in-progress items (-1: not
// read; see weigh). A member that drained wakes the waiting members
// (DrainFirst may have held them back).
func (m *member) noted(full bool, depth int64) {
	m.s.mu.Lock()
	was := m.drained
	m.drained = !full
	m.claiming = 0
	if depth >= 0 {
		m.setWeight(depth)
	}
	m.g.runChanged()
	var wake []func()
	if m.drained && !was {
		wake = m.g.waiters()
	}
	m.s.mu.Unlock()
	for _, f := range wake {
		f()
	}
}

// weigh records a read of m's backlog: depth, or -1 when the read failed
// (the weight stays; a first read that fails leaves m weighing 1).
func (m *member) weigh(depth int64) {
	m.s.mu.Lock()
	if depth >= 0 {
		m.setWeight(depth)
	}
	m.weighed = true
	m.g.runChanged()
	wake := m.g.waiters()
	m.s.mu.Unlock()
	for _, f := range wake {
		f()
	}
}

// setWeight sets the weight from a depth read (under mu), falling at most
// by half per read: a queue kept topped up reads high and low by turns,
// and its share must not swing with each read.
func (m *member) setWeight(depth int64) {
	m.backlog = max(1, depth, m.backlog/2) // 1 before the first read
	m.weighed = true
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
