package workqtype

import (
	"encoding/json"
	"time"
)

// Item is one work item of any table (a job run, an outbox or inbox
// message, a timer), as the Client's Get and List return it: the lease
// columns every table shares, its kind (the topic on outbox, inbox and
// timers), its payload, and the columns of its own table in Details. The
// HTTP API serves it as JSON with these names.
type Item struct {
	// Shard is the item's database: the shard's name when the Client (or
	// the API) serves several, the Client's own shard name otherwise
	// ("default" for NewClient; "" from the API of one database).
	Shard string `json:"shard,omitempty"`
	Table Table  `json:"table"`
	ID    int64  `json:"id"`
	Queue string `json:"queue"`
	Kind  string `json:"kind"` // job kind, or topic
	// Status is the lease state: ready, in_progress, done, failed or
	// cancelled; State the table's own word for it (the inbox's
	// processing, processed and dead; the others' are Status).
	Status   string `json:"status"`
	State    string `json:"state"`
	Priority int16  `json:"priority"`
	// RunAt is when the item is due (ready) or was last due; a finished
	// item's time is FinishedAt (see WhenAt).
	RunAt        time.Time  `json:"run_at"`
	Attempts     int32      `json:"attempts"`
	MaxAttempts  int32      `json:"max_attempts"`
	LeaseVersion int64      `json:"lease_version"`
	ClaimedAt    *time.Time `json:"claimed_at,omitempty"`
	ClaimedBy    string     `json:"claimed_by,omitempty"`
	LockedUntil  *time.Time `json:"locked_until,omitempty"`
	// LastError is the error the item failed, retries or was cancelled
	// with; never set on a done item (its earlier attempts' errors are in
	// Attempts).
	LastError  string          `json:"last_error,omitempty"`
	CreatedAt  time.Time       `json:"created_at"`
	UpdatedAt  time.Time       `json:"updated_at"`
	FinishedAt *time.Time      `json:"finished_at,omitempty"`
	Payload    json.RawMessage `json:"payload,omitempty"`
	// Metadata of a job run: what it was enqueued with, and the enqueuing
	// span's trace context (traceparent, tracestate) when it was traced.
	// Nil for none and on the other tables (an outbox message's headers
	// are in Details).
	Metadata map[string]string `json:"metadata,omitempty"`
	Details  map[string]any    `json:"details,omitempty"`
}

// WhenAt is the time to show for the item: when it ended once finished,
// else when it is due. A finished item's run_at is when it last was due,
// not when anything happens to it.
func (it Item) WhenAt() time.Time {
	if it.FinishedAt != nil {
		return *it.FinishedAt
	}
	return it.RunAt
}
