// Package outbox holds the types of workq's transactional outbox: the
// Message a producer writes in the same transaction as the business change
// it announces, what the write returns (Sent), the per-topic relay options
// (TopicOptions, RelayOptions), fan-in joins (JoinSpec, Join) and the
// errors of all of them. A message is written if and only if its
// transaction commits.
//
// A workq.Client writes and relays messages:
//
//	sent, err := client.SendTx(ctx, tx, outbox.Message{Topic: "order.created", PartitionKey: "order-42", Payload: order})
//
//	workq.HandleOutbox(workers, "order.created", func(ctx context.Context, m *workq.Message[Order]) error { ... })
//
// Messages with a partition key are delivered strictly in write order per
// key, one at a time per key, keys in parallel; messages without one are
// unordered and fully parallel. Package publish delivers messages to
// webhooks and NATS JetStream. docs/outbox.md explains the design.
package outbox

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/workq/workq/workqtype"
)

// ErrDuplicateMessageID is wrapped by the error of a Send or SendMany that
// carries a message id already in the outbox (or twice in one SendMany).
// Nothing of that call is written. Inside a transaction the failed
// statement aborts the transaction, as any failed statement does.
var ErrDuplicateMessageID = errors.New("duplicate outbox message id")

// ErrNotFound is wrapped by the error of a read of a message that is not
// in the outbox. It wraps workqtype.ErrNotFound (workq.ErrNotFound).
var ErrNotFound = fmt.Errorf("outbox message %w", workqtype.ErrNotFound)

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
	// Shard is the database it was written to (workq.DefaultShard for a
	// Client of one database).
	Shard string `json:"shard,omitempty"`
}
