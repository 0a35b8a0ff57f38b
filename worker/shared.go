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
// loop waits for a slot, or has ready work left), each shard gets a share
// of them proportional to its backlog: the ready items of its queue when
// its last claim came back full (lease.Engine.QueueDepth, read at most
// once per second by a claim loop that has a backlog), none when its last
// claim came back short (1 before its first claim). An idle shard holds no
// slot and restricts no other: it costs its polls and its LISTEN
// connection. Uncontended, a shard may use every free slot.
//
// With DrainFirst the shards are ordered by Options.Rank: a claim loop
// claims only while no claim loop of the same (table, queue) of a lower
// rank has a backlog (its last claim came back full, or it has not claimed
// yet). A shard whose claims fail counts as having none, so a shard that is
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
	// run holds a token per running handler: the bound on handlers at
	// once. Claims (used) may run ahead of it by what the claim loops
	// prefetch (see acquire).
	run chan struct{}
}

// backlogUnknown is the backlog of a member that has not claimed yet.
const backlogUnknown = -1

// member is one claim loop's seat at a slot group; its fields are under
// Shared.mu.
type member struct {
	s       *Shared
	g       *slotGroup
	rank    int
	used    int   // slots held: claimed items whose handler has not returned, and a claim in flight
	backlog int64 // ready items at the last claim (0: none; backlogUnknown: not claimed yet)
	waiting bool  // asked for slots and got none
	wake    func()

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
		g = &slotGroup{total: total, run: make(chan struct{}, total)}
		s.groups[key] = g
	}
	m := &member{s: s, g: g, rank: rank, backlog: backlogUnknown, wake: wake}
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
		if o.rank < m.rank && o.backlog != 0 {
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
			if o != m && !o.blocked() && (o.waiting || o.backlog != 0) {
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
// back with runDone.
func (m *member) runPermit(done <-chan struct{}) (ok bool) {
	select {
	case m.g.run <- struct{}{}:
		return true
	default:
	}
	select {
	case m.g.run <- struct{}{}:
		return true
	case <-done:
		return false
	}
}

func (m *member) runDone() { <-m.g.run }

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

// setBacklog records m's backlog after a claim; a member that drained its
// backlog wakes the waiting members (DrainFirst may have held them back).
func (m *member) setBacklog(n int64) {
	m.s.mu.Lock()
	was := m.backlog
	m.backlog = n
	var wake []func()
	if n == 0 && was != 0 {
		wake = m.g.waiters()
	}
	m.s.mu.Unlock()
	for _, f := range wake {
		f()
	}
}

// getBacklog returns m's recorded backlog.
func (m *member) getBacklog() int64 {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	return m.backlog
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
