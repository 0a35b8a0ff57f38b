package lease_test

import (
	"context"
	"fmt"
	"github.com/workq/workq/internal/lease"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workq/workq/internal/db/gen"
)

// The global limit W holds across many concurrent claimers: the number of
// live leases on a limited queue never exceeds W.
func TestLeaseGlobalLimitUnderConcurrency(t *testing.T) {
	const (
		limit    = 5
		rows     = 2000
		claimers = 20
		batch    = 3
		runFor   = 3 * time.Second // at least; see below
		minDone  = 100
		minSeen  = 50 // samples
	)
	e := newLeaseEnv(t, jobRunsTable, claimers+4)
	if err := e.q.QueueLimitsSet(e.ctx, gen.QueueLimitsSetParams{WorkTable: "job_runs", Queue: "limited", MaxInProgress: limit}); err != nil {
		t.Fatalf("set limit: %v", err)
	}
	e.enqueue(enqueueSpec{queue: "limited", n: rows})
	// An unlimited queue next to it is not held back by the limit.
	e.enqueue(enqueueSpec{queue: "free", n: 20})

	// The run lasts runFor, and on a loaded machine (-race beside other
	// packages: 48 rows in 3 s once) until there is enough to judge, within
	// a minute.
	ctx, stop := context.WithTimeout(e.ctx, time.Minute)
	defer stop()
	var (
		wg         sync.WaitGroup
		done       atomic.Int64
		claims     atomic.Int64
		maxLive    atomic.Int64
		samples    atomic.Int64
		firstErr   error
		firstErrMu sync.Mutex
	)
	fail := func(err error) {
		firstErrMu.Lock()
		defer firstErrMu.Unlock()
		if firstErr == nil {
			firstErr = err
		}
		stop()
	}
	for w := 0; w < claimers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			p := claimParams{queue: "limited", workerID: fmt.Sprintf("w%d", w), leaseMs: 60_000, maxRows: batch}
			for ctx.Err() == nil {
				// Database calls use e.ctx: ctx only says when to stop, so that
				// no claim is cut off between its commit and its reply.
				rs, err := jobRunsTable.claim(e.ctx, e.q, p)
				if err != nil {
					fail(fmt.Errorf("claimer %d: claim: %w", w, err))
					return
				}
				if len(rs) == 0 {
					time.Sleep(time.Millisecond)
					continue
				}
				claims.Add(1)
				if len(rs) > batch {
					fail(fmt.Errorf("claimer %d: claim returned %d rows, asked for %d", w, len(rs), batch))
					return
				}
				time.Sleep(time.Duration(2+w%4) * time.Millisecond) // simulated work
				ends := make([]attemptEnd, len(rs))
				for i, r := range rs {
					ends[i] = attemptEnd{ID: r.ID, Token: r.Token, Outcome: "done"}
				}
				got, err := completeRows(e.ctx, e.q, ends)
				if err != nil {
					fail(fmt.Errorf("claimer %d: complete: %w", w, err))
					return
				}
				if len(got) != len(rs) {
					fail(fmt.Errorf("claimer %d: complete applied to %d of %d rows", w, len(got), len(rs)))
					return
				}
				done.Add(int64(len(got)))
			}
		}(w)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-ctx.Done():
			return
		case <-time.After(runFor):
		}
		for ctx.Err() == nil && (done.Load() < minDone || samples.Load() < minSeen) {
			time.Sleep(10 * time.Millisecond)
		}
		stop()
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			var n int64
			err := e.pool.QueryRow(e.ctx,
				`select count(*) from workq.job_runs_all where queue = 'limited' and status = $1 and locked_until > now()`, lease.StatusInProgress).Scan(&n)
			if err != nil {
				fail(fmt.Errorf("sampler: %w", err))
				return
			}
			samples.Add(1)
			for {
				m := maxLive.Load()
				if n <= m || maxLive.CompareAndSwap(m, n) {
					break
				}
			}
		}
	}()
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}

	t.Logf("%d claims, %d rows done, %d samples, max %d live leases", claims.Load(), done.Load(), samples.Load(), maxLive.Load())
	if m := maxLive.Load(); m > limit {
		t.Fatalf("sampler saw %d live leases on the limited queue, want at most W=%d", m, limit)
	}
	if maxLive.Load() < 2 {
		t.Errorf("sampler never saw more than %d live leases: the claimers did not run concurrently", maxLive.Load())
	}
	if done.Load() < minDone {
		t.Errorf("only %d rows done in a minute, want progress (>= %d)", done.Load(), minDone)
	}
	if samples.Load() < minSeen {
		t.Errorf("only %d samples taken", samples.Load())
	}
	if n := e.count("queue = 'limited' and status = $1", lease.StatusDone); int64(n) != done.Load() {
		t.Errorf("%d rows done in the table, claimers completed %d", n, done.Load())
	}
	if n := e.count("queue = 'limited' and status = $1", lease.StatusInProgress); n != 0 {
		t.Errorf("%d rows still in progress after every claimer completed its leases", n)
	}
	rs := e.claim(claimParams{queue: "free", workerID: "free", leaseMs: 60_000, maxRows: 50})
	if len(rs) != 20 {
		t.Errorf("claim on the unlimited queue returned %d rows, want all 20", len(rs))
	}
}

