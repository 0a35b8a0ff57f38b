// Package shardlimit keeps one global limit W of in-progress items per
// (table, queue) across N shards: N independent PostgreSQL databases, each
// holding a part of one logical queue. Each shard enforces its own budget
// with workq's per-database limit (workq.queue_limits.max_in_progress,
// enforced by every claim); a Rebalancer moves the budgets towards demand
// so that the sum of what the shards may use never exceeds W.
//
// The invariant, per (table, queue) and at every instant:
//
//	sum over shards of max(budget in force, items in progress) <= W
//
// A budget is in force once its write commits on its shard; a shard whose
// budget was lowered below its in-progress count keeps those items until
// they finish, so it counts with its in-progress count until then. The
// leader keeps the invariant by applying every change in two phases: it
// first lowers the shards whose budget goes down, reads each lowered
// shard's in-progress count in the same transaction (after its write holds
// the limit row, so every claim made under the old budget is visible), and
// only when every lowering has committed does it raise the others, out of
// the headroom W - sum(max(budget, in progress)). A shard it cannot reach
// keeps the budget it had when last read: its claims go on under it, and
// the headroom counts it. A shard the leader has not read since it began
// leading, and cannot read now, has an unknown budget: the leader then
// writes nothing that round.
//
// The leader holds a lock (package lock) on the coordinator shard, the first
// of the list. When the coordinator is down there is no leader and the
// budgets freeze where they are: each shard keeps enforcing its last
// budget, and their sum stays at most W. Every write on a shard is fenced
// with the leader's token: a row in that shard's workq.workq_locks (named
// the lock name + ".fence", never held) keeps the greatest token seen
// there, and a write under a smaller token is refused, so a leader that
// lost the lock without noticing yet (a pause longer than the lock's TTL)
// cannot raise a shard after a newer leader has read it.
//
// Tokens grow on the coordinator's lock row, so when the coordinator
// changes (the list reordered, a new first database) a new leader's token
// can be below what the fences remember. A leader therefore begins by
// reading every shard's fence (and, on the other shards, the lock row an
// earlier coordinator's leader holds there) and advances its own token
// past them (lock.Advance); a shard it cannot reach then is caught up with
// in the round that first reaches it. Only the holder of the coordinator
// lock can advance: the advance is fenced by its current token on the
// lock row, so a leader that lost the lock is still fenced out.
package shardlimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/workqtype"
)

// Shard is one database of the sharded queue.
type Shard struct {
	Name string
	// DB is a pool (*pgxpool.Pool) on the shard's database, migrated; in a
	// schema other than workq, the pool wrapped for it as for every
	// component (docs/design.md §22).
	DB workqtype.TxDB
}

// Limit is one global limit: at most W items of (Table, Queue) in progress
// across every shard.
type Limit struct {
	Table lease.Table
	Queue string
	W     int
}

// Options configure a Rebalancer.
type Options struct {
	// Limits are the global limits to keep (at least one).
	Limits []Limit
	// Interval is how often the leader reads demand and moves budgets
	// (default 1s).
	Interval time.Duration
	// ShardTimeout bounds each read or write on one shard (default 2s):
	// a shard that does not answer within it counts as unreachable for
	// the round.
	ShardTimeout time.Duration
	// DemandCap caps the count of ready items read per shard (default W):
	// a shard cannot use more than W, so counting further buys nothing.
	DemandCap int
	// LockName is the leader lock on the coordinator shard (default
	// DefaultLockName). The fence rows on every shard are named
	// LockName + ".fence".
	LockName string
	// LockTTL is the leader lock's TTL (default lock.DefaultTTL).
	LockTTL time.Duration
	// Owner names the leader in workq_locks (default host-pid).
	Owner  string
	Logger *slog.Logger
}

// DefaultLockName is the leader lock of the Rebalancer.
const DefaultLockName = "workq.shardlimit"

// DefaultInterval is the rebalance interval when Options.Interval is zero.
const DefaultInterval = time.Second

// ErrInvalid (workqtype.ErrInvalid) wraps the errors of bad arguments.
var ErrInvalid = workqtype.ErrInvalid

func (o Options) withDefaults(shards []Shard) (Options, error) {
	if len(shards) == 0 {
		return o, fmt.Errorf("shardlimit: %w", workqtype.Invalid("shards", "at least one shard is needed"))
	}
	seen := map[string]bool{}
	for i, s := range shards {
		if s.DB == nil {
			return o, fmt.Errorf("shardlimit: %w", workqtype.Invalid("shards", fmt.Sprintf("shard %d (%q) has no database", i, s.Name)))
		}
		if s.Name == "" || seen[s.Name] {
			return o, fmt.Errorf("shardlimit: %w", workqtype.Invalid("shards", fmt.Sprintf("shard %d needs a unique, non-empty name, got %q", i, s.Name)))
		}
		seen[s.Name] = true
	}
	if len(o.Limits) == 0 {
		return o, fmt.Errorf("shardlimit: %w", workqtype.Invalid("limits", "at least one limit is needed"))
	}
	keys := map[string]bool{}
	for _, l := range o.Limits {
		if l.W < 0 {
			return o, fmt.Errorf("shardlimit: %w", workqtype.Invalid("limit", fmt.Sprintf("W of %s/%s must be at least 0, got %d", l.Table, l.Queue, l.W)))
		}
		if err := lease.CheckLimit(l.Table, l.Queue, l.W); err != nil {
			return o, fmt.Errorf("shardlimit: %w", err)
		}
		k := string(l.Table) + "/" + l.Queue
		if keys[k] {
			return o, fmt.Errorf("shardlimit: %w", workqtype.Invalid("limits", "limit of "+k+" given twice"))
		}
		keys[k] = true
	}
	if o.Interval == 0 {
		o.Interval = DefaultInterval
	}
	if o.ShardTimeout == 0 {
		o.ShardTimeout = 2 * time.Second
	}
	if o.Interval < 0 || o.ShardTimeout < 0 || o.DemandCap < 0 {
		return o, fmt.Errorf("shardlimit: %w", workqtype.Invalid("options", "interval, shard timeout and demand cap must not be negative"))
	}
	if o.LockName == "" {
		o.LockName = DefaultLockName
	}
	if err := workqtype.CheckName("lock_name", "lock name", o.LockName+".fence"); err != nil {
		return o, fmt.Errorf("shardlimit: %w", err)
	}
	if o.Owner == "" {
		o.Owner = workqtype.DefaultOwner()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// ErrFenced is returned for a shard write refused because a leader with a
// newer token has written there: this leader has lost the lock.
var ErrFenced = errors.New("fenced out by a newer leader")

// ZeroUnset gives every limit without a budget on the shard of db a budget
// of 0 (claim nothing), and leaves the others alone. A sharded Client calls
// it before its workers start, so a shard never claims without a limit
// until the leader's first round; the leader then raises it. db is the
// shard's pool (in the schema, as Shard.DB).
func ZeroUnset(ctx context.Context, db workqtype.TxDB, limits []Limit) error {
	for _, lim := range limits {
		if _, err := db.Exec(ctx, `insert into workq.queue_limits (work_table, queue, max_in_progress)
			values ($1, $2, 0) on conflict (work_table, queue) do nothing`, string(lim.Table), lim.Queue); err != nil {
			return fmt.Errorf("shardlimit: budget 0 for %s/%s: %w", lim.Table, lim.Queue, err)
		}
	}
	return nil
}
