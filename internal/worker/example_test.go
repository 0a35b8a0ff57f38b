package worker_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/workq/workq/internal/jobq"

	"github.com/workq/workq/internal/config"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/worker"
)

// A worker runs the handlers registered for job kinds. Enqueue in the
// caller's transaction or on a pool; the worker claims, runs, retries and
// archives.
func Example() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()

	cfg := config.Default()
	cfg.Queues = []string{"email"}
	w, err := worker.New(pool, cfg.Worker(), worker.Options{})
	if err != nil {
		panic(err)
	}
	sent := make(chan string, 1)
	err = w.Register("welcome", func(ctx context.Context, job *worker.Job) error {
		var p struct{ To string }
		if err := job.Decode(&p); err != nil {
			return err // a payload that does not decode fails at once (Permanent)
		}
		sent <- p.To
		return nil // done; an error would retry with backoff
	})
	if err != nil {
		panic(err)
	}
	if err := w.Start(ctx); err != nil {
		panic(err)
	}
	client := jobq.New(jobq.Options{})
	if _, err := client.Enqueue(ctx, pool, jobq.Job{Queue: "email", Kind: "welcome", Payload: map[string]string{"to": "ada@example.com"}}); err != nil {
		panic(err)
	}
	fmt.Println("welcome sent to", <-sent)
	if err := w.Stop(ctx); err != nil {
		panic(err)
	}
	// Output: welcome sent to ada@example.com
}

// A Source plugs a kind of work into the runtime: a work table, its queues,
// and how a claimed item finds its handler. Claiming, leases, heartbeats,
// completions, retries and the run archive are the runtime's, the same for
// every table. Here every job run of queue "audit" goes to one function,
// whatever its kind.
func ExampleWorker_AddSource() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()

	w, err := worker.New(pool, config.Default().Worker(), worker.Options{})
	if err != nil {
		panic(err)
	}
	seen := make(chan string, 1)
	audit := func(ctx context.Context, job *worker.Job) error {
		seen <- fmt.Sprintf("%s/%s: %s %s (attempt %d)", job.Table, job.Queue, job.Kind, job.Payload, job.Attempt)
		return nil
	}
	err = w.AddSource(worker.Source{
		Table:  lease.JobRuns,
		Queues: []string{"audit"},
		Route:  func(*worker.Job) (worker.HandlerFunc, error) { return audit, nil },
	})
	if err != nil {
		panic(err)
	}
	if err := w.Start(ctx); err != nil {
		panic(err)
	}
	if _, err := jobq.New(jobq.Options{}).Enqueue(ctx, pool,
		jobq.Job{Queue: "audit", Kind: "login", Payload: map[string]string{"user": "ada"}}); err != nil {
		panic(err)
	}
	fmt.Println(<-seen)
	if err := w.Stop(ctx); err != nil {
		panic(err)
	}
	// Output: job_runs/audit: login {"user": "ada"} (attempt 1)
}

// Stop drains: it stops claiming, lets running handlers finish within the
// drain timeout while their leases are kept, then cancels the rest with
// ErrShutdown and releases them (back to ready, the attempt given back). It
// returns within the drain timeout plus StopBound, whatever the database
// does.
func ExampleWorker_Stop() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()

	cfg := config.Default()
	cfg.DrainTimeout = 100 * time.Millisecond
	w, err := worker.New(pool, cfg.Worker(), worker.Options{})
	if err != nil {
		panic(err)
	}
	started := make(chan struct{})
	causes := make(chan error, 1)
	err = w.Register("slow", func(ctx context.Context, job *worker.Job) error {
		close(started)
		<-ctx.Done() // a handler that outlives the drain timeout
		causes <- context.Cause(ctx)
		return context.Cause(ctx)
	})
	if err != nil {
		panic(err)
	}
	if err := w.Start(ctx); err != nil {
		panic(err)
	}
	res, err := jobq.New(jobq.Options{}).Enqueue(ctx, pool, jobq.Job{Kind: "slow"})
	if err != nil {
		panic(err)
	}
	<-started
	if err := w.Stop(ctx); err != nil {
		panic(err)
	}
	fmt.Println("handler cancelled:", <-causes)
	var status, attempts int
	if err := pool.QueryRow(ctx, "select status, attempts from workq.job_runs_all where id = $1", res.ID).Scan(&status, &attempts); err != nil {
		panic(err)
	}
	fmt.Printf("job %s again, %d attempts used\n", lease.Status(status), attempts)
	// Output:
	// handler cancelled: worker shutting down
	// job ready again, 0 attempts used
}

// RetryAt chooses when a failed attempt runs again (a Retry-After header,
// a per-kind policy) instead of the backoff; it still uses an attempt.
func ExampleRetryAt() {
	it := lease.Item{ID: 1, Attempt: 1, MaxAttempts: 5}
	err := worker.RetryAt(time.Now().Add(2*time.Minute), errors.New("429 too many requests"))
	c := worker.CompletionOf(it, err, time.Second, time.Minute)
	fmt.Println(c.Outcome, c.Delay.Round(time.Minute), c.Error)
	// Output: retry 2m0s 429 too many requests
}
