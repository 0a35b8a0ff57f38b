package test

import (
	"context"
	"testing"
	"time"

	"github.com/workq/workq/internal/jobq"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
)

// BenchmarkClaimComplete measures the lease engine without a worker: one op
// claims a batch of 500 job runs and completes them as done (with the run
// archive), the SQL path `workq bench` drives. Compare with ../shared/ceiling.
//
//	go test ./test/ -run '^$' -bench ClaimComplete -benchtime 20x
func BenchmarkClaimComplete(b *testing.B) {
	const batch = 500
	ctx := context.Background()
	pool := testdb.Pool(b)
	c := jobq.New(jobq.Options{NotifyDebounce: -1})
	jobs := make([]jobq.Job, 5000)
	for i := range jobs {
		jobs[i] = jobq.Job{Queue: "bench", Kind: "noop"}
	}
	for n := 0; n < b.N*batch; n += len(jobs) {
		if _, err := c.EnqueueMany(ctx, pool, jobs); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, "vacuum analyze workq.job_runs"); err != nil {
		b.Fatal(err)
	}
	e := lease.New(pool, lease.JobRuns)
	done := 0
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		cl, err := e.Claim(ctx, lease.ClaimParams{Queue: "bench", Max: batch, Lease: 30 * time.Second, WorkerID: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		cs := make([]lease.Completion, len(cl.Items))
		for i, it := range cl.Items {
			cs[i] = lease.Completion{ID: it.ID, Token: cl.Token, Outcome: lease.Done}
		}
		a, err := e.Complete(ctx, cs)
		if err != nil {
			b.Fatal(err)
		}
		if len(a.Lost) > 0 || len(cl.Items) != batch {
			b.Fatalf("claimed %d, lost %d", len(cl.Items), len(a.Lost))
		}
		done += len(cl.Items)
	}
	b.ReportMetric(float64(done)/time.Since(start).Seconds(), "rows/s")
}

// BenchmarkEnqueueMany measures bulk enqueue: one op inserts 1000 job runs
// in one statement.
func BenchmarkEnqueueMany(b *testing.B) {
	ctx := context.Background()
	pool := testdb.Pool(b)
	c := jobq.New(jobq.Options{NotifyDebounce: -1})
	jobs := make([]jobq.Job, 1000)
	for i := range jobs {
		jobs[i] = jobq.Job{Queue: "bench", Kind: "noop", Payload: map[string]int{"i": i}}
	}
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if _, err := c.EnqueueMany(ctx, pool, jobs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(jobs))/time.Since(start).Seconds(), "jobs/s")
}

// BenchmarkEnqueueManyFast is BenchmarkEnqueueMany through COPY
// (EnqueueManyFast): one op inserts the same 1000 job runs.
func BenchmarkEnqueueManyFast(b *testing.B) {
	ctx := context.Background()
	pool := testdb.Pool(b)
	c := jobq.New(jobq.Options{NotifyDebounce: -1})
	jobs := make([]jobq.Job, 1000)
	for i := range jobs {
		jobs[i] = jobq.Job{Queue: "bench", Kind: "noop", Payload: map[string]int{"i": i}}
	}
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if _, err := c.EnqueueManyFast(ctx, pool, jobs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(jobs))/time.Since(start).Seconds(), "jobs/s")
}
