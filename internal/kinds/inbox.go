package kinds

import (
	"context"
	"encoding/hex"
	"encoding/json"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/inboxrt"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/workqtype"
)

// inbox is the kind of inbox messages: messages received from a source,
// de-duplicated by their message id, processed by a topic's handler.
var inbox = Kind{
	Table:       workqtype.TableInbox,
	Name:        "inbox",
	Title:       "Inbox",
	Noun:        "inbox message",
	RetryWord:   "revive",
	KindLabel:   WordTopic,
	ClaimedKind: WordSource,
	// Finished messages stay for the de-duplication window (the
	// inbox-window task deletes them), not for the retention.
	OwnRetention: true,
	State:        inboxrt.StatusName,
	States:       []string{"ready", "processing", "processed", "dead", "cancelled"},
	Filters:      []string{FilterSource},
	Page:         pageInbox,
	PageAsc:      pageInboxAsc,
	Get:          getInbox,
}

func pageInbox(ctx context.Context, q *gen.Queries, a PageArgs) ([]workqtype.Item, error) {
	rows, err := q.InboxPage(ctx, gen.InboxPageParams{BeforeID: a.Before, Queue: a.Queue, Status: a.Status, Kind: a.Kind,
		CreatedAfter: a.After, CreatedBefore: a.CreatedBefore, MinID: a.MinID, Source: a.Source, ErrorText: a.ErrorText, MaxRows: a.Max})
	return mapRows(rows, err, inboxItem)
}

func getInbox(ctx context.Context, q *gen.Queries, id int64) (workqtype.Item, error) {
	r, err := q.InboxGet(ctx, id)
	return inboxItem(r), err
}

func inboxItem(r gen.Inbox) workqtype.Item {
	it := workqtype.Item{Table: workqtype.TableInbox, ID: r.ID, Queue: r.Queue, Kind: deref(r.Topic), Priority: r.Priority, RunAt: r.RunAt,
		Attempts: r.Attempts, MaxAttempts: r.MaxAttempts, LeaseVersion: r.LeaseVersion, ClaimedAt: r.ClaimedAt,
		ClaimedBy: deref(r.ClaimedBy), LockedUntil: r.LockedUntil, LastError: deref(r.LastError),
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, FinishedAt: r.FinishedAt, Payload: json.RawMessage(r.Payload)}
	setStatus(&it, lease.Status(r.Status), inboxrt.StatusName(lease.Status(r.Status)))
	detail(&it, "source", &r.Source)
	detail(&it, "message_id", &r.MessageID)
	detail(&it, "first_seen_at", &r.FirstSeenAt)
	if len(r.PayloadHash) > 0 {
		detail(&it, "payload_hash", ptr(hex.EncodeToString(r.PayloadHash)))
	}
	detail(&it, "cancel_requested_at", r.CancelRequestedAt)
	return it
}

func pageInboxAsc(ctx context.Context, q *gen.Queries, a PageArgs) ([]workqtype.Item, error) {
	rows, err := q.InboxPageAsc(ctx, gen.InboxPageAscParams{AfterID: a.AfterID, Queue: a.Queue, Status: a.Status, Kind: a.Kind,
		CreatedAfter: a.After, CreatedBefore: a.CreatedBefore, MaxID: a.MaxID, Source: a.Source, ErrorText: a.ErrorText, MaxRows: a.Max})
	return mapRows(rows, err, inboxItem)
}
