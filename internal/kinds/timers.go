package kinds

import (
	"context"
	"encoding/json"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/timersrt"
	"github.com/workq/workq/workqtype"
)

// timers is the kind of timers: a topic's payload due at a time.
var timers = Kind{
	Table:       workqtype.TableTimers,
	Name:        "timers",
	Title:       "Timers",
	Noun:        "timer",
	RetryWord:   "retry",
	KindLabel:   WordTopic,
	ClaimedKind: WordTopic,
	State:       timersrt.StateOf,
	States:      timersrt.States,
	Filters:     []string{FilterDueAfter, FilterDueBefore},
	Page:        pageTimers,
	PageAsc:     pageTimersAsc,
	Get:         getTimer,
}

func pageTimers(ctx context.Context, q *gen.Queries, a PageArgs) ([]workqtype.Item, error) {
	rows, err := q.TimersPage(ctx, gen.TimersPageParams{BeforeID: a.Before, Queue: a.Queue, Status: a.Status, Kind: a.Kind,
		CreatedAfter: a.After, CreatedBefore: a.CreatedBefore, MinID: a.MinID, DueAfter: a.DueAfter, DueBefore: a.DueBefore, ErrorText: a.ErrorText, MaxRows: a.Max})
	return mapRows(rows, err, timerItem)
}

func getTimer(ctx context.Context, q *gen.Queries, id int64) (workqtype.Item, error) {
	r, err := q.TimersGet(ctx, id)
	return timerItem(r), err
}

func timerItem(r gen.Timer) workqtype.Item {
	it := workqtype.Item{Table: workqtype.TableTimers, ID: r.ID, Queue: r.Queue, Kind: r.Topic, Priority: r.Priority, RunAt: r.RunAt,
		Attempts: r.Attempts, MaxAttempts: r.MaxAttempts, LeaseVersion: r.LeaseVersion, ClaimedAt: r.ClaimedAt,
		ClaimedBy: deref(r.ClaimedBy), LockedUntil: r.LockedUntil, LastError: deref(r.LastError),
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, FinishedAt: r.FinishedAt, Payload: json.RawMessage(r.Payload)}
	setStatus(&it, lease.Status(r.Status), timersrt.StateOf(lease.Status(r.Status)))
	detail(&it, "due_time", &r.DueTime)
	detail(&it, "cancelled_at", r.CancelledAt)
	detail(&it, "cancel_requested_at", r.CancelRequestedAt)
	return it
}

func pageTimersAsc(ctx context.Context, q *gen.Queries, a PageArgs) ([]workqtype.Item, error) {
	rows, err := q.TimersPageAsc(ctx, gen.TimersPageAscParams{AfterID: a.AfterID, Queue: a.Queue, Status: a.Status, Kind: a.Kind,
		CreatedAfter: a.After, CreatedBefore: a.CreatedBefore, MaxID: a.MaxID, DueAfter: a.DueAfter, DueBefore: a.DueBefore, ErrorText: a.ErrorText, MaxRows: a.Max})
	return mapRows(rows, err, timerItem)
}
