package workq

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/shardlist"
	"github.com/workq/workq/workqtype"
)

// QueueRef names a queue: its name, the table whose queue it is ("":
// the queue of that name on every table, where PauseQueue and
// ResumeQueue take it), and on a sharded Client one shard ("": every
// shard).
type QueueRef struct {
	Table Table
	Queue string
	Shard string
}

// String is "table/queue" ("*/queue" for every table), or
// "shard:table/queue".
func (q QueueRef) String() string {
	t := string(q.Table)
	if t == "" {
		t = "*"
	}
	if q.Shard == "" {
		return t + "/" + q.Queue
	}
	return q.Shard + ":" + t + "/" + q.Queue
}

// check validates q; needTable refuses every table.
func (q QueueRef) check(needTable bool) error {
	switch {
	case q.Table == "" && needTable:
		return workqtype.Invalid("table", "name the queue's table (TableJobRuns, TableOutbox, TableInbox or TableTimers)")
	case q.Table != "" && !slices.Contains(Tables(), q.Table):
		return workqtype.Invalid("table", fmt.Sprintf("table %q is not one of %s", q.Table, tableNames()))
	}
	return workqtype.CheckQueue("queue", q.Queue)
}

// tables are the tables q names.
func (q QueueRef) tables() []Table {
	if q.Table == "" {
		return Tables()
	}
	return []Table{q.Table}
}

// PauseQueue stops every worker of every process from claiming items of
// the queue (of q.Table, or of every table) until ResumeQueue; items in
// flight finish. It reports whether it paused anything that was running;
// pausing a paused queue changes nothing (the first pause's time, actor
// and reason stay). The actor and reason of opts are recorded with the
// pause (ListQueues shows them). On a sharded Client it pauses the queue
// on every shard (or q.Shard's); a shard that fails is named in the error,
// and the others stay paused (pausing again is safe).
func (c *Client) PauseQueue(ctx context.Context, q QueueRef, opts *ActionOpts) (changed bool, err error) {
	by := actor(opts)
	if err := lease.CheckPauser(by.Name, by.Reason); err != nil {
		return false, fmt.Errorf("workq: pause %s: %w", q, err)
	}
	return c.onQueue(ctx, q, "pause", func(ctx context.Context, db DB, t Table) (bool, error) {
		return lease.Pause(ctx, db, t, q.Queue, by.Name, by.Reason)
	})
}

// ResumeQueue lets workers claim from the queue (of q.Table, or of every
// table) again, and reports whether it was paused. Workers pick it up at
// their next claim.
func (c *Client) ResumeQueue(ctx context.Context, q QueueRef) (changed bool, err error) {
	return c.onQueue(ctx, q, "resume", func(ctx context.Context, db DB, t Table) (bool, error) {
		return lease.Resume(ctx, db, t, q.Queue)
	})
}

// onQueue runs f on q's tables on each of q's shards, and reports whether
// any changed.
func (c *Client) onQueue(ctx context.Context, q QueueRef, verb string, f func(ctx context.Context, db DB, t Table) (bool, error)) (_ bool, err error) {
	defer c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return false, err
	}
	if err := q.check(false); err != nil {
		return false, err
	}
	shards, err := c.shardsOf(q.Shard)
	if err != nil {
		return false, err
	}
	answers := shardlist.Each(ctx, shards, 0, func(ctx context.Context, sh shardlist.Shard) (bool, error) {
		changed := false
		for _, t := range q.tables() {
			ch, err := f(ctx, sh.DB, t)
			if err != nil {
				return changed, err
			}
			changed = changed || ch
		}
		return changed, nil
	})
	changed := false
	for _, a := range answers {
		changed = changed || a.Value
	}
	return changed, unavailable(verb+" "+q.String(), answers)
}

// SetQueueLimit sets the global limit W of the queue q (its table
// required): at most w of its items in progress at once across every
// worker of every process, 0 to math.MaxInt32 (0 claims nothing). On a
// sharded Client it is one shard's budget and q.Shard is required: a
// limit over every shard is Config.Sharding.GlobalLimits, whose leader
// overwrites the budgets.
func (c *Client) SetQueueLimit(ctx context.Context, q QueueRef, w int) (err error) {
	defer c.notMigrated(&err)
	if w < 0 {
		return workqtype.Invalid("limit", fmt.Sprintf("W %d is negative: RemoveQueueLimit removes a limit", w))
	}
	sc, err := c.queueShard(ctx, q, "SetQueueLimit")
	if err != nil {
		return err
	}
	if err := lease.SetLimit(ctx, sc.db, q.Table, q.Queue, w); err != nil {
		return fmt.Errorf("workq: %w", err)
	}
	return nil
}

// RemoveQueueLimit removes the global limit W of the queue q (SetQueueLimit),
// if it has one.
func (c *Client) RemoveQueueLimit(ctx context.Context, q QueueRef) (err error) {
	defer c.notMigrated(&err)
	sc, err := c.queueShard(ctx, q, "RemoveQueueLimit")
	if err != nil {
		return err
	}
	if err := lease.SetLimit(ctx, sc.db, q.Table, q.Queue, -1); err != nil {
		return fmt.Errorf("workq: %w", err)
	}
	return nil
}

