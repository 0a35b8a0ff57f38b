package workq

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/worker"
)

// EventKind is what an Event reports (River's EventKind). Attempt
// outcomes are reported once their completion is written.
type EventKind string

const (
	// EventStarted: a handler starts an attempt (the item is running).
	EventStarted EventKind = "started"
	// EventCompleted: the attempt succeeded; the item is done.
	EventCompleted EventKind = "completed"
	// EventRetried: the attempt failed with attempts left; the item runs
	// again after its backoff (River reports it as a failed job still
	// retryable).
	EventRetried EventKind = "retried"
	// EventFailed: the item failed for good (Permanent, or an error on
	// its last attempt).
	EventFailed EventKind = "failed"
	// EventSnoozed: the handler snoozed the item (Snooze); the attempt
	// is given back.
	EventSnoozed EventKind = "snoozed"
	// EventCancelled: the item is cancelled (ErrCancelled, or a cancel
	// requested while it ran).
	EventCancelled EventKind = "cancelled"
	// EventReleased: the item was given back unfinished, ready at once
	// (at Stop, or after it waited too long for a handler); the attempt
	// is given back.
	EventReleased EventKind = "released"
	// EventLeaseLost: this Client lost the item's lease (a heartbeat or
	// the completion found it taken or gone); the attempt's result was
	// discarded, and the item runs again wherever it is claimed next.
	EventLeaseLost EventKind = "lease_lost"
)

// eventKinds are the EventKinds in the order of their bits.
var eventKinds = []EventKind{EventStarted, EventCompleted, EventRetried, EventFailed, EventSnoozed,
	EventCancelled, EventReleased, EventLeaseLost}

// bit returns k's bit in a subscription's mask (0: not a kind).
func (k EventKind) bit() uint32 {
	if i := slices.Index(eventKinds, k); i >= 0 {
		return 1 << i
	}
	return 0
}

// Event is one thing that happened to an item a Client works, of any
// kind of work (job runs, outbox and inbox messages, timers; Work.Table
// says which). One *Event is shared by every subscriber that gets it:
// read it, do not change it.
type Event struct {
	Kind EventKind
	// Work is the item and its attempt: table, id, job kind or topic,
	// inbox source, queue, attempt, max attempts and shard (the database
	// the item is on, for a sharded Client). Its Logger discards.
	Work WorkInfo
	// Started and Finished are when the handler started and returned
	// (zero when it did not run: EventReleased of an item that waited for
	// a handler; Finished is zero for EventStarted and EventLeaseLost),
	// Duration the time between them.
	Started, Finished time.Time
	Duration          time.Duration
	// Error is the handler's error, for EventRetried, EventFailed and
	// EventCancelled ("" when there is none).
	Error string
}

// SubscribeConfig configures a subscription (River's SubscribeConfig).
type SubscribeConfig struct {
	// Kinds are the events sent; none: every kind. A value that is not
	// one of the EventKind constants panics (a programming error, as in
	// River).
	Kinds []EventKind
	// ChanSize is the channel's buffer (default 1000, River's): the events
	// a subscriber may fall behind by before the next ones are dropped.
	ChanSize int
}

// DefaultEventChanSize is the buffer of a subscription's channel when
// SubscribeConfig.ChanSize is 0.
const DefaultEventChanSize = 1000

// Subscribe returns a channel of the events of kinds (none: every kind)
// that happen in this Client's worker, for every kind of work, and the
// function that ends the subscription (River's Subscribe). On a sharded
// Client it gets the events of every shard (Event.Work.Shard says which);
// client.Shard(name).Subscribe gets one shard's.
//
// The channel is buffered (SubscribeConfig.ChanSize, default 1000) and the
// runtime never waits for it: an event that finds it full is dropped and
// counted (EventsDropped; the first drop of a subscription is logged), so
// a slow subscriber loses events and never slows the work. Events are
// sent in the order they happen on each of the runtime's goroutines;
// events of different items may interleave in any order.
//
// The channel is closed by the returned function (which may be called
// more than once) or by Stop, whichever comes first; a subscription made
// before Start sees everything from the start. Without a subscription the
// runtime pays one atomic load per event.
func (c *Client) Subscribe(kinds ...EventKind) (<-chan *Event, func()) {
	return c.SubscribeConfig(SubscribeConfig{Kinds: kinds})
}

// SubscribeConfig is Subscribe with a SubscribeConfig.
func (c *Client) SubscribeConfig(cfg SubscribeConfig) (<-chan *Event, func()) {
	var mask uint32
	for _, k := range cfg.Kinds {
		b := k.bit()
		if b == 0 {
			panic(fmt.Sprintf("workq: Subscribe: %q is not an EventKind", k))
		}
		mask |= b
	}
	if mask == 0 {
		mask = 1<<len(eventKinds) - 1
	}
	size := cfg.ChanSize
	if size <= 0 {
		size = DefaultEventChanSize
	}
	s := &subscription{ch: make(chan *Event, size), mask: mask, ev: c.ev}
	for _, h := range c.eventHubs() {
		s.hubs = append(s.hubs, h)
		h.add(s)
	}
	return s.ch, s.close
}

// EventsDropped returns how many events this Client's subscriptions
// (those made by its Subscribe) dropped because their channel was full.
func (c *Client) EventsDropped() uint64 { return c.ev.dropped.Load() }

// eventHubs returns the hubs of the workers under c: its own, or each
// shard's.
func (c *Client) eventHubs() []*eventHub {
	if c.set == nil {
		return []*eventHub{&c.ev.hub}
	}
	hubs := make([]*eventHub, len(c.set.shards))
	for i, sc := range c.set.shards {
		hubs[i] = &sc.ev.hub
	}
	return hubs
}

