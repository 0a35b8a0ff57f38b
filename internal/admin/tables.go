package admin

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/inboxrt"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/timersrt"
	"github.com/workq/workq/workqtype"
)

// uniqueStates names the statuses of a job_runs.unique_states mask.
func uniqueStates(mask *int16) string {
	var names []string
	for s := lease.Status(0); s < 16; s++ {
		if mask != nil && *mask&(1<<s) != 0 {
			names = append(names, s.String())
		}
	}
	return strings.Join(names, ",")
}

func ptr[T any](v T) *T { return &v }

// Each table's page and get statements return its own row type; these map
// them to Items, payload included (a page's statement reads it anyway).

func pageJobRuns(ctx context.Context, q *gen.Queries, a pageArgs) ([]Item, error) {
	rows, err := q.JobRunsPage(ctx, gen.JobRunsPageParams{BeforeID: a.before, Queue: a.queue, Status: a.status, Kind: a.kind,
		CreatedAfter: a.after, CreatedBefore: a.createdBefore, MinID: a.minID, ErrorText: a.errorText, Metadata: a.metadata, MaxRows: a.max})
	return mapRows(rows, err, jobRunItem)
}

func getJobRun(ctx context.Context, q *gen.Queries, id int64) (Item, error) {
	r, err := q.JobRunsGet(ctx, id)
	return jobRunItem(r), err
}

func jobRunItem(r gen.JobRun) Item {
	it := Item{Table: lease.JobRuns, ID: r.ID, Queue: r.Queue, Kind: r.Kind, Priority: r.Priority, RunAt: r.RunAt,
		Attempts: r.Attempts, MaxAttempts: r.MaxAttempts, LeaseVersion: r.LeaseVersion, ClaimedAt: r.ClaimedAt,
		ClaimedBy: deref(r.ClaimedBy), LockedUntil: r.LockedUntil, LastError: deref(r.LastError),
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, FinishedAt: r.FinishedAt, Payload: json.RawMessage(r.Payload), Metadata: workqtype.DecodeMetadata(r.Metadata)}
	setStatus(&it, lease.Status(r.Status), lease.Status(r.Status).String())
	detail(&it, "dedup_key", r.DedupKey)
	if r.UniqueKey != nil {
		detail(&it, "unique_key", ptr(hex.EncodeToString(r.UniqueKey)))
		detail(&it, "unique_states", ptr(uniqueStates(r.UniqueStates)))
	}
	detail(&it, "schedule_id", r.ScheduleID)
	detail(&it, "scheduled_time", r.ScheduledTime)
	detail(&it, "cancel_requested_at", r.CancelRequestedAt)
	return it
}

func pageOutbox(ctx context.Context, q *gen.Queries, a pageArgs) ([]Item, error) {
	rows, err := q.OutboxPage(ctx, gen.OutboxPageParams{BeforeID: a.before, Queue: a.queue, Status: a.status, Kind: a.kind,
		CreatedAfter: a.after, CreatedBefore: a.createdBefore, MinID: a.minID, ErrorText: a.errorText, MaxRows: a.max})
	return mapRows(rows, err, outboxItem)
}

func getOutbox(ctx context.Context, q *gen.Queries, id int64) (Item, error) {
	r, err := q.OutboxGet(ctx, id)
	return outboxItem(r), err
}

func outboxItem(r gen.Outbox) Item {
	it := Item{Table: lease.Outbox, ID: r.ID, Queue: r.Queue, Kind: r.Topic, Priority: r.Priority, RunAt: r.RunAt,
		Attempts: r.Attempts, MaxAttempts: r.MaxAttempts, LeaseVersion: r.LeaseVersion, ClaimedAt: r.ClaimedAt,
		ClaimedBy: deref(r.ClaimedBy), LockedUntil: r.LockedUntil, LastError: deref(r.LastError),
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, FinishedAt: r.FinishedAt, Payload: json.RawMessage(r.Payload)}
	setStatus(&it, lease.Status(r.Status), lease.Status(r.Status).String())
	detail(&it, "message_id", &r.MessageID)
	detail(&it, "partition_key", r.PartitionKey)
	detail(&it, "correlation_id", r.CorrelationID)
	detail(&it, "join_id", r.JoinID)
	if len(r.Headers) > 0 && string(r.Headers) != "{}" {
		detail(&it, "headers", &r.Headers)
	}
	detail(&it, "cancel_requested_at", r.CancelRequestedAt)
	return it
}

