package worker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/worker"
)

// While a queue has a backlog, claims resume where the previous one started
// (lease.ClaimParams.Resume) and skip the rows behind that point; at least
// once a second a claim reads the queue from its start. So a job given a
// run_at an hour ago, enqueued in the middle of a backlog, starts within
// about a second, long before the backlog is gone.
func TestRuntimeRowBehindResumePointStartsWithinAFullScan(t *testing.T) {
	pool := testdb.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const backlog = 50000
	if _, err := pool.Exec(ctx, `insert into workq.job_runs (queue, kind) select 'q', 'bulk' from generate_series(1, $1)`, backlog); err != nil {
		t.Fatal(err)
	}
	cfg := rtConfig("w", "q")
	cfg.Concurrency = 10
	cfg.Batch = 100
	cfg.Poll = time.Second // the default: the full scans must not come from a fast poll
	var bulk atomic.Int64
	late := make(chan time.Time, 1)
	startWorker(t, pool, cfg, worker.Options{}, map[string]worker.HandlerFunc{
		"bulk": func(ctx context.Context, j *worker.Job) error {
			time.Sleep(time.Millisecond) // at most 10 slots x 1 ms: the backlog lasts 5 s or more
			bulk.Add(1)
			return nil
		},
		"late": func(ctx context.Context, j *worker.Job) error {
			select {
			case late <- time.Now():
			default:
			}
			return nil
		},
	})
	for bulk.Load() < 1000 {
		if ctx.Err() != nil {
			t.Fatalf("only %d bulk jobs ran", bulk.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	enqueued := time.Now()
	if _, err := pool.Exec(ctx, `insert into workq.job_runs (queue, kind, run_at) values ('q', 'late', now() - interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-late:
		left := backlog - bulk.Load()
		t.Logf("the late job started %v after it was enqueued, %d bulk jobs still to run", at.Sub(enqueued).Round(time.Millisecond), left)
		if d := at.Sub(enqueued); d > 3*time.Second {
			t.Errorf("the late job started %v after it was enqueued; want within about a second (fullScanEvery)", d)
		}
		if left < 1000 {
			t.Fatalf("the backlog was nearly gone (%d left) when the late job started: the test shows nothing", left)
		}
	case <-ctx.Done():
		t.Fatalf("the late job never started (%d of %d bulk jobs ran)", bulk.Load(), backlog)
	}
}
