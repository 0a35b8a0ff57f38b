package maintain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/ha"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/reaper"
	"github.com/workq/workq/internal/workflows"
	"github.com/workq/workq/workqtype"
)

// ReapTask requeues expired leases (failing items with no attempts left) on
// every work table, batch rows per statement; one failing table does not
// stop the others (package reaper).
func ReapTask(db workqtype.DB, every time.Duration, batch int, log *slog.Logger) (Task, error) {
	r, err := reaper.New(db, every, batch, log)
	if err != nil {
		return Task{}, err
	}
	return Task{Name: "reap", Every: every, Run: func(ctx context.Context, _ int64) (int64, error) {
		got, err := r.RunOnce(ctx)
		obs := observerFrom(ctx)
		var n int64
		for t, g := range got {
			n += int64(g.Requeued + g.Failed)
			if obs != nil {
				obs.Reaped(t, g)
			}
		}
		return n, err
	}}, nil
}

// Retention says how long finished work is kept.
type Retention struct {
	Finished time.Duration // done and failed items of Tables (0 = keep forever)
	// Tables whose finished items are deleted after Finished (default every
	// work table). The inbox usually has its own window (its processed rows
	// are its de-duplication memory) and is left out.
	Tables []lease.Table
	// Runs is how long the run archive keeps an attempt (0 = keep
	// forever). The archive is partitioned by UTC day and retention drops a
	// day's partition once the whole day is older than Runs, so an attempt
	// is deleted between Runs and Runs plus one day after it ended.
	Runs  time.Duration
	Batch int // rows per delete statement (default 1000)
	// MaxBatches bounds one round per table (default 100): a large backlog
	// is worked off over several rounds, never in one long transaction.
	MaxBatches int
}

// RunsDaysAhead is how many days after today (UTC) the retention task keeps
// partitions of the run archive ready, so that inserts land in their day's
// partition even when maintenance stops for that long (after that they
// land in the DEFAULT partition, and the next round moves them out).
const RunsDaysAhead = 3

// RetentionTask deletes finished items older than the retention age, in
// batches of short single-statement transactions by primary key, and looks
// after the run archive: each round it makes the archive's day partitions
// for today and the next RunsDaysAhead days (moving any rows the DEFAULT
// partition took into them), drops every partition whose whole day is
// older than Runs (one short transaction each), and deletes the old rows of
// the partitions that are not one day wide (the DEFAULT partition and the
// archive from before partitioning) in batches. A table whose delete fails
// is skipped for this round; the others go on. It also deletes the flow
// states of idle limit keys and ends the flow control a throttle alone
// began once it is over (lease.PurgeFlow). A round's rows count the
// dropped partitions by PostgreSQL's estimate of their rows.
// workflowBatch is how many workflows a retention statement deletes.
const workflowBatch = 10

func RetentionTask(db workqtype.DB, every time.Duration, r Retention) (Task, error) {
	if r.Finished < 0 || r.Runs < 0 {
		return Task{}, fmt.Errorf("%w: retention ages must not be negative", ErrInvalid)
	}
	if r.Batch == 0 {
		r.Batch = 1000
	}
	if r.MaxBatches == 0 {
		r.MaxBatches = 100
	}
	if r.Tables == nil {
		r.Tables = lease.Tables
	}
	if r.Batch < 1 || r.MaxBatches < 1 {
		return Task{}, fmt.Errorf("%w: retention batch and max batches must be positive", ErrInvalid)
	}
	batch := int32(min(r.Batch, math.MaxInt32))
	return Task{Name: "retention", Every: every, Run: func(ctx context.Context, _ int64) (int64, error) {
		var total int64
		var errs []error
		if r.Finished > 0 {
			for _, t := range r.Tables {
				// lease applies each table's own rules (the outbox keeps
				// failed keyed messages).
				e := lease.New(db, t)
				for range r.MaxBatches {
					n, err := e.DeleteFinished(ctx, r.Finished, r.Batch)
					total += n
					if err != nil {
						errs = append(errs, err)
						break
					}
					if n < int64(r.Batch) {
						break
					}
				}
			}
			if slices.Contains(r.Tables, lease.JobRuns) {
				// A workflow's tasks go with it, never before it has
				// ended (LeaseDeleteFinished leaves them): a few whole
				// workflows per statement, each with all its tasks.
				for range r.MaxBatches {
					n, err := workflows.DeleteFinished(ctx, db, r.Finished, workflowBatch)
					total += n
					if err != nil {
						errs = append(errs, err)
						break
					}
					if n < workflowBatch {
						break
					}
				}
			}
		}
		n, err := partitionRetention(ctx, gen.New(db), "runs", "run archive", r.Runs.Milliseconds(), false, batch, r.MaxBatches)
		total += n
		if err != nil {
			errs = append(errs, err)
		}
		// Done rows that left their work table (job runs) live in a
		// day-partitioned done table, kept as long as finished items.
		for _, t := range r.Tables {
			done, moves, err := lease.DoneTable(t)
			if err != nil || !moves {
				continue
			}
			// An age under a day is kept to the age: rows of the recent
			// days' partitions are deleted too (see partitionRetention).
			n, err := partitionRetention(ctx, gen.New(db), done, string(t)+" done table", r.Finished.Milliseconds(),
				r.Finished < 24*time.Hour, batch, r.MaxBatches)
			total += n
			if err != nil {
				errs = append(errs, err)
			}
		}
		// Flow control keeps a state per limit key it counts: the idle
		// ones go, so that a queue of many short-lived keys (tenants,
		// accounts) does not keep every key it ever saw.
		n, err = lease.PurgeFlow(ctx, db, batch, r.MaxBatches)
		total += n
		if err != nil {
			errs = append(errs, err)
		}
		return total, errors.Join(errs...)
	}}, nil
}

