package lease

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/workq/workq/internal/db/gen"
)

// The per-table claim adapters: each runs its table's claim statement
// (db/queries/<table>.sql) and maps the rows to Items. Everything else about
// a lease is shared (lease.sql).

// newItem fills the fields every table's claim returns.
func newItem(a claimArgs, id int64, attempts, maxAttempts int32, leaseVersion int64,
	lockedUntil *time.Time, payload []byte, priority int16, runAt, createdAt time.Time) Item {
	return Item{Table: a.table, ID: id, Queue: a.queue, Attempt: attempts, MaxAttempts: maxAttempts,
		LeaseVersion: leaseVersion, RunID: runID(a.code, id, leaseVersion), OwnerToken: a.token,
		LockedUntil: deref(lockedUntil), Payload: payload, Priority: priority, RunAt: runAt, CreatedAt: createdAt}
}

func claimJobRuns(ctx context.Context, q *gen.Queries, a claimArgs) ([]Item, error) {
	params := gen.JobRunsClaimParams{OwnerToken: a.token, LeaseMs: a.leaseMs, WorkerID: a.workerID, Queue: a.queue, MaxRows: a.max}
	if a.resume != nil {
		params.ResumePriority, params.ResumeRunAt = &a.resume.Priority, &a.resume.RunAt
	}
	buf := claimRows.Get().(*[]gen.JobRunsClaimRow)
	rows, err := q.JobRunsClaimAppend(ctx, params, (*buf)[:0])
	items := a.into[:0]
	if cap(items) < len(rows) {
		items = make([]Item, len(rows))
	}
	items = items[:len(rows)]
	for i, r := range rows {
		it := newItem(a, r.ID, r.Attempts, r.MaxAttempts, r.LeaseVersion, r.LockedUntil, r.Payload, r.Priority, r.RunAt, r.CreatedAt)
		it.Kind, it.Metadata, it.LimitKey = r.Kind, r.Metadata, deref(r.LimitKey)
		items[i] = it
	}
	clear(rows) // the kept slice holds no row's strings and bytes
	*buf = rows[:0]
	claimRows.Put(buf)
	if err != nil {
		return nil, err
	}
	return items, nil
}

// claimRows holds the row slices of ended job-run claims for later ones:
// a claim of 1,000 rows would otherwise grow a new slice of them by
// appending (gen.JobRunsClaimAppend).
var claimRows = sync.Pool{New: func() any { return new([]gen.JobRunsClaimRow) }}

func claimJobRunsIDs(ctx context.Context, q *gen.Queries, a claimArgs, ids []int64) ([]Item, error) {
	rows, err := q.JobRunsClaimIDs(ctx, gen.JobRunsClaimIDsParams{OwnerToken: a.token, LeaseMs: a.leaseMs, WorkerID: a.workerID, Ids: ids, ClaimedAt: a.at})
	items := make([]Item, len(rows))
	for i, r := range rows {
		it := newItem(a, r.ID, r.Attempts, r.MaxAttempts, r.LeaseVersion, r.LockedUntil, r.Payload, r.Priority, r.RunAt, r.CreatedAt)
		it.Kind, it.Metadata, it.LimitKey = r.Kind, r.Metadata, deref(r.LimitKey)
		items[i] = it
	}
	return items, err
}

func claimInboxIDs(ctx context.Context, q *gen.Queries, a claimArgs, ids []int64) ([]Item, error) {
	rows, err := q.InboxClaimIDs(ctx, gen.InboxClaimIDsParams{OwnerToken: a.token, LeaseMs: a.leaseMs, WorkerID: a.workerID, Ids: ids, ClaimedAt: a.at})
	items := make([]Item, len(rows))
	for i, r := range rows {
		it := newItem(a, r.ID, r.Attempts, r.MaxAttempts, r.LeaseVersion, r.LockedUntil, r.Payload, r.Priority, r.RunAt, r.CreatedAt)
		it.Kind, it.Topic, it.MessageID = r.Source, deref(r.Topic), r.MessageID
		items[i] = it
	}
	return items, err
}

func claimTimersIDs(ctx context.Context, q *gen.Queries, a claimArgs, ids []int64) ([]Item, error) {
	rows, err := q.TimersClaimIDs(ctx, gen.TimersClaimIDsParams{OwnerToken: a.token, LeaseMs: a.leaseMs, WorkerID: a.workerID, Ids: ids, ClaimedAt: a.at})
	items := make([]Item, len(rows))
	for i, r := range rows {
		it := newItem(a, r.ID, r.Attempts, r.MaxAttempts, r.LeaseVersion, r.LockedUntil, r.Payload, r.Priority, r.RunAt, r.CreatedAt)
		it.Kind, it.Topic, it.DueTime = r.Topic, r.Topic, r.DueTime
		items[i] = it
	}
	return items, err
}

