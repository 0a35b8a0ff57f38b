package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/workqtype"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/lease"
)

// benchFloorQueue holds the rows of the latency floor, apart from the
// worker's queue.
const benchFloorQueue = "workq-bench-floor"

// floorSamples is how many pickups latencyFloor times at rate per second:
// about five seconds' worth (at least 20 a second, so a low rate does not
// make it long), at most 1000.
func floorSamples(rate int) (n int, interval time.Duration) {
	perSecond := max(rate, 20)
	return min(5*perSecond, 1000), time.Second / time.Duration(perSecond)
}

// latencyFloor measures what pickup latency cannot go below on this
// database: the same statements as a worker's pickup with no runtime
// around them. n times, one every interval, it enqueues batch jobs with
// NOTIFY (one Enqueue when batch is 1, else one EnqueueMany, as rate mode
// does), waits for the notification on a listening connection, claims
// them with one lease.Engine.Claim and records, for each, the time from
// its run_at (the database's now() when the enqueue began, as the
// worker's figure) to the claim's return; then completes them. It runs
// before the worker starts, in the same process, so the two figures share
// the machine's state of the moment.
func (b *bench) latencyFloor(ctx context.Context, n, batch int, interval, ttl time.Duration) ([]time.Duration, error) {
	pooled, err := b.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("latency floor: %w", err)
	}
	// A connection that has listened never goes back to the pool (as the
	// worker's listener): notifications it buffered would stay with it.
	conn := pooled.Hijack()
	defer conn.Close(context.WithoutCancel(ctx)) //nolint:errcheck // closing a connection nobody else holds
	if _, err := conn.Exec(ctx, "listen "+pgx.Identifier{workqtype.NotifyChannel(b.schema, "job_runs")}.Sanitize()); err != nil {
		return nil, fmt.Errorf("latency floor: %w", err)
	}
	eng := lease.New(b.db, lease.JobRuns)
	// Every enqueue notifies: one that follows the last within the default
	// debounce (after a slow round) would otherwise wait for no notification.
	client := jobq.New(jobq.Options{NotifyDebounce: time.Nanosecond})
	jobs := make([]jobq.Job, max(batch, 1))
	for i := range jobs {
		jobs[i] = jobq.Job{Queue: benchFloorQueue, Kind: "noop"}
	}
	out := make([]time.Duration, 0, n*len(jobs))
	next := time.Now()
	for range n {
		if len(jobs) == 1 {
			_, err = client.Enqueue(ctx, b.db, jobs[0])
		} else {
			_, err = client.EnqueueMany(ctx, b.db, jobs)
		}
		if err != nil {
			return nil, fmt.Errorf("latency floor: %w", err)
		}
		if err := awaitNotification(ctx, conn, benchFloorQueue); err != nil {
			return nil, fmt.Errorf("latency floor: %w", err)
		}
		c, err := eng.Claim(ctx, lease.ClaimParams{Queue: benchFloorQueue, Max: len(jobs), Lease: ttl, WorkerID: "bench-floor"})
		if err != nil {
			return nil, fmt.Errorf("latency floor: %w", err)
		}
		if len(c.Items) != len(jobs) {
			return nil, fmt.Errorf("latency floor: claimed %d rows after the notification, want %d", len(c.Items), len(jobs))
		}
		done := make([]lease.Completion, 0, len(c.Items))
		for _, it := range c.Items {
			out = append(out, time.Since(it.RunAt))
			done = append(done, lease.Completion{ID: it.ID, Token: c.Token, RunID: it.RunID, Outcome: lease.Done})
		}
		if _, err := eng.Complete(ctx, done); err != nil {
			return nil, fmt.Errorf("latency floor: %w", err)
		}
		next = next.Add(interval)
		if wait := time.Until(next); wait > 0 {
			time.Sleep(wait)
		}
	}
	slices.Sort(out)
	return out, nil
}

// awaitNotification waits up to a second for a notification with payload
// on conn.
func awaitNotification(ctx context.Context, conn *pgx.Conn, payload string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("no notification for %s within 1s of the enqueue: %w", payload, err)
		}
		if n.Payload == payload {
			return nil
		}
	}
}
