package outboxrt

import (
	"fmt"
	"slices"
	"sync"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/worker"
	"github.com/workq/workq/outbox"
)

// maxPassing bounds the keys a relay hands over at a time (each claim sends
// them and the claim compares every key it walks with them). With more
// busy keys than that, the relay is not holding every key anyway: a key
// due for a hand-over waits for room.
const maxPassing = 64

// sweepEvery: a key's run of deliveries is forgotten when it saw no
// delivery for this many claims of its queue (checked every this many), so
// that the relay does not remember every key it ever delivered.
const sweepEvery = 1024

// Relay hands claimed outbox messages to the handler of their topic. Plug it
// into a worker with (*worker.Worker).AddSource(relay.Source(queues...)).
// Register every handler before the worker starts.
//
// Every relay serving a queue should be configured alike: OnFinalFailure
// travels with each claim, so a relay that does not know a topic's Skip
// treats its failed messages as blocking.
type Relay struct {
	router   *worker.Router
	handOver int // 0: never

	mu   sync.Mutex
	skip []string // topics whose final failures do not block their key
}

// claimState is the claim state of one Source (one worker's claim loops):
// each worker rotates and hands keys over on its own.
type claimState struct {
	mu     sync.Mutex
	queues map[string]*queueState
}

// queueState is a relay's claim state of one queue.
type queueState struct {
	after   string                // the partition key the last claim stopped at
	claims  uint64                // claims so far
	swept   uint64                // the claim of the last sweep of runs
	runs    map[string]keyRun     // keys delivered lately: how many in a row
	passing map[string]*passedKey // keys handed over
	// justDone are the keys whose completion the last claim was told of;
	// recycling says whether the last claim that took keyed messages took
	// only those keys' next ones: no other key was free for this relay, so
	// it may hold every busy key and another relay none.
	justDone  map[string]bool
	recycling bool
}

// passedKey is a key the relay passes over, handed to the other relays.
type passedKey struct {
	since uint64 // the claim that first passed it
	woken int    // woken claims since
}

// keyRun counts the messages of a key the relay delivered in a row.
type keyRun struct {
	n    int
	last uint64 // the claim before which the last one was completed
}

// NewRelay returns a relay without handlers.
func NewRelay(o outbox.RelayOptions) *Relay {
	r := &Relay{router: worker.NewTopicRouter(), handOver: o.HandOverAfter}
	switch {
	case r.handOver == 0:
		r.handOver = outbox.DefaultHandOverAfter
	case r.handOver < 0:
		r.handOver = 0
	}
	return r
}

// Handle sets the handler of topic, with its options (at most one).
func (r *Relay) Handle(topic string, h worker.HandlerFunc, opts ...outbox.TopicOptions) error {
	if len(opts) > 1 {
		return fmt.Errorf("handle topic %q: at most one TopicOptions, got %d", topic, len(opts))
	}
	var o outbox.TopicOptions
	if len(opts) == 1 {
		o = opts[0]
	}
	if o.OnFinalFailure != outbox.Block && o.OnFinalFailure != outbox.Skip {
		return fmt.Errorf("handle topic %q: unknown OnFinalFailure %d", topic, int(o.OnFinalFailure))
	}
	if err := r.router.Handle(topic, h); err != nil {
		return fmt.Errorf("outbox relay: %w", err)
	}
	if o.OnFinalFailure == outbox.Skip {
		r.mu.Lock()
		// Copy on write: claims hold the previous slice without the lock.
		skip := append(slices.Clone(r.skip), topic)
		slices.Sort(skip)
		r.skip = skip
		r.mu.Unlock()
	}
	return nil
}

// HandleDefault sets the handler of every topic without one of its own.
// Its messages block their key on final failure.
func (r *Relay) HandleDefault(h worker.HandlerFunc) { r.router.HandleDefault(h) }

// Topics lists the topics with a handler of their own.
func (r *Relay) Topics() []string { return r.router.Keys() }

// SkipTopics lists the topics registered with OnFinalFailure Skip.
func (r *Relay) SkipTopics() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.skip)
}

// Source returns the relay as a worker source over the outbox queues given
// (default: "default"). Give each worker a Source of its own: a Source's
// claim state (rotation, hand-over) is its worker's.
func (r *Relay) Source(queues ...string) worker.Source {
	if len(queues) == 0 {
		queues = []string{"default"}
	}
	cs := &claimState{queues: map[string]*queueState{}}
	return worker.Source{
		Table:                lease.Outbox,
		Queues:               slices.Clone(queues),
		Route:                r.router.Route,
		ClaimOptions:         func(c worker.ClaimContext) lease.ClaimOptions { return r.claimOptions(cs, c) },
		ClaimAfterCompletion: true,
	}
}

