package workq_test

import (
	"context"
	"testing"
	"time"

	"github.com/workq/workq"
)

// TestListQueueLimits: every limit W set is listed with its shard and when
// it was set; a removed one is not; on a sharded Client each shard's
// budget is its own row.
func TestListQueueLimits(t *testing.T) {
	ctx := context.Background()
	for name, c := range opsClients(t) {
		t.Run(name, func(t *testing.T) {
			before := time.Now().Add(-time.Minute)
			shard := ""
			if len(c.Shards()) > 1 {
				shard = c.Shards()[1]
			}
			q := workq.QueueRef{Table: workq.TableOutbox, Queue: "limited", Shard: shard}
			if err := c.SetQueueLimit(ctx, q, 7); err != nil {
				t.Fatal(err)
			}
			gone := workq.QueueRef{Table: workq.TableJobRuns, Queue: "unlimited", Shard: shard}
			if err := c.SetQueueLimit(ctx, gone, 1); err != nil {
				t.Fatal(err)
			}
			if err := c.RemoveQueueLimit(ctx, gone); err != nil {
				t.Fatal(err)
			}
			got, err := c.ListQueueLimits(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var found []workq.QueueLimitInfo
			for _, l := range got {
				if l.Queue == "limited" || l.Queue == "unlimited" {
					found = append(found, l)
				}
			}
			wantShard := shard
			if wantShard == "" {
				wantShard = c.ShardName()
			}
			if len(found) != 1 || found[0].Table != workq.TableOutbox || found[0].W != 7 || found[0].Shard != wantShard ||
				found[0].UpdatedAt.Before(before) {
				t.Fatalf("ListQueueLimits = %+v, want outbox/limited W 7 on %q", found, wantShard)
			}
			if err := c.RemoveQueueLimit(ctx, q); err != nil {
				t.Fatal(err)
			}
		})
	}
}
