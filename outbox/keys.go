package outbox

import (
	"time"

	"github.com/google/uuid"
)

// KeyHead is a partition key with messages not yet done, and its head:
// the first of them in write order, the only one of the key that can run
// (workq.Client.OutboxKeys lists them).
type KeyHead struct {
	PartitionKey string    `json:"partition_key"`
	HeadID       int64     `json:"head_id"`
	MessageID    uuid.UUID `json:"message_id"`
	Topic        string    `json:"topic"`
	// Status is the head's state: ready, in_progress, failed (done and
	// cancelled messages are passed over).
	Status      string    `json:"status"`
	Attempts    int32     `json:"attempts"`
	MaxAttempts int32     `json:"max_attempts"`
	RunAt       time.Time `json:"run_at"`
	LastError   string    `json:"last_error,omitempty"`
	UpdatedAt   time.Time `json:"updated_at"`
	// Blocked is true when the head is failing (waiting for a retry, or in
	// a retry attempt) or failed: the key is held up by it.
	Blocked bool `json:"-"`
	// Shard is the database of the key (the Client's shard name).
	Shard string `json:"shard,omitempty"`
}

// KeyQuery selects the partition keys of one queue (workq.Client.OutboxKeys).
type KeyQuery struct {
	Queue       string // default "default"
	OnlyBlocked bool   // only keys whose head is failing or failed (KeyHead.Blocked)
	// SkipTopics are topics whose relay uses OnFinalFailure Skip: their
	// failed messages block nothing and are passed over.
	SkipTopics []string
	AfterKey   string // keyset pagination: keys after this one (the last of the previous page)
	Limit      int    // at most this many (0: 100)
	// Shard is the database to read on a sharded Client (required there:
	// a key's order is kept per shard).
	Shard string
}
