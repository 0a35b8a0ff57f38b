package worker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workq/workq/internal/jobq"

	"github.com/workq/workq/internal/config"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/worker"
)

func TestSmokeBurnDown(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	c := jobq.New(jobq.Options{})
	const n = 5000
	jobs := make([]jobq.Job, n)
	for i := range jobs {
		jobs[i] = jobq.Job{Kind: "noop", Payload: map[string]int{"i": i}}
	}
	if _, err := c.EnqueueMany(ctx, pool, jobs); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Batch, cfg.Concurrency = 500, 1000
	var done atomic.Int64
	finished := make(chan struct{})
	w, err := worker.New(pool, cfg.Worker(), worker.Options{OnResult: func(r worker.Result) {
		// Done only: an item that waited too long for a handler (at load)
		// is given back, an applied result too, and runs again.
		if r.Applied && r.Status == lease.StatusDone && done.Add(1) == n {
			close(finished)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	w.Register("noop", func(ctx context.Context, j *worker.Job) error { return nil })
	rctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	start := time.Now()
	go func() { errc <- w.Run(rctx) }()
	select {
	case <-finished:
	case <-time.After(60 * time.Second):
		t.Fatalf("only %d of %d done; stats %+v", done.Load(), n, w.Stats())
	}
	t.Logf("%d jobs in %s = %.0f/s", n, time.Since(start), n/time.Since(start).Seconds())
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	var left int
	pool.QueryRow(ctx, "select count(*) from workq.job_runs_all where status <> 2").Scan(&left)
	if left != 0 {
		t.Fatalf("%d jobs not done", left)
	}
}
