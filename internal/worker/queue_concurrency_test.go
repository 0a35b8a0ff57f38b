package worker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/worker"
)

// A queue given a concurrency of its own (Config.QueueConcurrency) never
// runs more handlers at once than that, while another queue of the same
// worker runs many.
func TestRuntimeQueueConcurrency(t *testing.T) {
	pool := testdb.PoolWith(t, 30)
	ctx := context.Background()
	type gauge struct{ now, peak atomic.Int32 }
	gauges := map[string]*gauge{"serial": {}, "bulk": {}}
	var done atomic.Int32
	w, err := worker.New(pool, worker.Config{Queues: []string{"serial", "bulk"}, Concurrency: 8,
		QueueConcurrency: map[string]int{"serial": 1}, Batch: 10, Poll: 20 * time.Millisecond, Lease: 5 * time.Second}, worker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Register("sleep", func(ctx context.Context, job *worker.Job) error {
		g := gauges[job.Queue]
		n := g.now.Add(1)
		for {
			p := g.peak.Load()
			if n <= p || g.peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
		g.now.Add(-1)
		done.Add(1)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	const perQueue = 24
	for range perQueue {
		for q := range gauges {
			enqueue(t, pool, jobq.Job{Queue: q, Kind: "sleep"})
		}
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(ctx)
	waitFor(t, 30*time.Second, "every job to run", func() bool { return done.Load() == 2*perQueue })
	if p := gauges["serial"].peak.Load(); p != 1 {
		t.Errorf("queue serial (concurrency 1) ran %d handlers at once", p)
	}
	if p := gauges["bulk"].peak.Load(); p < 2 || p > 8 {
		t.Errorf("queue bulk (concurrency 8) ran at most %d handlers at once, want 2 to 8", p)
	}
}
