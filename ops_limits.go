package workq

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/shardlist"
)

// QueueLimitInfo is one global limit W of a queue (SetQueueLimit), as
// ListQueueLimits lists it.
type QueueLimitInfo struct {
	Table Table
	Queue string
	// Shard is the database whose budget it is (the Client's own shard
	// name on a Client of one database).
	Shard     string
	W         int
	UpdatedAt time.Time // when it was last set
}

// ListQueueLimits lists every global limit W (SetQueueLimit) with when it
// was last set, sorted by table, queue and shard. ListQueues shows each
// queue's W beside its counts; this is the limits alone, read from one
// small table. On a sharded Client it reads every shard at once (each
// shard's budget is its own row); a shard that fails fails the call,
// naming it.
func (c *Client) ListQueueLimits(ctx context.Context) (_ []QueueLimitInfo, err error) {
	defer c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	answers, err := onEveryShard(ctx, c, "list queue limits", func(ctx context.Context, sh shardlist.Shard) ([]admin.LimitRow, error) {
		return admin.Limits(ctx, sh.DB)
	})
	if err != nil {
		return nil, err
	}
	var out []QueueLimitInfo
	for _, a := range answers {
		for _, l := range a.Value {
			out = append(out, QueueLimitInfo{Table: l.Table, Queue: l.Queue, Shard: a.Shard, W: l.W, UpdatedAt: l.UpdatedAt})
		}
	}
	slices.SortFunc(out, func(a, b QueueLimitInfo) int {
		if a.Table != b.Table {
			return strings.Compare(string(a.Table), string(b.Table))
		}
		if a.Queue != b.Queue {
			return strings.Compare(a.Queue, b.Queue)
		}
		return strings.Compare(a.Shard, b.Shard)
	})
	return out, nil
}
