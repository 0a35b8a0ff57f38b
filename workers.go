package workq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/workq/workq/internal/kinds"
	"github.com/workq/workq/internal/worker"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/workqtype"
)

// Workers is the set of handlers a Client runs: job workers by kind
// (AddWorker), and handlers of outbox, inbox and timer topics
// (HandleOutbox, HandleInbox, HandleTimer). Fill it before NewClient; a
// Client with none only enqueues (and runs maintenance).
type Workers struct {
	jobs   map[string]worker.HandlerFunc
	outbox map[string]outboxHandler
	inbox  map[string]worker.HandlerFunc
	timers map[string]worker.HandlerFunc

	outboxDefault, inboxDefault, timersDefault worker.HandlerFunc

	// flow are the flow limits the job workers declare
	// (WorkerWithFlowLimits), set at Start with Config.FlowLimits.
	flow []FlowLimit

	// inUse: a Client read the set (NewClient); what is added after it
	// would never run, so it is refused.
	inUse bool
}

// errInUse refuses a registration on a set a Client already read.
func (ws *Workers) errInUse(what string) error {
	if ws.inUse {
		return fmt.Errorf("workq: register %s before NewClient: a Client already took these Workers, and would never run it", what)
	}
	return nil
}

type outboxHandler struct {
	h    worker.HandlerFunc
	opts []outbox.TopicOptions
}

// NewWorkers returns an empty set.
func NewWorkers() *Workers {
	registerSurface()
	return &Workers{jobs: map[string]worker.HandlerFunc{}, outbox: map[string]outboxHandler{},
		inbox: map[string]worker.HandlerFunc{}, timers: map[string]worker.HandlerFunc{}}
}

func (ws *Workers) addJob(kind string, h worker.HandlerFunc) error {
	if err := ws.errInUse(fmt.Sprintf("kind %q", kind)); err != nil {
		return err
	}
	if !workqtype.ValidName(kind) {
		return workqtype.Invalid("kind", fmt.Sprintf("kind %q is not a valid name (%s)", kind, workqtype.NameRule))
	}
	if _, ok := ws.jobs[kind]; ok {
		return fmt.Errorf("workq: kind %q already has a worker", kind)
	}
	ws.jobs[kind] = h
	return nil
}

// handleOutboxRaw registers an untyped handler (a publisher) for an
// outbox topic; "" is the default handler of topics without one.
func (ws *Workers) handleOutboxRaw(topic string, h worker.HandlerFunc, opts ...outbox.TopicOptions) error {
	if err := ws.errInUse(fmt.Sprintf("outbox topic %q", topic)); err != nil {
		return err
	}
	if topic == "" {
		ws.outboxDefault = h
		return nil
	}
	if !workqtype.ValidTopic(topic) {
		return workqtype.Invalid("topic", fmt.Sprintf("outbox topic %q is not valid", topic))
	}
	if _, ok := ws.outbox[topic]; ok {
		return fmt.Errorf("workq: outbox topic %q already has a handler", topic)
	}
	ws.outbox[topic] = outboxHandler{h: h, opts: opts}
	return nil
}

func (ws *Workers) addTopic(m map[string]worker.HandlerFunc, def *worker.HandlerFunc, what, topic string, h worker.HandlerFunc) error {
	if err := ws.errInUse(fmt.Sprintf("%s topic %q", what, topic)); err != nil {
		return err
	}
	if topic == "" {
		*def = h
		return nil
	}
	if !workqtype.ValidTopic(topic) {
		return workqtype.Invalid("topic", fmt.Sprintf("%s topic %q is not valid", what, topic))
	}
	if _, ok := m[topic]; ok {
		return fmt.Errorf("workq: %s topic %q already has a handler", what, topic)
	}
	m[topic] = h
	return nil
}

func (ws *Workers) empty() bool {
	return len(ws.jobs) == 0 && !ws.hasOutbox() && !ws.hasInbox() && !ws.hasTimers()
}
func (ws *Workers) hasOutbox() bool { return len(ws.outbox) > 0 || ws.outboxDefault != nil }
func (ws *Workers) hasInbox() bool  { return len(ws.inbox) > 0 || ws.inboxDefault != nil }
func (ws *Workers) hasTimers() bool { return len(ws.timers) > 0 || ws.timersDefault != nil }

