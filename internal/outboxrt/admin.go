package outboxrt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/workqtype"
)

// Record is a stored outbox message.
type Record struct {
	ID            int64           `json:"id"`
	Queue         string          `json:"queue"`
	Topic         string          `json:"topic"`
	PartitionKey  string          `json:"partition_key,omitempty"`
	MessageID     uuid.UUID       `json:"message_id"`
	CorrelationID string          `json:"correlation_id,omitempty"`
	Payload       json.RawMessage `json:"payload"`
	Headers       json.RawMessage `json:"headers"`
	Status        string          `json:"status"`
	Priority      int16           `json:"priority"`
	RunAt         time.Time       `json:"run_at"`
	Attempts      int32           `json:"attempts"`
	MaxAttempts   int32           `json:"max_attempts"`
	LeaseVersion  int64           `json:"lease_version"`
	ClaimedBy     string          `json:"claimed_by,omitempty"`
	LastError     string          `json:"last_error,omitempty"`
	KeySeq        int64           `json:"key_seq,omitempty"` // the message's place in its partition key's order (0: no key, or delivered before migration 00016)
	JoinID        int64           `json:"join_id,omitempty"`
	CreatedAt     time.Time       `json:"created_at"`
	UpdatedAt     time.Time       `json:"updated_at"`
	FinishedAt    *time.Time      `json:"finished_at,omitempty"`
}

func record(r gen.Outbox) Record {
	return Record{ID: r.ID, Queue: r.Queue, Topic: r.Topic, PartitionKey: deref(r.PartitionKey), MessageID: r.MessageID,
		CorrelationID: deref(r.CorrelationID), Payload: r.Payload, Headers: r.Headers, Status: lease.Status(r.Status).String(),
		Priority: r.Priority, RunAt: r.RunAt, Attempts: r.Attempts, MaxAttempts: r.MaxAttempts, LeaseVersion: r.LeaseVersion,
		ClaimedBy: deref(r.ClaimedBy), LastError: deref(r.LastError), KeySeq: deref(r.KeySeq), JoinID: deref(r.JoinID),
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, FinishedAt: r.FinishedAt}
}

// Get reads one message by id.
func Get(ctx context.Context, db workqtype.DB, id int64) (Record, error) {
	r, err := gen.New(db).OutboxGet(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return Record{}, fmt.Errorf("%w: id %d", outbox.ErrNotFound, id)
	}
	if err != nil {
		return Record{}, fmt.Errorf("get outbox message %d: %w", id, err)
	}
	return record(r), nil
}

// GetByMessageID reads one message by its message id.
func GetByMessageID(ctx context.Context, db workqtype.DB, messageID uuid.UUID) (Record, error) {
	r, err := gen.New(db).OutboxGetByMessageID(ctx, messageID)
	if errors.Is(err, pgx.ErrNoRows) {
		return Record{}, fmt.Errorf("%w: message id %s", outbox.ErrNotFound, messageID)
	}
	if err != nil {
		return Record{}, fmt.Errorf("get outbox message %s: %w", messageID, err)
	}
	return record(r), nil
}

// ListQuery filters List; zero fields match everything.
type ListQuery struct {
	Queue        string
	Status       *lease.Status
	Topic        string
	PartitionKey string
	AfterID      int64 // keyset pagination: ids after this one
	Limit        int   // 0: 100
}

// List lists messages in id order.
func List(ctx context.Context, db workqtype.DB, q ListQuery) ([]Record, error) {
	if q.Limit == 0 {
		q.Limit = 100
	}
	if q.Limit < 0 || q.AfterID < 0 {
		return nil, fmt.Errorf("%w: limit and after id must not be negative", workqtype.ErrInvalid)
	}
	status := int32(-1)
	if q.Status != nil {
		status = int32(*q.Status)
	}
	rows, err := gen.New(db).OutboxList(ctx, gen.OutboxListParams{AfterID: q.AfterID, Queue: q.Queue, Status: status,
		Topic: q.Topic, PartitionKey: q.PartitionKey, MaxRows: int32(min(q.Limit, math.MaxInt32))})
	if err != nil {
		return nil, fmt.Errorf("list outbox: %w", err)
	}
	out := make([]Record, len(rows))
	for i, r := range rows {
		out[i] = record(r)
	}
	return out, nil
}

// Attempts lists the archived attempts of message id, in claim order.
func Attempts(ctx context.Context, db workqtype.DB, id int64) ([]workqtype.Attempt, error) {
	return lease.Attempts(ctx, db, lease.Outbox, id)
}

// Retry puts failed messages back to ready (attempts reset) and records
// who did it and why in the run archive. It returns the ids it retried:
// messages that are not failed are left alone.
func Retry(ctx context.Context, db workqtype.DB, actor, reason string, ids ...int64) ([]int64, error) {
	got, err := lease.New(db, lease.Outbox).Revive(ctx, actor, reason, ids...)
	if err != nil {
		return nil, fmt.Errorf("retry: %w", err)
	}
	return got, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// DeleteFinished deletes up to max done or failed messages that finished
// more than olderThan ago (retention), except failed messages with a
// partition key, which may be blocking their key: those stay until an
// operator retries or deletes them. When fewer than max were left to
// delete, it also deletes up to max partition-key counters last written
// more than olderThan ago whose key has no message not done (the key's
// order starts again at 1; never while a writer of the key is open). It
// returns how many rows it deleted, of both kinds. It is
// lease.Engine.DeleteFinished on the outbox.
func DeleteFinished(ctx context.Context, db workqtype.DB, olderThan time.Duration, max int) (int64, error) {
	if olderThan <= 0 || max < 1 {
		return 0, fmt.Errorf("%w: delete finished outbox messages: age and max must be positive", workqtype.ErrInvalid)
	}
	return lease.New(db, lease.Outbox).DeleteFinished(ctx, olderThan, max)
}
