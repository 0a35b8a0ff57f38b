// Package outbox is workq's transactional outbox: write messages in the same
// transaction as the business change they announce (Client.Send and
// SendMany on the caller's pgx.Tx), and relay them with the shared runtime
// (Relay, a worker.Source) to a handler per topic: a webhook, a broker, any
// function. A message is written if and only if its transaction commits.
//
// Messages with a partition key are delivered strictly in write order per
// key, one at a time per key, keys in parallel; messages without one are
// unordered and fully parallel. docs/outbox.md explains the design.
package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/notify"
	"github.com/workq/workq/internal/otelx"
	"github.com/workq/workq/workqtype"
)

// ErrDuplicateMessageID is wrapped by the error of a Send or SendMany that
// carries a message id already in the outbox (or twice in one SendMany).
// Nothing of that call is written. Inside a transaction the failed
// statement aborts the transaction, as any failed statement does.
var ErrDuplicateMessageID = errors.New("duplicate outbox message id")

// Limits of a message's fields, checked before anything is written.
const (
	MaxTopicBytes         = 256
	MaxPartitionKeyBytes  = 256
	MaxCorrelationIDBytes = 256
	MaxHeaders            = 64
	MaxHeaderNameBytes    = 128
	MaxHeaderValueBytes   = 4096
	MaxHeadersBytes       = 16 << 10 // the headers' JSON text
)

// Message is one outbox message to write.
type Message struct {
	Queue   string // default "default"
	Topic   string // required: selects the relay's handler (1-256 bytes of UTF-8, no control characters)
	Payload any    // a JSON object: a struct or map to marshal, or raw JSON as json.RawMessage or []byte; nil means {}
	// Headers travel with the message (a publisher sends them on, e.g. as
	// HTTP or NATS headers). Names are HTTP tokens of 1-128 bytes; values
	// UTF-8 without control characters other than tab, at most 4096 bytes.
	Headers map[string]string
	// MessageID identifies the message to its consumers (de-duplication);
	// zero: a new time-ordered UUID (version 7) made by the client. Unique in the outbox: see ErrDuplicateMessageID.
	MessageID     uuid.UUID
	CorrelationID string // optional, at most 256 bytes
	// PartitionKey orders delivery: messages with the same key are delivered
	// one at a time in write order. Empty: unordered. At most 256 bytes.
	PartitionKey string
	Priority     int16         // higher first, among unkeyed messages of a queue; it never reorders a key
	RunAt        time.Time     // not before this time (zero: now + Delay)
	Delay        time.Duration // not before now + Delay (on the database clock)
	MaxAttempts  int           // 0: the client default (4)
	JoinID       int64         // the fan-in join the message is a member of; 0: none
}

// Sent identifies a written message.
type Sent struct {
	ID        int64     `json:"id"`
	MessageID uuid.UUID `json:"message_id"`
	// Shard is the database it was written to, set by a workq.Client
	// (workq.DefaultShard for a Client of one database; "" from this
	// package's own Client).
	Shard string `json:"shard,omitempty"`
}

// ClientOptions configure a Client; zero values take the defaults.
type ClientOptions struct {
	MaxAttempts    int           // default max attempts of messages that do not set one (4)
	NotifyDebounce time.Duration // at most one NOTIFY per queue per this (5ms); negative disables NOTIFY
	// MaxPayloadBytes limits a payload, in bytes of JSON text: 0 means
	// workqtype.DefaultMaxPayload (1 MiB), at most workqtype.MaxPayloadCeiling.
	MaxPayloadBytes int
	// TracerProvider makes the send spans (workq.enqueue): every Send or
	// SendMany is one span, and while it is recording each message
	// carries its trace context in its headers (W3C traceparent and
	// tracestate, unless the message sets traceparent itself), for the
	// relay's handler span to continue and publishers to pass on. Nil:
	// the global provider, which records nothing until one is set.
	TracerProvider trace.TracerProvider
	// Propagator writes the trace context into the headers. Nil: the
	// global propagator if one is set, else W3C trace context.
	Propagator propagation.TextMapPropagator
}

// Client writes outbox messages. It is safe for concurrent use; share one
// per process so NOTIFY debouncing works across goroutines.
type Client struct {
	maxAttempts int
	maxPayload  int
	notify      *notify.Debouncer
	tracer      trace.Tracer
	propagator  propagation.TextMapPropagator
}

// NewClient returns a Client.
func NewClient(o ClientOptions) *Client {
	if o.MaxAttempts == 0 {
		o.MaxAttempts = workqtype.DefaultMaxAttempts
	}
	if o.NotifyDebounce == 0 {
		o.NotifyDebounce = workqtype.DefaultNotifyDebounce
	}
	if o.MaxPayloadBytes == 0 {
		o.MaxPayloadBytes = workqtype.DefaultMaxPayload
	}
	return &Client{maxAttempts: o.MaxAttempts, maxPayload: o.MaxPayloadBytes, notify: notify.New(o.NotifyDebounce),
		tracer: otelx.Tracer(o.TracerProvider), propagator: otelx.Propagator(o.Propagator)}
}

