package kinds

import (
	"context"
	"encoding/json"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/workqtype"
)

// outbox is the kind of outbox messages: messages of a topic, relayed to
// the publishers.
var outbox = Kind{
	Table:       workqtype.TableOutbox,
	Name:        "outbox",
	Title:       "Outbox",
	Noun:        "outbox message",
	RetryWord:   "retry",
	KindLabel:   WordTopic,
	ClaimedKind: WordTopic,
	State:       lease.Status.String,
	States:      []string{"ready", "in_progress", "done", "failed", "cancelled"},
	// The message's headers hold the sending span's trace context
	// (traceparent, tracestate).
	TraceContext: func(it *lease.Item) json.RawMessage { return it.Headers },
	Filters:      []string{FilterPartitionKey, FilterMessageID},
	Page:         pageOutbox,
	PageAsc:      pageOutboxAsc,
	Get:          getOutbox,
}

func pageOutbox(ctx context.Context, q *gen.Queries, a PageArgs) ([]workqtype.Item, error) {
	rows, err := q.OutboxPage(ctx, gen.OutboxPageParams{BeforeID: a.Before, Queue: a.Queue, Status: a.Status, Kind: a.Kind,
		CreatedAfter: a.After, CreatedBefore: a.CreatedBefore, MinID: a.MinID, PartitionKey: a.PartitionKey, MessageID: a.MessageID, ErrorText: a.ErrorText, MaxRows: a.Max})
	return mapRows(rows, err, outboxItem)
}

func getOutbox(ctx context.Context, q *gen.Queries, id int64) (workqtype.Item, error) {
	r, err := q.OutboxGet(ctx, id)
	return outboxItem(r), err
}

func outboxItem(r gen.Outbox) workqtype.Item {
	it := workqtype.Item{Table: workqtype.TableOutbox, ID: r.ID, Queue: r.Queue, Kind: r.Topic, Priority: r.Priority, RunAt: r.RunAt,
		Attempts: r.Attempts, MaxAttempts: r.MaxAttempts, LeaseVersion: r.LeaseVersion, ClaimedAt: r.ClaimedAt,
		ClaimedBy: deref(r.ClaimedBy), LockedUntil: r.LockedUntil, LastError: deref(r.LastError),
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, FinishedAt: r.FinishedAt, Payload: json.RawMessage(r.Payload)}
	setStatus(&it, lease.Status(r.Status), lease.Status(r.Status).String())
	detail(&it, "message_id", &r.MessageID)
	detail(&it, "partition_key", r.PartitionKey)
	detail(&it, "correlation_id", r.CorrelationID)
	detail(&it, "join_id", r.JoinID)
	detail(&it, "key_seq", r.KeySeq)
	if len(r.Headers) > 0 && string(r.Headers) != "{}" {
		detail(&it, "headers", &r.Headers)
	}
	detail(&it, "cancel_requested_at", r.CancelRequestedAt)
	return it
}

func pageOutboxAsc(ctx context.Context, q *gen.Queries, a PageArgs) ([]workqtype.Item, error) {
	rows, err := q.OutboxPageAsc(ctx, gen.OutboxPageAscParams{AfterID: a.AfterID, Queue: a.Queue, Status: a.Status, Kind: a.Kind,
		CreatedAfter: a.After, CreatedBefore: a.CreatedBefore, MaxID: a.MaxID, PartitionKey: a.PartitionKey, MessageID: a.MessageID, ErrorText: a.ErrorText, MaxRows: a.Max})
	return mapRows(rows, err, outboxItem)
}