// partitionRetention is a day-partitioned table's part of a retention
// round (the run archive, runs, and the done tables): partitions made
// ahead, then (with an age) old partitions dropped and old rows of the
// DEFAULT and legacy partitions deleted, and with inDays the old rows of
// the day partitions that began before the age (an age under a day: kept
// to the age rather than up to a day longer). The steps go on after an error in
// another (a drop that timed out waiting for its lock does not stop the
// partitions of the coming days).
func partitionRetention(ctx context.Context, q *gen.Queries, parent, what string, olderThanMS int64, inDays bool, batch int32, maxBatches int) (int64, error) {
	var errs []error
	if _, err := q.DayPartitionsAdd(ctx, gen.DayPartitionsAddParams{Parent: parent, DaysAhead: RunsDaysAhead, OlderThanMs: olderThanMS}); err != nil {
		errs = append(errs, fmt.Errorf("make %s partitions: %w", what, err))
	}
	if olderThanMS <= 0 {
		return 0, errors.Join(errs...)
	}
	var total int64
	for range maxBatches {
		dropped, err := q.DayPartitionDrop(ctx, parent, olderThanMS)
		if err != nil {
			errs = append(errs, fmt.Errorf("drop %s partition: %w", what, err))
			break
		}
		if len(dropped) == 0 {
			break
		}
		total += dropped[0].RowsEstimate
	}
	for range maxBatches {
		n, err := q.DayPartitionsDeleteOld(ctx, gen.DayPartitionsDeleteOldParams{Parent: parent, OlderThanMs: olderThanMS, MaxRows: batch, InDays: inDays})
		total += n
		if err != nil {
			errs = append(errs, fmt.Errorf("delete old %s rows: %w", what, err))
			break
		}
		if n < int64(batch) {
			break
		}
	}
	return total, errors.Join(errs...)
}

// StuckTask counts, on every work table, the items in progress that were
// claimed more than twice the workers' lease ago, and logs each (table,
// queue) that has any at warn level: a worker holding items far past its
// lease (a handler hung in a loop that still heartbeats, or a lease that no
// reaper expires). It changes nothing; the count of a round is its rows.
func StuckTask(db workqtype.DB, every, leaseTTL time.Duration, log *slog.Logger) (Task, error) {
	if leaseTTL <= 0 {
		return Task{}, fmt.Errorf("%w: stuck task: lease must be positive, got %s", ErrInvalid, leaseTTL)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return Task{Name: "stuck", Every: every, Run: func(ctx context.Context, _ int64) (int64, error) {
		var total int64
		var errs []error
		obs := observerFrom(ctx)
		for _, t := range lease.Tables {
			rows, err := lease.New(db, t).Stuck(ctx, 2*leaseTTL)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if obs != nil {
				obs.Stuck(t, rows)
			}
			for _, r := range rows {
				total += r.Count
				log.Warn("items in progress for more than twice the lease: a worker may be stuck",
					"table", t, "queue", r.Queue, "items", r.Count, "oldest_claim", r.OldestClaim, "lease", leaseTTL)
			}
		}
		return total, errors.Join(errs...)
	}}, nil
}

// ReplicationObserver is implemented by an Observer (package metrics'
// does) that wants the rounds of ReplicationTask: how many standbys stream
// from the server and how many of them are synchronous (-1: this role may
// not see it).
type ReplicationObserver interface {
	Replication(standbys, synchronous int)
}

// DefaultReplicationInterval is how often the built-in replication task
// runs.
const DefaultReplicationInterval = time.Minute

// ReplicationTask returns the task "replication": it reads the server's
// standbys (pg_stat_replication, synchronous_standby_names) and logs at
// warn level, on its first round and whenever the state changes to it,
// that standbys stream and none is synchronous (a failover may then lose
// acknowledged commits; docs/operations.md, High availability), at info
// level when this role may not see whether any is (it needs pg_monitor)
// and when the state is safe again. It reports each round to the
// service's Observer when that implements ReplicationObserver. Its rows
// are the number of standbys.
func ReplicationTask(db workqtype.DB, every time.Duration, log *slog.Logger) (Task, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var mu sync.Mutex
	var last ha.State
	return Task{Name: "replication", Every: every, Run: func(ctx context.Context, _ int64) (int64, error) {
		r, err := ha.CheckReplication(ctx, db)
		if err != nil {
			return 0, err
		}
		state := r.State()
		if o, ok := observerFrom(ctx).(ReplicationObserver); ok {
			sync := r.Synchronous
			if state == ha.Unknown {
				sync = -1
			}
			o.Replication(r.Standbys, sync)
		}
		mu.Lock()
		changed := state != last
		last = state
		mu.Unlock()
		if changed {
			attrs := []any{"standbys", r.Standbys, "synchronous", r.Synchronous, "synchronous_standby_names", r.SynchronousStandbyNames}
			switch state {
			case ha.Unsafe:
				log.Warn("replication: standbys stream from the database and none is synchronous: a failover may lose acknowledged enqueues and completions "+
					"(docs/operations.md, High availability)", attrs...)
			case ha.Unknown:
				log.Info("replication: standbys stream from the database; whether any is synchronous is hidden from this role (grant pg_monitor)", attrs...)
			default:
				log.Info("replication: "+string(state), attrs...)
			}
		}
		return int64(r.Standbys), nil
	}}, nil
}