// startSend starts the span of one send call of n messages on queue (""
// for several) and returns the trace context fields the messages carry
// (nil when the span is not recording).
func (c *Client) startSend(ctx context.Context, queue, topic string, n int) (context.Context, trace.Span, map[string]string) {
	ctx, span := otelx.StartEnqueue(ctx, c.tracer, "outbox", queue, topic, n)
	return ctx, span, otelx.Inject(ctx, c.propagator)
}

type prepared struct {
	queue, topic, key, corr string
	messageID               uuid.UUID
	payload, headers        []byte
	priority                int16
	runAt                   *time.Time
	delayMs                 int64
	maxAttempts             int32
	joinID                  int64
}

// invalid is a *workqtype.ValidationError for field.
func invalid(field, format string, args ...any) error {
	return workqtype.Invalid(field, fmt.Sprintf(format, args...))
}

// Validate reports what is wrong with m (an error wrapping workqtype.ErrInvalid),
// or nil when Send would accept it. It touches no database.
func (c *Client) Validate(m Message) error {
	_, err := c.prepare(m)
	return err
}

func (c *Client) prepare(m Message) (prepared, error) {
	p := prepared{queue: m.Queue, topic: m.Topic, key: m.PartitionKey, corr: m.CorrelationID,
		messageID: m.MessageID, priority: m.Priority, joinID: m.JoinID}
	if p.queue == "" {
		p.queue = workqtype.DefaultQueue
	}
	if p.messageID == uuid.Nil {
		// Time-ordered (RFC 9562 version 7), not random: every claim and
		// completion of a message writes a new entry into the unique index
		// on message ids, and ordered ids put those at its right edge.
		id, err := uuid.NewV7()
		if err != nil {
			return p, fmt.Errorf("new message id: %w", err)
		}
		p.messageID = id
	}
	if err := workqtype.CheckQueue("queue", p.queue); err != nil {
		return p, err
	}
	if err := workqtype.CheckTopic("topic", p.topic); err != nil {
		return p, err
	}
	if p.key != "" && !validText(p.key, MaxPartitionKeyBytes) {
		return p, invalid("partition_key", "partition key is not valid (at most %d bytes of UTF-8 without control characters)", MaxPartitionKeyBytes)
	}
	if p.corr != "" && !validText(p.corr, MaxCorrelationIDBytes) {
		return p, invalid("correlation_id", "correlation id is not valid (at most %d bytes of UTF-8 without control characters)", MaxCorrelationIDBytes)
	}
	payload, err := workqtype.EncodePayload(m.Payload, c.maxPayload)
	if err != nil {
		return p, err
	}
	p.payload = payload
	if p.headers, err = encodeHeaders(m.Headers); err != nil {
		return p, err
	}
	if p.delayMs, p.runAt, err = workqtype.Delay(m.Delay, m.RunAt); err != nil {
		return p, err
	}
	if p.maxAttempts, err = workqtype.MaxAttempts("max_attempts", m.MaxAttempts, c.maxAttempts); err != nil {
		return p, err
	}
	if p.joinID < 0 {
		return p, invalid("join_id", "join id %d is negative", p.joinID)
	}
	return p, nil
}

// validText: 1 to max bytes of UTF-8 without control characters (C0, DEL
// and C1).
func validText(s string, max int) bool {
	return len(s) >= 1 && len(s) <= max && utf8.ValidString(s) && !strings.ContainsFunc(s, unicode.IsControl)
}