func claimOutbox(ctx context.Context, q *gen.Queries, a claimArgs) ([]Item, error) {
	rows, err := q.OutboxClaim(ctx, gen.OutboxClaimParams{OwnerToken: a.token, LeaseMs: a.leaseMs, WorkerID: a.workerID, Queue: a.queue, MaxRows: a.max,
		AfterKey: a.opts.AfterKey, SkipTopics: a.opts.SkipTopics, PassKeys: a.opts.PassKeys, Wake: a.opts.Wake, FlowGrant: a.grant})
	items := make([]Item, len(rows))
	for i, r := range rows {
		it := newItem(a, r.ID, r.Attempts, r.MaxAttempts, r.LeaseVersion, r.LockedUntil, r.Payload, r.Priority, r.RunAt, r.CreatedAt)
		it.Kind, it.Topic, it.Headers, it.PartitionKey = r.Topic, r.Topic, r.Headers, deref(r.PartitionKey)
		it.MessageID, it.CorrelationID = r.MessageID.String(), deref(r.CorrelationID)
		items[i] = it
	}
	return items, err
}

func claimInbox(ctx context.Context, q *gen.Queries, a claimArgs) ([]Item, error) {
	params := gen.InboxClaimParams{OwnerToken: a.token, LeaseMs: a.leaseMs, WorkerID: a.workerID, Queue: a.queue, MaxRows: a.max}
	if a.resume != nil {
		params.ResumeRunAt = &a.resume.RunAt
	}
	rows, err := q.InboxClaim(ctx, params)
	items := make([]Item, len(rows))
	for i, r := range rows {
		it := newItem(a, r.ID, r.Attempts, r.MaxAttempts, r.LeaseVersion, r.LockedUntil, r.Payload, r.Priority, r.RunAt, r.CreatedAt)
		it.Kind, it.Topic, it.MessageID = r.Source, deref(r.Topic), r.MessageID
		items[i] = it
	}
	return items, err
}

func claimTimers(ctx context.Context, q *gen.Queries, a claimArgs) ([]Item, error) {
	params := gen.TimersClaimParams{OwnerToken: a.token, LeaseMs: a.leaseMs, WorkerID: a.workerID, Queue: a.queue, MaxRows: a.max}
	if a.resume != nil {
		params.ResumeRunAt = &a.resume.RunAt
	}
	rows, err := q.TimersClaim(ctx, params)
	items := make([]Item, len(rows))
	for i, r := range rows {
		it := newItem(a, r.ID, r.Attempts, r.MaxAttempts, r.LeaseVersion, r.LockedUntil, r.Payload, r.Priority, r.RunAt, r.CreatedAt)
		it.Kind, it.Topic, it.DueTime = r.Topic, r.Topic, r.DueTime
		items[i] = it
	}
	return items, err
}

// deleteFinishedOutbox is the outbox's retention (OutboxDeleteFinished): the
// shared statement's, but failed messages with a partition key stay. Once a
// call finds fewer finished messages than max, it also deletes up to max
// partition-key counters unused for as long whose key has nothing pending
// (OutboxPruneKeySeqs), so that the counter table does not keep every key
// ever written. It returns both counts' sum.
func deleteFinishedOutbox(ctx context.Context, q *gen.Queries, olderThanMs int64, max int32) (int64, error) {
	n, err := q.OutboxDeleteFinished(ctx, olderThanMs, max)
	if err != nil || n >= int64(max) {
		return n, err
	}
	pruned, err := q.OutboxPruneKeySeqs(ctx, olderThanMs, max)
	if err != nil {
		return n, fmt.Errorf("prune partition-key counters: %w", err)
	}
	return n + pruned, nil
}

// depthOutbox is the outbox's queue depth (OutboxQueueDepth): its ready
// rows are in two partial indexes, unkeyed and keyed.
func depthOutbox(ctx context.Context, q *gen.Queries) ([]gen.LeaseQueueDepthRow, error) {
	rows, err := q.OutboxQueueDepth(ctx)
	out := make([]gen.LeaseQueueDepthRow, len(rows))
	for i, r := range rows {
		out[i] = gen.LeaseQueueDepthRow(r)
	}
	return out, err
}