func pageInbox(ctx context.Context, q *gen.Queries, a pageArgs) ([]Item, error) {
	rows, err := q.InboxPage(ctx, gen.InboxPageParams{BeforeID: a.before, Queue: a.queue, Status: a.status, Kind: a.kind,
		CreatedAfter: a.after, CreatedBefore: a.createdBefore, MinID: a.minID, ErrorText: a.errorText, MaxRows: a.max})
	return mapRows(rows, err, inboxItem)
}

func getInbox(ctx context.Context, q *gen.Queries, id int64) (Item, error) {
	r, err := q.InboxGet(ctx, id)
	return inboxItem(r), err
}

func inboxItem(r gen.Inbox) Item {
	it := Item{Table: lease.Inbox, ID: r.ID, Queue: r.Queue, Kind: deref(r.Topic), Priority: r.Priority, RunAt: r.RunAt,
		Attempts: r.Attempts, MaxAttempts: r.MaxAttempts, LeaseVersion: r.LeaseVersion, ClaimedAt: r.ClaimedAt,
		ClaimedBy: deref(r.ClaimedBy), LockedUntil: r.LockedUntil, LastError: deref(r.LastError),
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, FinishedAt: r.FinishedAt, Payload: json.RawMessage(r.Payload)}
	setStatus(&it, lease.Status(r.Status), inboxrt.StatusName(lease.Status(r.Status)))
	detail(&it, "source", &r.Source)
	detail(&it, "message_id", &r.MessageID)
	detail(&it, "first_seen_at", &r.FirstSeenAt)
	detail(&it, "cancel_requested_at", r.CancelRequestedAt)
	return it
}

func pageTimers(ctx context.Context, q *gen.Queries, a pageArgs) ([]Item, error) {
	rows, err := q.TimersPage(ctx, gen.TimersPageParams{BeforeID: a.before, Queue: a.queue, Status: a.status, Kind: a.kind,
		CreatedAfter: a.after, CreatedBefore: a.createdBefore, MinID: a.minID, ErrorText: a.errorText, MaxRows: a.max})
	return mapRows(rows, err, timerItem)
}

func getTimer(ctx context.Context, q *gen.Queries, id int64) (Item, error) {
	r, err := q.TimersGet(ctx, id)
	return timerItem(r), err
}

func timerItem(r gen.Timer) Item {
	it := Item{Table: lease.Timers, ID: r.ID, Queue: r.Queue, Kind: r.Topic, Priority: r.Priority, RunAt: r.RunAt,
		Attempts: r.Attempts, MaxAttempts: r.MaxAttempts, LeaseVersion: r.LeaseVersion, ClaimedAt: r.ClaimedAt,
		ClaimedBy: deref(r.ClaimedBy), LockedUntil: r.LockedUntil, LastError: deref(r.LastError),
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, FinishedAt: r.FinishedAt, Payload: json.RawMessage(r.Payload)}
	setStatus(&it, lease.Status(r.Status), timersrt.StateOf(lease.Status(r.Status)))
	detail(&it, "due_time", &r.DueTime)
	detail(&it, "cancelled_at", r.CancelledAt)
	detail(&it, "cancel_requested_at", r.CancelRequestedAt)
	return it
}

// setStatus sets the item's status and its table's word for it (State).
// A done item shows no last error: last_error is the error of an earlier
// attempt that failed before one succeeded, which is not the item's error
// (it stays in the row, and every attempt's error is in Attempts).
func setStatus(it *Item, s lease.Status, state string) {
	it.Status = s.String()
	it.State = state
	if s == lease.StatusDone {
		it.LastError = ""
	}
}

// detail records a table column that is set (a nil pointer is not).
func detail[T any](it *Item, name string, v *T) {
	if v == nil {
		return
	}
	if it.Details == nil {
		it.Details = map[string]any{}
	}
	if raw, ok := any(v).(*[]byte); ok {
		it.Details[name] = json.RawMessage(*raw)
		return
	}
	it.Details[name] = *v
}

func mapRows[R any](rows []R, err error, item func(R) Item) ([]Item, error) {
	if err != nil {
		return nil, err
	}
	out := make([]Item, len(rows))
	for i, r := range rows {
		out[i] = item(r)
	}
	return out, nil
}