// QueueLimit reads the global limit W of the queue q (SetQueueLimit); ok
// is false when it has none.
func (c *Client) QueueLimit(ctx context.Context, q QueueRef) (w int, ok bool, err error) {
	defer c.notMigrated(&err)
	sc, err := c.queueShard(ctx, q, "QueueLimit")
	if err != nil {
		return 0, false, err
	}
	return admin.Limit(ctx, sc.db, q.Table, q.Queue)
}

// queueShard checks a limit's q and returns the Client of its shard.
func (c *Client) queueShard(ctx context.Context, q QueueRef, what string) (*Client, error) {
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	if err := q.check(true); err != nil {
		return nil, err
	}
	if q.Shard == "" && c.set != nil {
		return nil, workqtype.Invalid("shard", fmt.Sprintf("%s on a sharded Client: a limit is one shard's budget; "+
			"name the shard (QueueRef.Shard), or set a limit over every shard with Config.Sharding.GlobalLimits", what))
	}
	return c.Shard(q.Shard)
}

// QueueInfo is one queue of one table: its items counted by state, how
// long its oldest due item has waited, its pause and its limit W, and its
// claim and completion rates over the last minute. On a sharded Client it
// is the sum over the shards, with each shard's row in Shards.
type QueueInfo struct {
	Table      Table
	Queue      string
	Shard      string // the shard of a row of Shards; "" on a sum
	Ready      int64  // ready and due
	Scheduled  int64  // ready, due later
	InProgress int64  // including Expired
	Expired    int64  // in progress with an expired lease, not yet reaped
	Done       int64
	Failed     int64
	Cancelled  int64
	Pending    int64 // a workflow's tasks waiting for their dependencies
	// OldestReadyAge is how long the oldest due ready item has waited (0:
	// none waits); the largest over the shards.
	OldestReadyAge time.Duration
	// ClaimsPerSecond and CompletionsPerSecond are averages over the last
	// minute.
	ClaimsPerSecond, CompletionsPerSecond float64
	// Paused is true when the queue is paused (on a sharded Client: on
	// every shard; PausedShards lists where it is).
	Paused       bool
	PausedAt     *time.Time
	PausedBy     string
	PauseReason  string
	PausedShards []string
	// Limit is W (nil: none; on a sum: nil, each shard's budget is in its
	// row).
	Limit  *int
	Shards []QueueInfo // a sharded Client's: each shard's row
}

// ListQueues lists every queue of every table that has items, a pause or
// a limit, sorted by table and queue, with its counts by state. It counts
// every table in full (one statement per table) and reads one minute of
// the run archive: an operator's call, not one for every metrics scrape.
// On a sharded Client it reads every shard at once and sums them; a shard
// that fails fails the call, naming it.
func (c *Client) ListQueues(ctx context.Context) (_ []QueueInfo, err error) {
	defer c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	answers, err := onEveryShard(ctx, c, "list queues", func(ctx context.Context, sh shardlist.Shard) ([]admin.Queue, error) {
		return admin.Queues(ctx, sh.DB)
	})
	if err != nil {
		return nil, err
	}
	if c.set == nil {
		out := make([]QueueInfo, len(answers[0].Value))
		for i, q := range answers[0].Value {
			out[i] = queueInfo(q, "")
		}
		return out, nil
	}
	type key struct {
		t Table
		q string
	}
	type sum struct {
		total        admin.Queue // the counts over the shards (admin.Queue.Add)
		rows         []QueueInfo
		pausedShards []string
	}
	sums := map[key]*sum{}
	var order []key
	for _, a := range answers {
		for _, q := range a.Value {
			k := key{q.Table, q.Queue}
			s := sums[k]
			if s == nil {
				s = &sum{total: admin.Queue{Table: q.Table, Queue: q.Queue}}
				sums[k] = s
				order = append(order, k)
			}
			s.total.Add(q)
			if q.Paused {
				s.pausedShards = append(s.pausedShards, a.Shard)
			}
			s.rows = append(s.rows, queueInfo(q, a.Shard))
		}
	}
	out := make([]QueueInfo, 0, len(order))
	for _, k := range order {
		s := sums[k]
		info := queueInfo(s.total, "")
		info.Shards, info.PausedShards = s.rows, s.pausedShards
		info.Paused = len(s.pausedShards) == len(answers)
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b QueueInfo) int {
		if a.Table != b.Table {
			return strings.Compare(string(a.Table), string(b.Table))
		}
		return strings.Compare(a.Queue, b.Queue)
	})
	return out, nil
}

// queueInfo is the QueueInfo of one shard's row.
func queueInfo(q admin.Queue, shard string) QueueInfo {
	out := QueueInfo{Table: q.Table, Queue: q.Queue, Shard: shard, Ready: q.Ready, Scheduled: q.Scheduled,
		InProgress: q.InProgress, Expired: q.Expired, Done: q.Done, Failed: q.Failed, Cancelled: q.Cancelled, Pending: q.Pending,
		OldestReadyAge: time.Duration(q.OldestReadyAge), ClaimsPerSecond: q.ClaimsPerSecond,
		CompletionsPerSecond: q.CompletionsPerSecond, Paused: q.Paused, PausedAt: q.PausedAt, PausedBy: q.PausedBy,
		PauseReason: q.PauseReason}
	if q.Limit != nil {
		w := int(*q.Limit)
		out.Limit = &w
	}
	return out
}
