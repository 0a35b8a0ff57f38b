package timersrt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/timers"
	"github.com/workq/workq/workqtype"
)

// States a timer is listed in: the lease states (cancelled is a state of
// its own on every work table since migration 00017).
const (
	StateReady      = "ready"
	StateInProgress = "in_progress"
	StateDone       = "done"
	StateFailed     = "failed"
	StateCancelled  = "cancelled"
)

// States lists every state, for validation and help texts.
var States = []string{StateReady, StateInProgress, StateDone, StateFailed, StateCancelled}

// Info is a stored timer.
type Info struct {
	ID          int64           `json:"id"`
	Queue       string          `json:"queue"`
	Topic       string          `json:"topic"`
	Payload     json.RawMessage `json:"payload"`
	DueTime     time.Time       `json:"due_time"`
	State       string          `json:"state"`
	Status      lease.Status    `json:"status"`
	Priority    int16           `json:"priority"`
	RunAt       time.Time       `json:"run_at"` // when it may next be claimed: the due time, or later after a retry
	Attempts    int32           `json:"attempts"`
	MaxAttempts int32           `json:"max_attempts"`
	LastError   string          `json:"last_error,omitempty"`
	ClaimedAt   *time.Time      `json:"claimed_at,omitempty"`
	ClaimedBy   string          `json:"claimed_by,omitempty"`
	LockedUntil *time.Time      `json:"locked_until,omitempty"`
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
	FinishedAt  *time.Time      `json:"finished_at,omitempty"`
	CancelledAt *time.Time      `json:"cancelled_at,omitempty"`
}

// stateOf names a row's state: the lease state's name (status 4 is
// cancelled since migration 00017).
func stateOf(status int16) string {
	if lease.Status(status) == lease.StatusCancelled {
		return StateCancelled
	}
	return lease.Status(status).String()
}

// cancelledAt is when a cancelled timer was cancelled: cancelled_at when
// Cancel set it, else (an operator's cancel, or a running timer's that took
// effect when its attempt ended) finished_at.
func cancelledAt(t gen.Timer) *time.Time {
	if lease.Status(t.Status) != lease.StatusCancelled {
		return t.CancelledAt
	}
	if t.CancelledAt != nil {
		return t.CancelledAt
	}
	return t.FinishedAt
}

func infoOf(t gen.Timer) Info {
	return Info{
		ID: t.ID, Queue: t.Queue, Topic: t.Topic, Payload: t.Payload, DueTime: t.DueTime,
		State: stateOf(t.Status), Status: lease.Status(t.Status), Priority: t.Priority,
		RunAt: t.RunAt, Attempts: t.Attempts, MaxAttempts: t.MaxAttempts, LastError: deref(t.LastError),
		ClaimedAt: t.ClaimedAt, ClaimedBy: deref(t.ClaimedBy), LockedUntil: t.LockedUntil,
		CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, FinishedAt: t.FinishedAt, CancelledAt: cancelledAt(t),
	}
}

// Get reads timer id; an unknown id returns an error wrapping ErrNotFound.
func Get(ctx context.Context, db workqtype.DB, id int64) (Info, error) {
	t, err := gen.New(db).TimersGet(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return Info{}, fmt.Errorf("timer %d: %w", id, timers.ErrNotFound)
	}
	if err != nil {
		return Info{}, fmt.Errorf("read timer %d: %w", id, err)
	}
	return infoOf(t), nil
}

// Attempts lists the archived attempts of timer id in claim order (the
// attempt in progress, if any, is on the timer itself: ClaimedAt, ClaimedBy).
func Attempts(ctx context.Context, db workqtype.DB, id int64) ([]workqtype.Attempt, error) {
	return lease.Attempts(ctx, db, lease.Timers, id)
}

// Filter selects timers for List; zero fields do not filter.
type Filter struct {
	Queue     string
	Topic     string
	State     string    // one of States
	DueBefore time.Time // due_time < DueBefore
	DueAfter  time.Time // due_time >= DueAfter
	AfterID   int64     // keyset pagination: ids greater than this
	Limit     int       // 1 to 10000; 0 means 100
}

// MaxListLimit is the most timers one List returns.
const MaxListLimit = 10000

// List returns timers in id order that match f, at most f.Limit of them;
// pass the last id as the next page's AfterID. Bad filters return an error
// wrapping workqtype.ErrInvalid.
func List(ctx context.Context, db workqtype.DB, f Filter) ([]Info, error) {
	arg := gen.TimersListParams{AfterID: f.AfterID, MaxRows: int32(f.Limit)}
	if f.Limit == 0 {
		arg.MaxRows = 100
	}
	if f.Limit < 0 || f.Limit > MaxListLimit {
		return nil, workqtype.Invalid("limit", fmt.Sprintf("limit must be between 1 and %d, got %d", MaxListLimit, f.Limit))
	}
	if f.AfterID < 0 {
		return nil, workqtype.Invalid("after_id", fmt.Sprintf("after id must not be negative, got %d", f.AfterID))
	}
	if f.Queue != "" {
		if err := workqtype.CheckQueue("queue", f.Queue); err != nil {
			return nil, err
		}
		arg.Queue = &f.Queue
	}
	if f.Topic != "" {
		arg.Topic = &f.Topic
	}
	if f.State != "" {
		ok := false
		for _, s := range States {
			ok = ok || s == f.State
		}
		if !ok {
			return nil, workqtype.Invalid("state", fmt.Sprintf("state %q is not one of %v", f.State, States))
		}
		arg.State = &f.State
	}
	if !f.DueBefore.IsZero() {
		arg.DueBefore = &f.DueBefore
	}
	if !f.DueAfter.IsZero() {
		arg.DueAfter = &f.DueAfter
	}
	rows, err := gen.New(db).TimersList(ctx, arg)
	if err != nil {
		return nil, fmt.Errorf("list timers: %w", err)
	}
	out := make([]Info, len(rows))
	for i, r := range rows {
		out[i] = infoOf(r)
	}
	return out, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// StateOf names the state of a timer row: the lease state's name
// (StateCancelled for status cancelled).
func StateOf(status lease.Status) string { return stateOf(int16(status)) }