// The limit counts live leases only: once leases expire (even before any
// reaper runs) their slots are free again. W = 0 pauses a queue.
func TestLeaseGlobalLimitExpiredLeasesStopCounting(t *testing.T) {
	db := newLeaseDB(t, 4)
	for _, tbl := range leaseTables {
		t.Run(tbl.name, func(t *testing.T) {
			const limit = 5
			e := db.on(t, tbl)
			setLimit := func(w int32) {
				t.Helper()
				if err := e.q.QueueLimitsSet(e.ctx, gen.QueueLimitsSetParams{WorkTable: tbl.name, Queue: "limited", MaxInProgress: w}); err != nil {
					t.Fatalf("set limit %d: %v", w, err)
				}
			}
			setLimit(limit)
			e.enqueue(enqueueSpec{queue: "limited", n: 20})
			claim := func(leaseMs int64) []claimedRow {
				return e.claim(claimParams{queue: "limited", workerID: "w", leaseMs: leaseMs, maxRows: 10})
			}

			first := claim(600)
			if len(first) != limit {
				t.Fatalf("first claim got %d rows, want W=%d", len(first), limit)
			}
			if rs := claim(30_000); len(rs) != 0 {
				t.Fatalf("claim with W=%d live leases got %d rows, want 0", limit, len(rs))
			}
			e.waitExpired(first...)
			second := claim(30_000)
			if len(second) != limit {
				t.Fatalf("claim after the first leases expired (not reaped) got %d rows, want %d", len(second), limit)
			}
			for _, r := range second {
				for _, f := range first {
					if r.ID == f.ID {
						t.Fatalf("row %d claimed again while its expired lease was not reaped", r.ID)
					}
				}
			}
			if n := e.count("status = $1", lease.StatusInProgress); n != 2*limit {
				t.Fatalf("%d rows in progress, want %d (5 expired, 5 live)", n, 2*limit)
			}
			if rs := claim(30_000); len(rs) != 0 {
				t.Fatalf("claim with W live leases got %d rows, want 0", len(rs))
			}

			// Ending one live lease frees exactly one slot.
			e.complete(attemptEnd{ID: second[0].ID, Token: second[0].Token, Outcome: "done"})
			if rs := claim(30_000); len(rs) != 1 {
				t.Fatalf("claim after one completion got %d rows, want 1", len(rs))
			}

			// W = 0 pauses the queue even with free rows; dropping the limit lifts it.
			setLimit(0)
			e.complete(attemptEnd{ID: second[1].ID, Token: second[1].Token, Outcome: "done"})
			if rs := claim(30_000); len(rs) != 0 {
				t.Fatalf("claim with W=0 got %d rows, want 0", len(rs))
			}
			if n, err := e.q.QueueLimitsDelete(e.ctx, tbl.name, "limited"); err != nil || n != 1 {
				t.Fatalf("delete limit: %d rows, %v; want 1 row", n, err)
			}
			if rs, ready := claim(30_000), 20-2*limit-1; len(rs) != ready {
				t.Fatalf("claim without a limit got %d rows, want all %d ready rows", len(rs), ready)
			}
		})
	}
}
