// Package outboxrt is the outbox's runtime: the Client that writes
// messages (package outbox holds the types a user names), the Relay that
// hands claimed messages to their topic's handler on the shared runtime, the
// operator reads and writes (Get, List, Attempts, Retry, Keys, Stats,
// DeleteFinished), fan-in joins (StartJoin, GetJoin, ListJoins,
// FailExpiredJoins) and the join deadline loop. A workq.Client, the HTTP
// API, the dashboard and the CLI use it; users do not.
package outboxrt

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
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/workqtype"
)

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
func (c *Client) Validate(m outbox.Message) error {
	_, err := c.prepare(m)
	return err
}

func (c *Client) prepare(m outbox.Message) (prepared, error) {
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
	if p.key != "" && !validText(p.key, outbox.MaxPartitionKeyBytes) {
		return p, invalid("partition_key", "partition key is not valid (at most %d bytes of UTF-8 without control characters)", outbox.MaxPartitionKeyBytes)
	}
	if p.corr != "" && !validText(p.corr, outbox.MaxCorrelationIDBytes) {
		return p, invalid("correlation_id", "correlation id is not valid (at most %d bytes of UTF-8 without control characters)", outbox.MaxCorrelationIDBytes)
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
	if len(h) > outbox.MaxHeaders {
		return nil, invalid("headers", "%d headers, more than %d", len(h), outbox.MaxHeaders)
	}
	for name, value := range h {
		if len(name) < 1 || len(name) > outbox.MaxHeaderNameBytes {
			return nil, invalid("headers", "header name %q must be 1-%d bytes", name, outbox.MaxHeaderNameBytes)
		}
		for i := 0; i < len(name); i++ {
			if !isTokenByte(name[i]) {
				return nil, invalid("headers", "header name %q has %q, not allowed in a header name (letters, digits and !#$%%&'*+-.^_`|~)", name, name[i])
			}
		}
		if len(value) > outbox.MaxHeaderValueBytes || !utf8.ValidString(value) {
			return nil, invalid("headers", "header %q: the value must be at most %d bytes of UTF-8", name, outbox.MaxHeaderValueBytes)
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
	if len(b) > outbox.MaxHeadersBytes {
		return nil, invalid("headers", "headers are %d bytes of JSON, more than %d", len(b), outbox.MaxHeadersBytes)
	}
	return b, nil
}

// Send writes one message on db: a pool, or the caller's transaction (then
// the message exists if and only if that transaction commits).
func (c *Client) Send(ctx context.Context, db workqtype.DB, m outbox.Message) (_ outbox.Sent, err error) {
	queue := m.Queue
	if queue == "" {
		queue = "default"
	}
	ctx, span, tc := c.startSend(ctx, queue, m.Topic, 1)
	defer func() { otelx.End(span, err) }()
	m.Headers = otelx.WithTrace(m.Headers, tc, outbox.MaxHeaders)
	p, err := c.prepare(m)
	if err != nil {
		return outbox.Sent{}, err
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
		return outbox.Sent{}, sendError(fmt.Sprintf("send %s/%s", p.queue, p.topic), err)
	}
	return outbox.Sent{ID: row.ID, MessageID: row.MessageID}, nil
}

// SendMany writes many messages in one statement on db (a pool or the
// caller's transaction); the result has one entry per message, in order. A
// message that fails validation fails the call: nothing is written.
func (c *Client) SendMany(ctx context.Context, db workqtype.DB, msgs []outbox.Message) (_ []outbox.Sent, err error) {
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
		m.Headers = otelx.WithTrace(m.Headers, tc, outbox.MaxHeaders)
		p, err := c.prepare(m)
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		if p.messageID != uuid.Nil {
			if j, dup := ids[p.messageID]; dup {
				return nil, fmt.Errorf("message %d: %w: %w: message id %s is also message %d's", i, workqtype.ErrInvalid, outbox.ErrDuplicateMessageID, p.messageID, j)
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
	out := make([]outbox.Sent, n)
	for i, r := range rows {
		out[i] = outbox.Sent{ID: r.ID, MessageID: r.MessageID}
	}
	return out, nil
}

// sendError wraps a failed insert, naming a duplicate message id.
func sendError(what string, err error) error {
	var pg *pgconn.PgError
	if errors.As(err, &pg) && pg.Code == "23505" && pg.ConstraintName == "outbox_message_id_key" {
		return fmt.Errorf("%s: %w (%s)", what, outbox.ErrDuplicateMessageID, pg.Detail)
	}
	return fmt.Errorf("%s: %w", what, JoinError(err))
}
