package outboxrt

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/workqtype"
)

// KeyHead is a partition key with messages not yet done, and its head: the
// first of them in write order, the only one of the key that can run.
type KeyHead struct {
	PartitionKey string       `json:"partition_key"`
	HeadID       int64        `json:"head_id"`
	MessageID    uuid.UUID    `json:"message_id"`
	Topic        string       `json:"topic"`
	Status       lease.Status `json:"-"`
	StatusName   string       `json:"status"`
	Attempts     int32        `json:"attempts"`
	MaxAttempts  int32        `json:"max_attempts"`
	RunAt        time.Time    `json:"run_at"`
	LastError    string       `json:"last_error,omitempty"`
	UpdatedAt    time.Time    `json:"updated_at"`
}

// Blocked reports whether the head is failing (waiting for a retry, or in a
// retry attempt) or failed: its key is held up by it.
func (k KeyHead) Blocked() bool {
	switch k.Status {
	case lease.StatusFailed:
		return true
	case lease.StatusReady:
		return k.Attempts > 0
	case lease.StatusInProgress:
		return k.Attempts > 1
	}
	return false
}

// KeyQuery selects partition keys of a queue.
type KeyQuery struct {
	Queue       string   // default "default"
	OnlyBlocked bool     // only keys whose head is failing or failed (KeyHead.Blocked)
	AfterKey    string   // keyset pagination: keys after this one
	Limit       int      // at most this many (0: 100)
	SkipTopics  []string // topics whose failed messages do not block (the relays' Skip topics)
}

// Keys lists partition keys that have messages not yet done, in key order,
// each with its head. It visits one key per index probe.
func Keys(ctx context.Context, db workqtype.DB, q KeyQuery) ([]KeyHead, error) {
	if q.Queue == "" {
		q.Queue = "default"
	}
	if q.Limit == 0 {
		q.Limit = 100
	}
	if q.Limit < 0 {
		return nil, fmt.Errorf("%w: limit %d is negative", workqtype.ErrInvalid, q.Limit)
	}
	rows, err := gen.New(db).OutboxKeyHeads(ctx, gen.OutboxKeyHeadsParams{
		Queue: q.Queue, SkipTopics: q.SkipTopics, OnlyBlocked: q.OnlyBlocked, MaxRows: int32(min(q.Limit, math.MaxInt32)), AfterKey: q.AfterKey,
	})
	if err != nil {
		return nil, fmt.Errorf("outbox keys of %s: %w", q.Queue, err)
	}
	out := make([]KeyHead, len(rows))
	for i, r := range rows {
		out[i] = KeyHead{PartitionKey: r.PartitionKey, HeadID: r.ID, MessageID: r.MessageID, Topic: r.Topic,
			Status: lease.Status(r.Status), StatusName: lease.Status(r.Status).String(), Attempts: r.Attempts,
			MaxAttempts: r.MaxAttempts, RunAt: r.RunAt, UpdatedAt: r.UpdatedAt}
		if r.LastError != nil {
			out[i].LastError = *r.LastError
		}
	}
	return out, nil
}

// KeyStats counts a queue's partition keys with messages not yet done, by
// the state of their head.
type KeyStats struct {
	Queue    string `json:"queue"`
	Keys     int    `json:"keys"`      // keys with messages not done
	Ready    int    `json:"ready"`     // head ready (first attempt pending, or due soon)
	InFlight int    `json:"in_flight"` // head being delivered
	Retrying int    `json:"retrying"`  // head failed at least once and will be retried: blocked for now
	Failed   int    `json:"failed"`    // head failed for good: blocked until retried (OnFinalFailure Block)
}

// Blocked is the number of keys held up by a failing or failed head.
func (s KeyStats) Blocked() int { return s.Retrying + s.Failed }

// Stats counts the partition keys of queue (default "default") by the state
// of their head. It walks every key with messages not done (one index probe
// each): for monitoring, not for a hot path.
func Stats(ctx context.Context, db workqtype.DB, queue string, skipTopics []string) (KeyStats, error) {
	if queue == "" {
		queue = "default"
	}
	st := KeyStats{Queue: queue}
	after := ""
	for {
		page, err := Keys(ctx, db, KeyQuery{Queue: queue, AfterKey: after, Limit: 10000, SkipTopics: skipTopics})
		if err != nil {
			return st, err
		}
		for _, k := range page {
			st.Keys++
			switch {
			case k.Status == lease.StatusFailed:
				st.Failed++
			case k.Blocked():
				st.Retrying++
			case k.Status == lease.StatusInProgress:
				st.InFlight++
			default:
				st.Ready++
			}
		}
		if len(page) < 10000 {
			return st, nil
		}
		after = page[len(page)-1].PartitionKey
	}
}
