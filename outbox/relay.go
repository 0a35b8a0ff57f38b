package outbox

import (
	"fmt"
	"slices"
	"sync"

	"github.com/workq/workq/lease"
	"github.com/workq/workq/worker"
)

// FinalFailure says what a partition key does when its head message fails
// for good (attempts used up, or a permanent error).
type FinalFailure int

const (
	// Block keeps the key's later messages waiting until an operator retries
	// the failed message (`workq outbox retry`): nothing of the key is
	// delivered out of order. The default.
	Block FinalFailure = iota
	// Skip lets the key's next message go; the failed message stays failed
	// (and can still be retried, then out of order).
	Skip
)

func (f FinalFailure) String() string {
	switch f {
	case Block:
		return "block"
	case Skip:
		return "skip"
	}
	return fmt.Sprintf("FinalFailure(%d)", int(f))
}

// TopicOptions are a topic's relay options.
type TopicOptions struct {
	OnFinalFailure FinalFailure // Block (default) or Skip
}

// RelayOptions configure a Relay. There are none yet; the struct keeps
// NewRelay's signature stable.
type RelayOptions struct{}

// Relay hands claimed outbox messages to the handler of their topic. Plug it
// into a worker with (*worker.Worker).AddSource(relay.Source(queues...)).
// Register every handler before the worker starts.
//
// Every relay serving a queue should be configured alike: OnFinalFailure
// travels with each claim, so a relay that does not know a topic's Skip
// treats its failed messages as blocking.
type Relay struct {
	router *worker.Router

	mu    sync.Mutex
	skip  []string          // topics whose final failures do not block their key
	after map[string]string // queue -> the partition key the last claim stopped at
}

// NewRelay returns a relay without handlers.
func NewRelay(RelayOptions) *Relay {
	return &Relay{router: worker.NewTopicRouter(), after: map[string]string{}}
}

// Handle sets the handler of topic, with its options (at most one).
func (r *Relay) Handle(topic string, h worker.HandlerFunc, opts ...TopicOptions) error {
	if len(opts) > 1 {
		return fmt.Errorf("handle topic %q: at most one TopicOptions, got %d", topic, len(opts))
	}
	var o TopicOptions
	if len(opts) == 1 {
		o = opts[0]
	}
	if o.OnFinalFailure != Block && o.OnFinalFailure != Skip {
		return fmt.Errorf("handle topic %q: unknown OnFinalFailure %d", topic, int(o.OnFinalFailure))
	}
	if err := r.router.Handle(topic, h); err != nil {
		return fmt.Errorf("outbox relay: %w", err)
	}
	if o.OnFinalFailure == Skip {
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
// (default: "default").
func (r *Relay) Source(queues ...string) worker.Source {
	if len(queues) == 0 {
		queues = []string{"default"}
	}
	return worker.Source{
		Table:                lease.Outbox,
		Queues:               slices.Clone(queues),
		Route:                r.router.Route,
		ClaimOptions:         r.claimOptions,
		ClaimAfterCompletion: true,
	}
}

// claimOptions rotates the ordered claim through the partition keys: the
// claim visits keys after AfterKey, then wraps around to the first key up
// to AfterKey, so the next claim starts after the last key this one took in
// that walk order. Keys compare bytewise in Go and in the database (the
// column's collation is "C").
func (r *Relay) claimOptions(queue string, prev []lease.Item) lease.ClaimOptions {
	r.mu.Lock()
	defer r.mu.Unlock()
	after := r.after[queue]
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
		after = wrapped
	case sawBeyond:
		after = beyond
	}
	r.after[queue] = after
	return lease.ClaimOptions{AfterKey: after, SkipTopics: r.skip}
}
