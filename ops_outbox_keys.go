package workq

import (
	"context"
	"fmt"

	"github.com/workq/workq/internal/outboxrt"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/workqtype"
)

// OutboxKeys lists the partition keys of one outbox queue that have
// messages not yet done, in key order, each with its head: the message
// that holds the key's order (q.OnlyBlocked: only the keys held up by a
// failing or failed head, which retrying or deleting the head lets go
// on). It visits one key per index probe. On a sharded Client, q.Shard
// names the shard to read.
func (c *Client) OutboxKeys(ctx context.Context, q outbox.KeyQuery) (_ []outbox.KeyHead, err error) {
	defer c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	if q.Shard == "" && c.set != nil {
		return nil, workqtype.Invalid("shard", "OutboxKeys on a sharded Client: name the shard (KeyQuery.Shard)")
	}
	if q.Queue != "" {
		if err := workqtype.CheckQueue("queue", q.Queue); err != nil {
			return nil, err
		}
	}
	sc, err := c.Shard(q.Shard)
	if err != nil {
		return nil, err
	}
	keys, err := outboxrt.Keys(ctx, sc.db, outboxrt.KeyQuery{Queue: q.Queue, OnlyBlocked: q.OnlyBlocked,
		AfterKey: q.AfterKey, Limit: q.Limit, SkipTopics: q.SkipTopics})
	if err != nil {
		return nil, fmt.Errorf("workq: %w", err)
	}
	out := make([]outbox.KeyHead, len(keys))
	for i, k := range keys {
		out[i] = outbox.KeyHead{PartitionKey: k.PartitionKey, HeadID: k.HeadID, MessageID: k.MessageID, Topic: k.Topic,
			Status: k.StatusName, Attempts: k.Attempts, MaxAttempts: k.MaxAttempts, RunAt: k.RunAt, LastError: k.LastError,
			UpdatedAt: k.UpdatedAt, Blocked: k.Blocked(), Shard: sc.name}
	}
	return out, nil
}
