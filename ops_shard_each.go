package workq

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/shardlist"
)

// EachShard runs f on the Client of every shard at once (a Client of one
// database: on itself), each call bounded by timeout (0: only ctx bounds
// it), waits for all of them, and returns the error f returned on each
// shard where it failed, by shard name (nil when none failed). It is how
// an operator's view shows the shards that answer when one does not (the
// dashboard's counts, pauses and schedules), where the Client's methods
// on every shard fail as a whole: f calls the shard Client's methods
// (ListQueues, PauseQueue, ListSchedules...) and keeps what it needs.
// Calls of f on different shards run concurrently.
func (c *Client) EachShard(ctx context.Context, timeout time.Duration, f func(ctx context.Context, shard *Client) error) map[string]error {
	if err := checkCtx(ctx); err != nil {
		return map[string]error{c.name: err}
	}
	shards, _ := c.shardsOf("")
	answers := shardlist.Each(ctx, shards, timeout, func(ctx context.Context, sh shardlist.Shard) (struct{}, error) {
		sc, err := c.Shard(sh.Name)
		if err != nil {
			return struct{}{}, err
		}
		return struct{}{}, f(ctx, sc)
	})
	var failed map[string]error
	for _, a := range answers {
		if a.Err != nil {
			if failed == nil {
				failed = map[string]error{}
			}
			failed[a.Shard] = a.Err
		}
	}
	return failed
}

// QueueControl is what operators set on one queue of one shard: its
// pause and its limit W.
type QueueControl struct {
	Table Table
	Queue string
	Shard string // the shard's name (ShardName; "default" for NewClient)
	// Paused is true when the queue is paused on this shard, since
	// PausedAt, by PausedBy (the actor) for PauseReason.
	Paused      bool
	PausedAt    *time.Time
	PausedBy    string
	PauseReason string
	Limit       *int // W (nil: none)
}

// QueueControls lists the queues that are paused or have a limit, one row
// per shard and queue, sorted by table, queue and shard. Unlike ListQueues
// it counts nothing: it reads the small tables of pauses and limits, cheap
// enough for a page polled every few seconds. A shard that fails fails the
// call, naming it (read the others with EachShard).
func (c *Client) QueueControls(ctx context.Context) (_ []QueueControl, err error) {
	defer c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	answers, err := onEveryShard(ctx, c, "queue controls", func(ctx context.Context, sh shardlist.Shard) ([]QueueControl, error) {
		paused, err := lease.Paused(ctx, sh.DB)
		if err != nil {
			return nil, err
		}
		limits, err := gen.New(sh.DB).QueueLimitsList(ctx)
		if err != nil {
			return nil, fmt.Errorf("list limits: %w", err)
		}
		rows := map[[2]string]*QueueControl{}
		row := func(t Table, q string) *QueueControl {
			k := [2]string{string(t), q}
			if rows[k] == nil {
				rows[k] = &QueueControl{Table: t, Queue: q, Shard: sh.Name}
			}
			return rows[k]
		}
		for _, p := range paused {
			r := row(p.Table, p.Queue)
			at := p.PausedAt
			r.Paused, r.PausedAt, r.PausedBy, r.PauseReason = true, &at, p.PausedBy, p.Reason
		}
		for _, l := range limits {
			w := int(l.MaxInProgress)
			row(Table(l.WorkTable), l.Queue).Limit = &w
		}
		out := make([]QueueControl, 0, len(rows))
		for _, r := range rows {
			out = append(out, *r)
		}
		return out, nil
	})
	if err != nil {
		return nil, err
	}
	var out []QueueControl
	for _, a := range answers {
		out = append(out, a.Value...)
	}
	slices.SortFunc(out, func(a, b QueueControl) int {
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
