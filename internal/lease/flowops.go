package lease

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/workqtype"
)

// FlowRule is one flow-control rule of a queue (flow_limits).
type FlowRule struct {
	Table       Table
	Queue       string
	Kind        string // "": the queue's own (or, PerKey, every key's)
	PerKey      bool
	Rate        int           // starts per Period; 0: none
	Period      time.Duration // 0: a second
	Concurrency int           // in progress at once; 0: none
}

// MaxFlowPeriod is the longest rate period.
const MaxFlowPeriod = 24 * time.Hour

// Check validates r; rule says whether it is to be set (Rate or
// Concurrency required) rather than named for removal.
func (r FlowRule) Check(rule bool) error {
	if err := checkQueue("flow limit", r.Table, r.Queue); err != nil {
		return err
	}
	switch {
	case len(r.Kind) > 256 || !workqtype.ValidText(r.Kind):
		return workqtype.Invalid("kind", "a kind, topic or source is at most 256 bytes of UTF-8 without NUL")
	case r.PerKey && r.Kind != "":
		return workqtype.Invalid("kind", "a limit per key is the queue's (every key of it): leave Kind empty")
	case r.PerKey && r.Table != JobRuns:
		return workqtype.Invalid("per_key", fmt.Sprintf("limits per key are for job runs (their LimitKey); %s has no limit key", r.Table))
	case r.Table == Outbox && r.Kind != "":
		return workqtype.Invalid("kind", "the outbox's claim keeps its order per partition key and cannot pass a topic over: limit the outbox queue, not a topic")
	}
	if !rule {
		return nil
	}
	switch {
	case r.Rate < 0 || r.Rate > math.MaxInt32:
		return workqtype.Invalid("rate", fmt.Sprintf("rate %d is out of range 0 to %d (0: no rate limit)", r.Rate, math.MaxInt32))
	case r.Concurrency < 0 || r.Concurrency > math.MaxInt32:
		return workqtype.Invalid("concurrency", fmt.Sprintf("concurrency %d is out of range 0 to %d (0: none)", r.Concurrency, math.MaxInt32))
	case r.Rate == 0 && r.Concurrency == 0:
		return workqtype.Invalid("rate", "a limit needs a rate or a concurrency (to remove one, remove it)")
	case r.Period < 0 || r.Period > MaxFlowPeriod || r.Period%time.Millisecond != 0:
		return workqtype.Invalid("period", fmt.Sprintf("period %s: want whole milliseconds from 1ms to %s (0: one second)", r.Period, MaxFlowPeriod))
	case r.Period != 0 && r.Rate == 0:
		return workqtype.Invalid("period", "a period goes with a rate")
	}
	return nil
}

func (r FlowRule) period() time.Duration {
	if r.Period == 0 {
		return time.Second
	}
	return r.Period
}