// isTokenByte reports whether b may appear in an HTTP header name (RFC 9110 tchar).
func isTokenByte(b byte) bool {
	switch {
	case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9':
		return true
	}
	switch b {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}

func encodeHeaders(h map[string]string) ([]byte, error) {
	if len(h) == 0 {
		return []byte("{}"), nil
	}
	if len(h) > MaxHeaders {
		return nil, invalid("headers", "%d headers, more than %d", len(h), MaxHeaders)
	}
	for name, value := range h {
		if len(name) < 1 || len(name) > MaxHeaderNameBytes {
			return nil, invalid("headers", "header name %q must be 1-%d bytes", name, MaxHeaderNameBytes)
		}
		for i := 0; i < len(name); i++ {
			if !isTokenByte(name[i]) {
				return nil, invalid("headers", "header name %q has %q, not allowed in a header name (letters, digits and !#$%%&'*+-.^_`|~)", name, name[i])
			}
		}
		if len(value) > MaxHeaderValueBytes || !utf8.ValidString(value) {
			return nil, invalid("headers", "header %q: the value must be at most %d bytes of UTF-8", name, MaxHeaderValueBytes)
		}
		for _, r := range value {
			if r != '\t' && unicode.IsControl(r) {
				return nil, invalid("headers", "header %q: the value has a control character (%U)", name, r)
			}
		}
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, invalid("headers", "headers: %v", err)
	}
	if len(b) > MaxHeadersBytes {
		return nil, invalid("headers", "headers are %d bytes of JSON, more than %d", len(b), MaxHeadersBytes)
	}
	return b, nil
}

// Send writes one message on db: a pool, or the caller's transaction (then
// the message exists if and only if that transaction commits).
func (c *Client) Send(ctx context.Context, db workqtype.DB, m Message) (_ Sent, err error) {
	queue := m.Queue
	if queue == "" {
		queue = "default"
	}
	ctx, span, tc := c.startSend(ctx, queue, m.Topic, 1)
	defer func() { otelx.End(span, err) }()
	m.Headers = otelx.WithTrace(m.Headers, tc, MaxHeaders)
	p, err := c.prepare(m)
	if err != nil {
		return Sent{}, err
	}
	arg := gen.OutboxEnqueueParams{
		Queue: p.queue, Topic: p.topic, Payload: p.payload, Headers: p.headers, Priority: p.priority,
		RunAt: p.runAt, DelayMs: p.delayMs, MaxAttempts: p.maxAttempts, Notify: c.notify.Should(p.queue),
	}
	if p.key != "" {
		arg.PartitionKey = &p.key
	}
	if p.corr != "" {
		arg.CorrelationID = &p.corr
	}
	if p.messageID != uuid.Nil {
		arg.MessageID = &p.messageID
	}
	if p.joinID != 0 {
		arg.JoinID = &p.joinID
	}
	row, err := gen.New(db).OutboxEnqueue(ctx, arg)
	if err != nil {
		return Sent{}, sendError(fmt.Sprintf("send %s/%s", p.queue, p.topic), err)
	}
	return Sent{ID: row.ID, MessageID: row.MessageID}, nil
}

// SendMany writes many messages in one statement on db (a pool or the
// caller's transaction); the result has one entry per message, in order. A
// message that fails validation fails the call: nothing is written.
func (c *Client) SendMany(ctx context.Context, db workqtype.DB, msgs []Message) (_ []Sent, err error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	n := len(msgs)
	ctx, span, tc := c.startSend(ctx, "", "", n)
	defer func() { otelx.End(span, err) }()
	arg := gen.OutboxEnqueueManyParams{
		Queues: make([]string, n), Topics: make([]string, n), PartitionKeys: make([]string, n), MessageIds: make([]string, n),
		Payloads: make([]string, n), Headers: make([]string, n), CorrelationIds: make([]string, n), Priorities: make([]int16, n),
		RunAts: make([]string, n), DelaysMs: make([]int64, n), MaxAttempts: make([]int32, n), JoinIds: make([]int64, n),
	}
	queues := map[string]bool{}
	ids := map[uuid.UUID]int{}
	for i, m := range msgs {
		m.Headers = otelx.WithTrace(m.Headers, tc, MaxHeaders)
		p, err := c.prepare(m)
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		if p.messageID != uuid.Nil {
			if j, dup := ids[p.messageID]; dup {
				return nil, fmt.Errorf("message %d: %w: %w: message id %s is also message %d's", i, workqtype.ErrInvalid, ErrDuplicateMessageID, p.messageID, j)
			}
			ids[p.messageID] = i
			arg.MessageIds[i] = p.messageID.String()
		}
		if p.runAt != nil {
			arg.RunAts[i] = p.runAt.Format(time.RFC3339Nano)
		}
		arg.Queues[i], arg.Topics[i], arg.PartitionKeys[i], arg.Payloads[i], arg.Headers[i] = p.queue, p.topic, p.key, string(p.payload), string(p.headers)
		arg.CorrelationIds[i], arg.Priorities[i], arg.DelaysMs[i], arg.MaxAttempts[i], arg.JoinIds[i] = p.corr, p.priority, p.delayMs, p.maxAttempts, p.joinID
		queues[p.queue] = true
	}
	for q := range queues {
		if c.notify.Should(q) {
			arg.Notify = true
		}
	}
	rows, err := gen.New(db).OutboxEnqueueMany(ctx, arg)
	if err != nil {
		return nil, sendError(fmt.Sprintf("send %d messages", n), err)
	}
	if len(rows) != n {
		return nil, fmt.Errorf("send %d messages: %d rows returned", n, len(rows))
	}
	out := make([]Sent, n)
	for i, r := range rows {
		out[i] = Sent{ID: r.ID, MessageID: r.MessageID}
	}
	return out, nil
}

// sendError wraps a failed insert, naming a duplicate message id.
func sendError(what string, err error) error {
	var pg *pgconn.PgError
	if errors.As(err, &pg) && pg.Code == "23505" && pg.ConstraintName == "outbox_message_id_key" {
		return fmt.Errorf("%s: %w (%s)", what, ErrDuplicateMessageID, pg.Detail)
	}
	return fmt.Errorf("%s: %w", what, JoinError(err))
}
