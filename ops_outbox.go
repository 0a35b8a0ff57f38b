package workq

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/workq/workq/internal/outboxrt"
	"github.com/workq/workq/internal/shardlist"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/workqtype"
)

// OutboxKeyHead is an outbox partition key with messages not yet done, and
// its head: the first of them in write order, which the others wait
// behind. The key is blocked while its head is failing (ready again after
// a failed attempt, or in a retry attempt) or failed: retrying or deleting
// the head (Retry, Delete of its ItemRef) unblocks it.
type OutboxKeyHead struct {
	Shard        string // the shard's name (ShardName)
	PartitionKey string
	HeadID       int64 // the head's item id: ItemRef{Table: TableOutbox, ID: HeadID, Shard: Shard}
	MessageID    uuid.UUID
	Topic        string
	State        string // the head's state (StateReady, StateInProgress, StateFailed...)
	Blocked      bool   // the head is failing or failed
	Attempts     int32
	MaxAttempts  int32
	RunAt        time.Time // when the head is (or was last) due
	LastError    string
	UpdatedAt    time.Time
}

// OutboxKeysParams select the partition keys of one outbox queue.
type OutboxKeysParams struct {
	Queue string // default "default"
	// OnlyBlocked lists only the keys whose head is failing or failed.
	OnlyBlocked bool
	// SkipTopics are topics whose failed messages block nothing (the
	// relays' topics with OnFinalFailure Skip).
	SkipTopics []string
	// AfterKey pages on: keys after this one (the last key of the
	// previous page).
	AfterKey string
	// Limit is the most keys returned, 1 to MaxOutboxKeys (0: 100).
	Limit int
}

// MaxOutboxKeys is the most keys one OutboxKeys call returns.
const MaxOutboxKeys = 10000

// OutboxKeys lists the partition keys of an outbox queue that have
// messages not yet done, in key order, each with its head; with
// OnlyBlocked only the blocked ones (the dashboard's and `workq outbox
// blocked`'s list). It visits one key per index probe. On a sharded
// Client it reads every shard at once and merges their keys in key order
// (a key's messages are on the shard of its PartitionKey); a shard that
// fails fails the call, naming it (read the others with EachShard).
func (c *Client) OutboxKeys(ctx context.Context, p OutboxKeysParams) (_ []OutboxKeyHead, err error) {
	defer c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	if p.Queue == "" {
		p.Queue = "default"
	}
	if err := workqtype.CheckQueue("queue", p.Queue); err != nil {
		return nil, err
	}
	if p.Limit == 0 {
		p.Limit = 100
	}
	if p.Limit < 1 || p.Limit > MaxOutboxKeys {
		return nil, workqtype.Invalid("limit", fmt.Sprintf("limit %d: want 1 to %d", p.Limit, MaxOutboxKeys))
	}
	answers, err := onEveryShard(ctx, c, "outbox keys of "+p.Queue, func(ctx context.Context, sh shardlist.Shard) ([]outboxrt.KeyHead, error) {
		return outboxrt.Keys(ctx, sh.DB, outboxrt.KeyQuery{Queue: p.Queue, OnlyBlocked: p.OnlyBlocked, SkipTopics: p.SkipTopics,
			AfterKey: p.AfterKey, Limit: p.Limit})
	})
	if err != nil {
		return nil, err
	}
	var out []OutboxKeyHead
	for _, a := range answers {
		for _, k := range a.Value {
			out = append(out, OutboxKeyHead{Shard: a.Shard, PartitionKey: k.PartitionKey, HeadID: k.HeadID, MessageID: k.MessageID,
				Topic: k.Topic, State: k.StatusName, Blocked: k.Blocked(), Attempts: k.Attempts, MaxAttempts: k.MaxAttempts,
				RunAt: k.RunAt, LastError: k.LastError, UpdatedAt: k.UpdatedAt})
		}
	}
	slices.SortStableFunc(out, func(a, b OutboxKeyHead) int { return strings.Compare(a.PartitionKey, b.PartitionKey) })
	if len(out) > p.Limit {
		out = out[:p.Limit]
	}
	return out, nil
}

// ListJoinsParams select a page of fan-in joins (ListJoins).
type ListJoinsParams struct {
	OnlyOpen bool  // only the joins still waiting for members
	Before   int64 // joins with smaller ids: the last id of the previous page (0: from the newest)
	Limit    int   // 1 to 1000 (0: 50)
}

// ListJoins lists fan-in joins newest first, with their counts
// (Join.Completed and Join.Failed of Join.Expected are the progress),
// walking the primary key down from p.Before. A join lives on one
// database: on a sharded Client list a shard's
// (client.Shard(name).ListJoins).
func (c *Client) ListJoins(ctx context.Context, p ListJoinsParams) (_ []outbox.Join, err error) {
	defer c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	if c.set != nil {
		return nil, c.errShardID("ListJoins")
	}
	return outboxrt.ListJoins(ctx, c.db, outboxrt.JoinQuery{OnlyOpen: p.OnlyOpen, Before: p.Before, Limit: p.Limit})
}
