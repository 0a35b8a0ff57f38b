package worker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workq/workq/internal/jobq"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/worker"
)

// A running worker claims nothing from a paused queue, and a resume wakes
// it at once (the resume's NOTIFY, not the 10s poll).
func TestRuntimePausedQueue(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	ctx := context.Background()
	if _, err := lease.Pause(ctx, pool, lease.JobRuns, "pz", "test", "maintenance window"); err != nil {
		t.Fatal(err)
	}
	cfg := rtConfig("pause", "pz")
	cfg.Poll = 10 * time.Second
	var ran atomic.Int64
	startWorker(t, pool, cfg, worker.Options{}, map[string]worker.HandlerFunc{
		"k": func(context.Context, *worker.Job) error { ran.Add(1); return nil },
	})
	jobs := make([]jobq.Job, 5)
	for i := range jobs {
		jobs[i] = jobq.Job{Queue: "pz", Kind: "k"}
	}
	if _, err := jobq.New(jobq.Options{}).EnqueueMany(ctx, pool, jobs); err != nil {
		t.Fatal(err)
	}
	// The enqueue's NOTIFY reaches the worker, whose claim gets a budget of
	// zero. Nothing may run while the queue stays paused.
	time.Sleep(300 * time.Millisecond)
	if n := ran.Load(); n != 0 {
		t.Fatalf("%d jobs of a paused queue ran", n)
	}
	if _, err := lease.Resume(ctx, pool, lease.JobRuns, "pz"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second) // well before the 10s poll
	for ran.Load() < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 5 jobs ran within 3s of the resume; the resume did not wake the worker", ran.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
