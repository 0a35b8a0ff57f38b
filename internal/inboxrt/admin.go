package inboxrt

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/inbox"
	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/workqtype"
)

// Revive puts dead (failed) messages back to ready with their attempts
// reset, and keeps an audit row in the run archive (outcome "revived", actor
// as the worker, reason as the error). It returns the ids it revived; ids
// that are not dead are left alone. actor must not be empty.
func Revive(ctx context.Context, db workqtype.DB, actor, reason string, ids ...int64) ([]int64, error) {
	got, err := lease.New(db, lease.Inbox).Revive(ctx, actor, reason, ids...)
	if err != nil {
		return nil, fmt.Errorf("inbox: %w", err)
	}
	return got, nil
}

// DeleteBatch is how many rows one statement of DeleteProcessed deletes at
// most: short statements keep locks and WAL bursts small beside the
// workers.
const DeleteBatch = 1000

// DeleteProcessed ends the de-duplication window: it deletes processed
// (done) messages that finished more than olderThan ago, at most max of
// them, in statements of DeleteBatch rows by primary key, and returns how
// many it deleted. A repeat of a deleted message is received as new. Dead
// (failed) messages are never deleted here: they stay until an operator
// revives or deletes them. olderThan and max must be positive (an error
// wrapping workqtype.ErrInvalid otherwise).
func DeleteProcessed(ctx context.Context, db workqtype.DB, olderThan time.Duration, max int64) (int64, error) {
	if olderThan <= 0 {
		return 0, fmt.Errorf("inbox: delete processed: %w: the window must be positive, got %s", workqtype.ErrInvalid, olderThan)
	}
	if max <= 0 {
		return 0, fmt.Errorf("inbox: delete processed: %w: max must be positive, got %d", workqtype.ErrInvalid, max)
	}
	olderMs := int64(math.Ceil(float64(olderThan) / float64(time.Millisecond)))
	q := gen.New(db)
	var total int64
	for total < max {
		want := min(max-total, DeleteBatch)
		n, err := q.InboxDeleteProcessed(ctx, olderMs, int32(want))
		if err != nil {
			return total, fmt.Errorf("inbox: delete processed: %w", err)
		}
		total += n
		if n < want {
			break
		}
	}
	return total, nil
}

// Stored is an inbox message as stored.
type Stored struct {
	ID          int64        `json:"id"`
	Queue       string       `json:"queue"`
	Source      string       `json:"source"`
	MessageID   string       `json:"message_id"`
	Topic       string       `json:"topic,omitempty"`
	Payload     []byte       `json:"-"`
	Status      lease.Status `json:"-"`
	Priority    int16        `json:"priority"`
	Attempts    int32        `json:"attempts"`
	MaxAttempts int32        `json:"max_attempts"`
	ReceivedAt  time.Time    `json:"received_at"`
	RunAt       time.Time    `json:"run_at"`
	FinishedAt  *time.Time   `json:"finished_at,omitempty"`
	LastError   string       `json:"last_error,omitempty"`
	PayloadHash []byte       `json:"-"`
}

// StatusName names an inbox status the way the inbox reads it: ready,
// processing, processed, dead or cancelled.
func StatusName(s lease.Status) string {
	switch s {
	case lease.StatusReady:
		return "ready"
	case lease.StatusInProgress:
		return "processing"
	case lease.StatusDone:
		return "processed"
	case lease.StatusFailed:
		return "dead"
	}
	return s.String()
}

// ParseStatus reads a status by its inbox name (ready, processing,
// processed, dead, cancelled) or its lease name (in_progress, done, failed).
func ParseStatus(s string) (lease.Status, error) {
	switch s {
	case "ready":
		return lease.StatusReady, nil
	case "processing", "in_progress":
		return lease.StatusInProgress, nil
	case "processed", "done":
		return lease.StatusDone, nil
	case "dead", "failed":
		return lease.StatusFailed, nil
	case "cancelled":
		return lease.StatusCancelled, nil
	}
	return 0, fmt.Errorf("%w: status %q is not one of ready, processing, processed, dead, cancelled", workqtype.ErrInvalid, s)
}

// Get reads one stored message; ErrNotFound when there is none.
func Get(ctx context.Context, db workqtype.DB, id int64) (Stored, error) {
	r, err := gen.New(db).InboxGet(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return Stored{}, fmt.Errorf("inbox %d: %w", id, inbox.ErrNotFound)
	}
	if err != nil {
		return Stored{}, fmt.Errorf("inbox %d: %w", id, err)
	}
	return Stored{
		ID: r.ID, Queue: r.Queue, Source: r.Source, MessageID: r.MessageID, Topic: deref(r.Topic), Payload: r.Payload,
		Status: lease.Status(r.Status), Priority: r.Priority, Attempts: r.Attempts, MaxAttempts: r.MaxAttempts,
		ReceivedAt: r.FirstSeenAt, RunAt: r.RunAt, FinishedAt: r.FinishedAt, LastError: deref(r.LastError), PayloadHash: r.PayloadHash,
	}, nil
}

// Filter selects messages for List. Zero fields do not filter.
type Filter struct {
	Queue, Source, Topic string
	Status               *lease.Status
	AfterID              int64 // keyset pagination: only ids above this
	Limit                int   // 1-10000; 0 means 100
}

// List returns stored messages in id order (without payloads). For the next
// page pass the last id as Filter.AfterID.
func List(ctx context.Context, db workqtype.DB, f Filter) ([]Stored, error) {
	if f.Limit == 0 {
		f.Limit = 100
	}
	if f.Limit < 1 || f.Limit > 10000 {
		return nil, fmt.Errorf("inbox list: %w: limit must be between 1 and 10000, got %d", workqtype.ErrInvalid, f.Limit)
	}
	if f.AfterID < 0 {
		return nil, fmt.Errorf("inbox list: %w: after id must not be negative, got %d", workqtype.ErrInvalid, f.AfterID)
	}
	arg := gen.InboxListParams{AfterID: f.AfterID, MaxRows: int32(f.Limit)}
	if f.Queue != "" {
		arg.Queue = &f.Queue
	}
	if f.Source != "" {
		arg.Source = &f.Source
	}
	if f.Topic != "" {
		arg.Topic = &f.Topic
	}
	if f.Status != nil {
		s := int16(*f.Status)
		arg.Status = &s
	}
	rows, err := gen.New(db).InboxList(ctx, arg)
	if err != nil {
		return nil, fmt.Errorf("inbox list: %w", err)
	}
	out := make([]Stored, len(rows))
	for i, r := range rows {
		out[i] = Stored{
			ID: r.ID, Queue: r.Queue, Source: r.Source, MessageID: r.MessageID, Topic: deref(r.Topic),
			Status: lease.Status(r.Status), Priority: r.Priority, Attempts: r.Attempts, MaxAttempts: r.MaxAttempts,
			ReceivedAt: r.FirstSeenAt, RunAt: r.RunAt, FinishedAt: r.FinishedAt, LastError: deref(r.LastError),
		}
	}
	return out, nil
}

// Attempts returns the archived attempts (and revive audit rows) of one
// message, in order.
func Attempts(ctx context.Context, db workqtype.DB, id int64) ([]workqtype.Attempt, error) {
	return lease.Attempts(ctx, db, lease.Inbox, id)
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
