package workq_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
)

// InvoiceArgs are the args of a job whose worker chooses its own retries.
type InvoiceArgs struct {
	Invoice int `json:"invoice"`
}

func (InvoiceArgs) Kind() string { return "invoice.sync" }

// invoiceWorker fails while the upstream is down and retries on the hour.
type invoiceWorker struct{}

func (invoiceWorker) Work(context.Context, *workq.Job[InvoiceArgs]) error {
	return errors.New("upstream unavailable")
}

// NextRetry is the kind's retry policy: the zero time would take
// Config.RetryPolicy, or the default backoff.
func (invoiceWorker) NextRetry(job *workq.Job[InvoiceArgs]) time.Time {
	return time.Now().Add(time.Hour)
}

// A Worker with a NextRetry method chooses when its failed jobs run again;
// the attempt is counted as usual.
func ExampleWorker_nextRetry() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()

	workers := workq.NewWorkers()
	workq.AddWorker[InvoiceArgs](workers, invoiceWorker{})
	client, err := workq.NewClient(pool, workq.Config{Workers: workers})
	must(err)
	results, _ := client.Subscribe(workq.EventRetried, workq.EventFailed, workq.EventCompleted)
	e, err := client.Enqueue(ctx, InvoiceArgs{Invoice: 7}, nil)
	must(err)
	must(client.Start(ctx))
	defer client.Stop(ctx)
	r := <-results

	it, err := admin.Get(ctx, pool, lease.JobRuns, e.ID)
	must(err)
	fmt.Println(r.Kind, it.Status, "attempts", it.Attempts)
	fmt.Println("runs again in about", time.Until(it.RunAt).Round(time.Minute))
	// Output:
	// retried ready attempts 1
	// runs again in about 1h0m0s
}

// Config.RetryPolicy sets the retry delay of every kind of work whose
// handler does not choose one.
func ExampleRetryPolicy() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()

	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(context.Context, *workq.Job[EmailArgs]) error {
		return errors.New("smtp: try later")
	}))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers,
		// Linear: 10 minutes per attempt made.
		RetryPolicy: func(attempt int, _ error) time.Duration { return time.Duration(attempt) * 10 * time.Minute }})
	must(err)
	results, _ := client.Subscribe(workq.EventRetried)
	e, err := client.Enqueue(ctx, EmailArgs{To: "ada@example.com"}, nil)
	must(err)
	must(client.Start(ctx))
	defer client.Stop(ctx)
	<-results

	it, err := admin.Get(ctx, pool, lease.JobRuns, e.ID)
	must(err)
	fmt.Println("runs again in about", time.Until(it.RunAt).Round(time.Minute))
	// Output: runs again in about 10m0s
}

// ReportArgs are the args of a job that must not run twice at once.
type ReportArgs struct {
	Day string `json:"day"`
}

func (ReportArgs) Kind() string { return "report.build" }

// EnqueueOpts puts every report on its own queue.
func (ReportArgs) EnqueueOpts() workq.EnqueueOpts { return workq.EnqueueOpts{Queue: "reports"} }

// Config.Queues names the job queues a Client works and how many handlers
// of each run at once (River's shape): here reports run one at a time
// while the default queue runs up to 100.
func ExampleQueueConfig() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()

	var running, peak atomic.Int32
	done := make(chan struct{}, 5)
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(context.Context, *workq.Job[ReportArgs]) error {
		n := running.Add(1)
		if n > peak.Load() {
			peak.Store(n) // one at a time: no race to lose
		}
		time.Sleep(10 * time.Millisecond)
		running.Add(-1)
		done <- struct{}{}
		return nil
	}))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers, Queues: map[string]workq.QueueConfig{
		"default": {MaxWorkers: 100},
		"reports": {MaxWorkers: 1},
	}})
	must(err)
	for _, day := range []string{"mon", "tue", "wed", "thu", "fri"} {
		_, err := client.Enqueue(ctx, ReportArgs{Day: day}, nil)
		must(err)
	}
	must(client.Start(ctx))
	defer client.Stop(ctx)
	for range 5 {
		<-done
	}
	fmt.Println("reports at once, at most:", peak.Load())
	// Output: reports at once, at most: 1
}

// Enqueue middleware sees every job before it is written: it can set
// options, or refuse (and nothing is written).
func ExampleEnqueueMiddleware() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()

	tenantQueues := func(ctx context.Context, jobs []*workq.EnqueueParams,
		next func(context.Context) ([]workq.Enqueued, error)) ([]workq.Enqueued, error) {
		for _, j := range jobs {
			if j.Args.Kind() == "email.send" && j.Opts.Queue == "" {
				j.Opts.Queue = "mail" // a routing rule kept in one place
			}
			if j.Opts.Priority > 10 {
				return nil, fmt.Errorf("%s: priority %d is reserved", j.Args.Kind(), j.Opts.Priority)
			}
		}
		return next(ctx)
	}
	client, err := workq.NewClient(pool, workq.Config{EnqueueMiddleware: []workq.EnqueueMiddleware{tenantQueues}})
	must(err)

	e, err := client.Enqueue(ctx, EmailArgs{To: "ada@example.com"}, nil)
	must(err)
	it, err := admin.Get(ctx, pool, lease.JobRuns, e.ID)
	must(err)
	fmt.Println("queue:", it.Queue)
	_, err = client.Enqueue(ctx, EmailArgs{To: "bob@example.com"}, &workq.EnqueueOpts{Priority: 99})
	fmt.Println("refused:", err)
	// Output:
	// queue: mail
	// refused: email.send: priority 99 is reserved
}

// Work middleware runs around every handler, of jobs, outbox and inbox
// messages and timers alike: here it logs each attempt and turns a panic
// into a permanent failure.
func ExampleWorkMiddleware() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()

	logged := make(chan string, 1)
	logAttempt := func(ctx context.Context, info workq.WorkInfo, next func(context.Context) error) error {
		err := next(ctx)
		logged <- fmt.Sprintf("%s %s attempt %d: %v", info.Table, info.Kind+info.Topic, info.Attempt, err)
		return err
	}
	recoverPanic := func(ctx context.Context, _ workq.WorkInfo, next func(context.Context) error) (err error) {
		defer func() {
			if v := recover(); v != nil {
				err = workq.Permanent(fmt.Errorf("panic: %v", v))
			}
		}()
		return next(ctx)
	}
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(context.Context, *workq.Job[EmailArgs]) error {
		panic("template missing")
	}))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers,
		// The first is the outermost: logAttempt sees what recoverPanic made.
		WorkMiddleware: []workq.WorkMiddleware{logAttempt, recoverPanic}})
	must(err)
	_, err = client.Enqueue(ctx, EmailArgs{To: "ada@example.com"}, nil)
	must(err)
	must(client.Start(ctx))
	defer client.Stop(ctx)
	fmt.Println(<-logged)
	// Output: job_runs email.send attempt 1: permanent: panic: template missing
}