// closeEvents ends every subscription of the workers under c (Stop).
func (c *Client) closeEvents() {
	for _, h := range c.eventHubs() {
		h.closeAll()
	}
}

// clientEvents is a Client's part of the events: the subscribers of its
// worker (hub; unused on a sharded Client's front, whose subscriptions
// are on its shards' hubs) and the drops of the subscriptions it made.
type clientEvents struct {
	hub     eventHub
	dropped atomic.Uint64
	log     *slog.Logger
}

func newClientEvents(log *slog.Logger) *clientEvents { return &clientEvents{log: log} }

// observer returns the worker.Observer that publishes the worker's events
// of shard to the hub.
func (e *clientEvents) observer(shard string) worker.Observer {
	return &eventObserver{hub: &e.hub, shard: shard}
}

// eventHub is the subscribers of one worker. Its state is replaced, never
// changed, so that publishing is one atomic load when nobody listens.
type eventHub struct {
	mu    sync.Mutex // serialises changes of state
	state atomic.Pointer[hubState]
}

// hubState is the subscribers at one moment and the union of their kinds;
// nil when there are none.
type hubState struct {
	subs []*subscription
	mask uint32
}

func (h *eventHub) add(s *subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	next := &hubState{mask: s.mask}
	if st := h.state.Load(); st != nil {
		next.subs = slices.Clone(st.subs)
		next.mask |= st.mask
	}
	next.subs = append(next.subs, s)
	h.state.Store(next)
}

func (h *eventHub) remove(s *subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.state.Load()
	if st == nil {
		return
	}
	next := &hubState{}
	for _, o := range st.subs {
		if o != s {
			next.subs = append(next.subs, o)
			next.mask |= o.mask
		}
	}
	if len(next.subs) == 0 {
		next = nil
	}
	h.state.Store(next)
}

// closeAll ends every subscription on h.
func (h *eventHub) closeAll() {
	st := h.state.Load()
	if st == nil {
		return
	}
	for _, s := range st.subs {
		s.close()
	}
}

// wants reports whether a subscriber wants events of kind.
func (st *hubState) wants(kind EventKind) bool { return st.mask&kind.bit() != 0 }

// publish sends ev to the subscribers of st that want kind.
func (st *hubState) publish(kind EventKind, ev *Event) {
	bit := kind.bit()
	for _, s := range st.subs {
		if s.mask&bit != 0 {
			s.send(ev)
		}
	}
}

// subscription is one Subscribe: its channel, the kinds it wants and the
// hubs it is on.
type subscription struct {
	ch     chan *Event
	mask   uint32
	ev     *clientEvents // the subscribing Client's: drops are counted there
	hubs   []*eventHub
	mu     sync.RWMutex // send holds it shared, close exclusively
	closed bool
	warned atomic.Bool
}

// send hands ev to the channel, or drops it when the channel is full; it
// never blocks.
func (s *subscription) send(ev *Event) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return
	}
	select {
	case s.ch <- ev:
	default:
		s.ev.dropped.Add(1)
		if s.warned.CompareAndSwap(false, true) {
			s.ev.log.Warn("workq: an event subscriber's channel is full: events are dropped (Client.EventsDropped counts them)",
				"chan_size", cap(s.ch))
		}
	}
}

// close takes s off its hubs and closes its channel, once.
func (s *subscription) close() {
	for _, h := range s.hubs {
		h.remove(s)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.ch)
	}
}

// eventObserver turns what a worker observes into Events.
type eventObserver struct {
	worker.NopObserver
	hub   *eventHub
	shard string
}

// Idle reports that nobody subscribes: the runtime then skips the
// observer and builds no events for it (worker.Idler).
func (o *eventObserver) Idle() bool { return o.hub.state.Load() == nil }

// Each method's first statement loads the hub's state: a subscriber may
// have left since the runtime checked Idle.

func (o *eventObserver) HandlerStart(ctx context.Context, job *worker.Job) context.Context {
	if st := o.hub.state.Load(); st != nil && st.wants(EventStarted) {
		st.publish(EventStarted, &Event{Kind: EventStarted, Work: itemInfo(&job.Item, o.shard), Started: time.Now()})
	}
	return ctx
}

func (o *eventObserver) Completed(r worker.Result) {
	st := o.hub.state.Load()
	if st == nil {
		return
	}
	kind := outcomeEvent(r.Final())
	if !st.wants(kind) {
		return
	}
	ev := &Event{Kind: kind, Work: itemInfo(&r.Item, o.shard), Started: r.Started, Finished: r.Finished}
	if !r.Started.IsZero() && !r.Finished.IsZero() {
		ev.Duration = r.Finished.Sub(r.Started)
	}
	switch kind {
	case EventRetried, EventFailed, EventCancelled:
		ev.Error = r.Error
	}
	st.publish(kind, ev)
}

func (o *eventObserver) LeaseLost(it *lease.Item) {
	if st := o.hub.state.Load(); st != nil && st.wants(EventLeaseLost) {
		st.publish(EventLeaseLost, &Event{Kind: EventLeaseLost, Work: itemInfo(it, o.shard)})
	}
}

// outcomeEvent is the EventKind of an applied attempt's outcome.
func outcomeEvent(o lease.Outcome) EventKind {
	switch o {
	case lease.Done:
		return EventCompleted
	case lease.Retry:
		return EventRetried
	case lease.Failed:
		return EventFailed
	case lease.Snoozed:
		return EventSnoozed
	case lease.Cancelled:
		return EventCancelled
	}
	return EventReleased
}