// inTx runs f in a transaction on db (a savepoint in the caller's).
func inTx(ctx context.Context, db workqtype.DB, f func(q *gen.Queries) error) error {
	b, ok := db.(beginner)
	if !ok {
		return f(gen.New(db))
	}
	tx, err := b.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := f(gen.New(tx)); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func i32(n int) *int32 {
	if n == 0 {
		return nil
	}
	v := int32(n)
	return &v
}

// tidy takes (table, queue) out of flow control when nothing of it is
// left: it locks the queue's row first, then tidies in a statement of its
// own, whose snapshot sees every setting committed before the lock.
func tidy(ctx context.Context, q *gen.Queries, table Table, queue string) error {
	if err := q.FlowQueueLock(ctx, string(table), queue); err != nil {
		return err
	}
	_, err := q.FlowTidy(ctx, string(table), queue)
	return err
}

// SetFlowRule sets r (replacing the rule of the same table, queue, kind
// and per-key), putting its queue under flow control.
func SetFlowRule(ctx context.Context, db workqtype.DB, r FlowRule) error {
	if err := r.Check(true); err != nil {
		return err
	}
	err := inTx(ctx, db, func(q *gen.Queries) error {
		if err := q.FlowQueueEnsure(ctx, string(r.Table), r.Queue); err != nil {
			return err
		}
		return q.FlowLimitSet(ctx, gen.FlowLimitSetParams{WorkTable: string(r.Table), Queue: r.Queue, Kind: r.Kind, PerKey: r.PerKey,
			Rate: i32(r.Rate), PeriodMs: r.period().Milliseconds(), Concurrency: i32(r.Concurrency)})
	})
	if err != nil {
		return fmt.Errorf("set flow limit of %s/%s: %w", r.Table, r.Queue, err)
	}
	return nil
}

// RemoveFlowRule removes the rule r names (its Table, Queue, Kind and
// PerKey) and says whether there was one; a queue left with nothing under
// flow control leaves it.
func RemoveFlowRule(ctx context.Context, db workqtype.DB, r FlowRule) (bool, error) {
	if err := r.Check(false); err != nil {
		return false, err
	}
	var n int64
	err := inTx(ctx, db, func(q *gen.Queries) (err error) {
		if n, err = q.FlowLimitDelete(ctx, gen.FlowLimitDeleteParams{WorkTable: string(r.Table), Queue: r.Queue, Kind: r.Kind, PerKey: r.PerKey}); err != nil {
			return err
		}
		return tidy(ctx, q, r.Table, r.Queue)
	})
	if err != nil {
		return false, fmt.Errorf("remove flow limit of %s/%s: %w", r.Table, r.Queue, err)
	}
	return n > 0, nil
}

// SetFair says whether claims of (table, queue) take its limit keys in
// turn (job runs only).
func SetFair(ctx context.Context, db workqtype.DB, table Table, queue string, fair bool) error {
	if err := checkQueue("fairness", table, queue); err != nil {
		return err
	}
	if table != JobRuns {
		return workqtype.Invalid("table", fmt.Sprintf("fair claims take limit keys in turn, which job runs have; %s has none", table))
	}
	err := inTx(ctx, db, func(q *gen.Queries) error {
		if err := q.FlowFairSet(ctx, gen.FlowFairSetParams{WorkTable: string(table), Queue: queue, Fair: fair}); err != nil {
			return err
		}
		return tidy(ctx, q, table, queue)
	})
	if err != nil {
		return fmt.Errorf("set fairness of %s/%s: %w", table, queue, err)
	}
	return nil
}

// PauseKind stops every worker from starting items of one kind (topic,
// source) of (table, queue) until ResumeKind, and says whether it was
// running. On the outbox, whose claim cannot pass a topic over, it pauses
// the whole queue's claims while it lasts.
func PauseKind(ctx context.Context, db workqtype.DB, table Table, queue, kind, by, reason string) (bool, error) {
	if err := checkQueue("pause kind", table, queue); err != nil {
		return false, err
	}
	if kind == "" || len(kind) > 256 || !workqtype.ValidText(kind) {
		return false, workqtype.Invalid("kind", "name the kind (topic, source) to pause: 1 to 256 bytes of UTF-8 without NUL")
	}
	if err := CheckPauser(by, reason); err != nil {
		return false, err
	}
	var r *string
	if reason != "" {
		r = &reason
	}
	paused := false
	err := inTx(ctx, db, func(q *gen.Queries) error {
		if err := q.FlowQueueEnsure(ctx, string(table), queue); err != nil {
			return err
		}
		_, err := q.FlowKindPause(ctx, gen.FlowKindPauseParams{WorkTable: string(table), Queue: queue, Kind: kind, PausedBy: by, Reason: r})
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		paused = err == nil
		return err
	})
	if err != nil {
		return false, fmt.Errorf("pause %s/%s kind %q: %w", table, queue, kind, err)
	}
	return paused, nil
}

// ResumeKind lets workers start items of the kind again and says whether
// it was paused.
func ResumeKind(ctx context.Context, db workqtype.DB, table Table, queue, kind string) (bool, error) {
	if err := checkQueue("resume kind", table, queue); err != nil {
		return false, err
	}
	var n int64
	err := inTx(ctx, db, func(q *gen.Queries) (err error) {
		if n, err = q.FlowKindResume(ctx, gen.FlowKindResumeParams{WorkTable: string(table), Queue: queue, Kind: kind}); err != nil {
			return err
		}
		return tidy(ctx, q, table, queue)
	})
	if err != nil {
		return false, fmt.Errorf("resume %s/%s kind %q: %w", table, queue, kind, err)
	}
	return n > 0, nil
}

// Throttle says the service downstream of a scope of (table, queue) is
// overloaded: a limit key's (key), a kind's (kind), or the queue's (both
// ""). No worker starts the scope's items for retryAfter, then it starts
// them at an adapted rate that grows back step by step. It returns until
// when the scope is throttled.
func Throttle(ctx context.Context, db workqtype.DB, table Table, queue, kind, key string, retryAfter time.Duration) (time.Time, error) {
	until, err := gen.New(db).FlowThrottle(ctx, gen.FlowThrottleParams{WorkTable: string(table), Queue: queue, Kind: kind, Key: key,
		RetryMs: max(retryAfter, 0).Milliseconds()})
	if err != nil {
		return time.Time{}, fmt.Errorf("throttle %s/%s: %w", table, queue, err)
	}
	return until, nil
}

// FlowStatus is everything under flow control on one database.
type FlowStatus struct {
	Queues      []gen.FlowQueuesListRow
	Rules       []gen.FlowLimitsListRow
	PausedKinds []gen.WorkqFlowKindPause
	Throttles   []gen.FlowStatesListRow
}

// ReadFlow reads the flow status of one database.
func ReadFlow(ctx context.Context, db workqtype.DB) (FlowStatus, error) {
	q := gen.New(db)
	var s FlowStatus
	var err error
	if s.Queues, err = q.FlowQueuesList(ctx); err != nil {
		return s, fmt.Errorf("list flow queues: %w", err)
	}
	if s.Rules, err = q.FlowLimitsList(ctx); err != nil {
		return s, fmt.Errorf("list flow limits: %w", err)
	}
	if s.PausedKinds, err = q.FlowKindPausesList(ctx); err != nil {
		return s, fmt.Errorf("list paused kinds: %w", err)
	}
	if s.Throttles, err = q.FlowStatesList(ctx); err != nil {
		return s, fmt.Errorf("list throttles: %w", err)
	}
	return s, nil
}

// PurgeFlow is flow control's part of retention: it deletes the states of
// limit keys that nothing needs any more (untouched for longer than the
// longest rate period, neither throttled nor adapting), up to batch rows
// per statement and maxBatches statements, and takes the queues a throttle
// alone put under flow control out of it once the throttle has ended. It
// returns the rows it deleted.
func PurgeFlow(ctx context.Context, db workqtype.DB, batch int32, maxBatches int) (int64, error) {
	q := gen.New(db)
	var total int64
	for range maxBatches {
		n, err := q.FlowPurgeKeys(ctx, batch)
		total += n
		if err != nil {
			return total, fmt.Errorf("purge limit keys' flow states: %w", err)
		}
		if n < int64(batch) {
			break
		}
	}
	n, err := q.FlowPurgeAutoQueues(ctx)
	if err != nil {
		return total, fmt.Errorf("end flow control of throttled queues: %w", err)
	}
	return total + n, nil
}
