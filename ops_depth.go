package workq

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/shardlist"
	"github.com/workq/workq/workqtype"
)

// QueueDepth is the backlog of one queue of one table on one shard.
type QueueDepth struct {
	Table      Table
	Queue      string
	Shard      string // the shard's name (ShardName)
	Ready      int64  // ready and due
	Scheduled  int64  // ready, due later
	InProgress int64
	Failed     int64
	// OldestReadyAge is how long the oldest due ready item has waited (0:
	// none waits).
	OldestReadyAge time.Duration
}

// QueueDepths reads the backlog of every queue that has ready, in-progress
// or failed items, one row per shard and queue, sorted by table, queue and
// shard. It reads the partial indexes of those states, so its cost is the
// backlog, not the size of the tables (ListQueues counts every row, done
// and cancelled too): cheap enough to sample every few seconds, as the
// dashboard's history does. A shard that fails fails the call, naming it
// (read the others with EachShard).
func (c *Client) QueueDepths(ctx context.Context) (_ []QueueDepth, err error) {
	defer c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	answers, err := onEveryShard(ctx, c, "queue depths", func(ctx context.Context, sh shardlist.Shard) ([]admin.Depth, error) {
		return admin.Depths(ctx, sh.DB)
	})
	if err != nil {
		return nil, err
	}
	var out []QueueDepth
	for _, a := range answers {
		for _, d := range a.Value {
			out = append(out, QueueDepth{Table: d.Table, Queue: d.Queue, Shard: a.Shard, Ready: d.Ready, Scheduled: d.Scheduled,
				InProgress: d.InProgress, Failed: d.Failed, OldestReadyAge: d.OldestDue})
		}
	}
	slices.SortStableFunc(out, func(a, b QueueDepth) int {
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

// EndedCount is how many attempts of one queue ended with one outcome
// (done, retry, failed, expired, snoozed, released).
type EndedCount struct {
	Table   Table
	Queue   string
	Outcome string
	Count   int64
}

// EndedBetween counts the attempts that ended in (after, until] by the
// database's clock (DatabaseTime), by queue and outcome, from the run
// archive's index of finish times; operators' retries and cancels are not
// attempts. Reading consecutive intervals reads each archived attempt
// once. Each database has its own clock: on a sharded Client ask a shard
// (client.Shard(name).EndedBetween).
func (c *Client) EndedBetween(ctx context.Context, after, until time.Time) (_ []EndedCount, err error) {
	defer c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	if c.set != nil {
		return nil, c.errShardClock("EndedBetween")
	}
	if until.Before(after) {
		return nil, workqtype.Invalid("until", fmt.Sprintf("until %s is before after %s", until.Format(time.RFC3339Nano), after.Format(time.RFC3339Nano)))
	}
	ended, err := admin.EndedBetween(ctx, c.db, after, until)
	if err != nil {
		return nil, err
	}
	out := make([]EndedCount, len(ended))
	for i, e := range ended {
		out[i] = EndedCount{Table: e.Table, Queue: e.Queue, Outcome: e.Outcome, Count: e.Count}
	}
	return out, nil
}

// DatabaseTime is the database's clock (its now()): the clock of the
// run archive's finish times (EndedBetween) and of items' due times. On
// a sharded Client ask a shard (client.Shard(name).DatabaseTime).
func (c *Client) DatabaseTime(ctx context.Context) (_ time.Time, err error) {
	defer c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return time.Time{}, err
	}
	if c.set != nil {
		return time.Time{}, c.errShardClock("DatabaseTime")
	}
	return admin.Clock(ctx, c.db)
}

// errShardClock refuses a read of one database's clock on a sharded
// Client.
func (c *Client) errShardClock(what string) error {
	return workqtype.Invalid("shard", fmt.Sprintf("%s on a sharded Client: each database has its own clock; use client.Shard(name).%s", what, what))
}