// claimOptions gives the ordered claim its options.
//
// Rotation: the claim visits keys after AfterKey, then wraps around to the
// first key up to AfterKey, so the next claim starts after the last key
// this one took in that walk order. Keys compare bytewise in Go and in the
// database (the column's collation is "C").
//
// Hand-over: the relay claims a key's next message as soon as it completes
// the previous one (worker.Source.ClaimAfterCompletion), before any other
// relay can, so without it a key stays with the relay that first took it.
// While the relay's claims take nothing but the next messages of the keys
// it has just completed (no other key was free for it: it may be holding
// every busy key), after handOver messages of a key delivered in a row it
// passes the key over (PassKeys) and its claim wakes the queue's relays
// (Wake). Its first claim that was woken too (a notification, the poll)
// still passes the key and wakes the relays again, so that the others,
// woken by the first notification, claim it first; its second takes part
// again, so that a relay alone on the queue gets its key back two
// notifications later. With more free keys than it takes, other relays
// find keys of their own and nothing is handed over. The database still
// allows one message of a key in flight whoever claims it.
func (r *Relay) claimOptions(cs *claimState, c worker.ClaimContext) lease.ClaimOptions {
	r.mu.Lock()
	skip := r.skip
	r.mu.Unlock()
	cs.mu.Lock()
	defer cs.mu.Unlock()
	st := cs.queues[c.Queue]
	if st == nil {
		st = &queueState{runs: map[string]keyRun{}, passing: map[string]*passedKey{}, justDone: map[string]bool{}}
		cs.queues[c.Queue] = st
	}
	st.claims++
	st.after = nextAfter(st.after, c.Prev)
	wake := false
	if c.Woken {
		// The first woken claim after a hand-over still passes the key and
		// wakes the relays again: the others, woken by the hand-over, claim
		// first. The second takes part.
		for k, h := range st.passing {
			if h.since == st.claims {
				continue
			}
			if h.woken++; h.woken >= 2 {
				delete(st.passing, k)
			} else {
				wake = true
			}
		}
	}
	keyed, recycled := 0, 0
	for i := range c.Prev {
		if k := c.Prev[i].PartitionKey; k != "" {
			keyed++
			if st.justDone[k] {
				recycled++
			}
		}
	}
	if keyed > 0 {
		st.recycling = recycled == keyed
	}
	clear(st.justDone)
	for _, res := range c.Completed {
		k := res.Item.PartitionKey
		if k == "" || r.handOver == 0 || res.Status != lease.StatusDone {
			continue
		}
		st.justDone[k] = true
		run := st.runs[k]
		run.n++
		run.last = st.claims
		if _, passing := st.passing[k]; passing || run.n < r.handOver || !st.recycling || len(st.passing) >= maxPassing {
			st.runs[k] = run
			continue
		}
		delete(st.runs, k)
		st.passing[k] = &passedKey{since: st.claims}
		wake = true
	}
	if st.claims-st.swept >= sweepEvery {
		for k, run := range st.runs {
			if st.claims-run.last >= sweepEvery {
				delete(st.runs, k)
			}
		}
		st.swept = st.claims
	}
	var pass []string
	if len(st.passing) > 0 {
		pass = make([]string, 0, len(st.passing))
		for k := range st.passing {
			pass = append(pass, k)
		}
		slices.Sort(pass)
	}
	return lease.ClaimOptions{AfterKey: st.after, SkipTopics: skip, PassKeys: pass, Wake: wake}
}

// nextAfter is the rotation's next AfterKey: the largest key the previous
// claim took after after, or, if it wrapped around, the largest it took up
// to after.
func nextAfter(after string, prev []lease.Item) string {
	var beyond, wrapped string // the largest key taken after `after`, and up to it
	var sawBeyond, sawWrapped bool
	for i := range prev {
		k := prev[i].PartitionKey
		if k == "" {
			continue
		}
		if k > after {
			if !sawBeyond || k > beyond {
				beyond, sawBeyond = k, true
			}
		} else if !sawWrapped || k > wrapped {
			wrapped, sawWrapped = k, true
		}
	}
	switch {
	case sawWrapped:
		return wrapped
	case sawBeyond:
		return beyond
	}
	return after
}
