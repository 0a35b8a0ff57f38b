// Package inbox holds the types of workq's inbox, which receives messages
// from other systems idempotently: each (source, message id) is recorded
// once and processed once, however often the sender delivers it.
//
// A workq.Client receives and processes messages:
//
//	r, err := client.ReceiveTx(ctx, tx, inbox.Message{Source: "stripe", MessageID: evt.ID, Topic: evt.Type, Payload: evt})
//
//	workq.HandleInbox(workers, "charge.succeeded", func(ctx context.Context, m *workq.Message[Charge]) error { ... })
//
// Receiving records a message on the Client's pool or inside the caller's
// pgx.Tx, so the receipt commits (or rolls back) with the caller's own
// writes. The first receipt of a (source, message id) inserts it for
// processing; a repeat with the same payload is a duplicate
// (Received.Duplicate, and Processed once its handler has succeeded) and
// changes nothing; a repeat with a different payload is a conflict (an
// error wrapping ErrConflict) and changes nothing either.
//
// Payloads are compared by hash: sha256 of the payload's canonical text,
// which is PostgreSQL's jsonb output of it (keys sorted by length then
// bytes, the last of duplicate keys kept, no insignificant whitespace,
// escapes decoded, numbers as written: 1 and 1.0 differ). So
// {"b":1, "a":2} and {"a":2,"b":1} are the same payload.
//
// docs/inbox.md describes the semantics and decisions.
package inbox

import (
	"errors"
	"fmt"

	"github.com/workq/workq/workqtype"
)

// ErrConflict is wrapped by the error for a message whose (source, message
// id) was received before with a different payload. The stored message is
// left exactly as it was.
var ErrConflict = errors.New("inbox message conflict: same source and message id, different payload")

// ErrNotFound is wrapped by the error of a read of an id that names no
// inbox message. It wraps workqtype.ErrNotFound (workq.ErrNotFound).
var ErrNotFound = fmt.Errorf("inbox message %w", workqtype.ErrNotFound)

// ConflictError describes one conflicting message. It matches ErrConflict.
type ConflictError struct {
	Index     int    // position in the ReceiveMany batch (0 for Receive)
	Source    string // the message's source
	MessageID string // the message's id
	ID        int64  // the stored message it conflicts with
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%v: source %q message %q is stored as inbox %d with another payload hash; nothing changed",
		ErrConflict, e.Source, e.MessageID, e.ID)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// Message is one incoming message.
type Message struct {
	Source      string // required: the sending system, 1-256 bytes of UTF-8 (no NUL)
	MessageID   string // required: the sender's id of the message, 1-512 bytes of UTF-8 (no NUL)
	Topic       string // optional: selects the handler; "" routes to the default handler
	Payload     any    // a JSON object: a struct or map to marshal, or raw JSON as json.RawMessage or []byte; nil means {}
	Queue       string // default "default"
	Priority    int16  // stored; the inbox claims in arrival order
	MaxAttempts int    // 0: the client default (4)
}

// Received is the outcome of receiving one message.
type Received struct {
	ID        int64 `json:"id"`        // the stored message (new or existing)
	Duplicate bool  `json:"duplicate"` // received before with the same payload (or earlier in the same batch); not processed again
	Processed bool  `json:"processed"` // a duplicate whose stored message is done already
	Conflict  bool  `json:"conflict"`  // received before with another payload; nothing changed
	// Status is the stored message's state when received, as the inbox
	// names it: ready, processing, processed, dead or cancelled.
	Status string `json:"status"`
	// Shard is the database it was recorded in (workq.DefaultShard for a
	// Client of one database).
	Shard string `json:"shard,omitempty"`
}

// New reports whether this call inserted the message.
func (r Received) New() bool { return !r.Duplicate && !r.Conflict }