// Message is an outbox message, inbox message or timer as its typed
// handler sees it; Payload is the item's JSON payload decoded into T.
type Message[T any] struct {
	ID          int64
	Queue       string
	Topic       string // "" for an inbox message received without one
	Payload     T
	Attempt     int // 1 on the first attempt
	MaxAttempts int
	CreatedAt   time.Time
	RunAt       time.Time // when it became claimable

	MessageID     string          // outbox (a UUID) and inbox (the sender's id)
	Source        string          // inbox: who sent it
	PartitionKey  string          // outbox: messages of one key are delivered in order
	CorrelationID string          // outbox
	Headers       json.RawMessage // outbox: a JSON object of strings
	DueTime       time.Time       // timers: when it was due
	// Shard is the database the item is on (DefaultShard for a Client of
	// NewClient): open a handler's own transaction, for CompleteTx and the
	// ...Tx methods, on client.Shard(m.Shard)'s pool.
	Shard string
	// RunID and LeaseVersion name this attempt, as Job's do.
	RunID        uuid.UUID
	LeaseVersion int64

	raw *worker.Job
}

// Logger returns the attempt's logger: its records carry the item's
// identity and, with a runs directory, also go to the attempt's log file.
func (m *Message[T]) Logger() *slog.Logger {
	if m.raw == nil {
		return slog.New(slog.DiscardHandler)
	}
	return m.raw.Logger()
}

// fill sets m to the typed view of a claimed outbox message, inbox
// message or timer, its payload decoded into T (an error made with
// Permanent when it does not decode).
func (m *Message[T]) fill(raw *worker.Job) error {
	*m = Message[T]{ID: raw.ID, Queue: raw.Queue, Topic: raw.Topic, Attempt: int(raw.Attempt), MaxAttempts: int(raw.MaxAttempts),
		CreatedAt: raw.CreatedAt, RunAt: raw.RunAt, MessageID: raw.MessageID, PartitionKey: raw.PartitionKey, CorrelationID: raw.CorrelationID,
		Headers: raw.Headers, DueTime: raw.DueTime, Shard: raw.Shard,
		RunID: raw.RunID, LeaseVersion: raw.LeaseVersion, raw: raw}
	if k, _ := kinds.Of(raw.Table); k.ClaimedKind == kinds.WordSource {
		m.Source = raw.Kind
	}
	if err := json.Unmarshal(raw.Payload, &m.Payload); err != nil {
		return worker.Permanent(fmt.Errorf("decode payload of %s %d: %w", raw.Table, raw.ID, err))
	}
	return nil
}

// messageHandler decodes the payload into a Message[T] and calls f.
func messageHandler[T any](f func(ctx context.Context, m *Message[T]) error) worker.HandlerFunc {
	return func(ctx context.Context, raw *worker.Job) error {
		m := new(Message[T])
		if err := m.fill(raw); err != nil {
			return err
		}
		return f(ctx, m)
	}
}

// HandleOutbox registers a typed handler for an outbox topic ("" for the
// default handler). A publisher of package publish (webhook, NATS
// JetStream) is such a handler: HandleOutbox(ws, topic, hook.Handle).
func HandleOutbox[T any](ws *Workers, topic string, f func(ctx context.Context, m *Message[T]) error, opts ...outbox.TopicOptions) error {
	return ws.handleOutboxRaw(topic, messageHandler(f), opts...)
}

// HandleInbox registers a typed handler for an inbox topic ("" for the
// default handler, which also gets messages received without a topic).
func HandleInbox[T any](ws *Workers, topic string, f func(ctx context.Context, m *Message[T]) error) error {
	return ws.addTopic(ws.inbox, &ws.inboxDefault, "inbox", topic, messageHandler(f))
}

// HandleTimer registers a typed handler for a timer topic ("" for the
// default handler).
func HandleTimer[T any](ws *Workers, topic string, f func(ctx context.Context, m *Message[T]) error) error {
	return ws.addTopic(ws.timers, &ws.timersDefault, "timer", topic, messageHandler(f))
}

// CompleteTx completes the message (or timer) inside tx, the handler's own
// transaction; see Job.CompleteTx.
func (m *Message[T]) CompleteTx(ctx context.Context, tx pgx.Tx) error {
	if m.raw == nil {
		return errors.New("workq: CompleteTx on a message the runtime did not claim")
	}
	return worker.CompleteTx(ctx, tx, m.raw)
}
