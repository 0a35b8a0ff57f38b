package workq_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
)

// MonthlyReportArgs are the arguments of a long job.
type MonthlyReportArgs struct {
	Month string `json:"month"`
}

func (MonthlyReportArgs) Kind() string { return "report.monthly" }

// Cancel stops a job: one that has not started never runs, and a running
// one's handler sees its context cancelled with cause ErrCancelled, in
// whichever process runs it; the job ends cancelled.
func ExampleClient_Cancel() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()

	started, stopped := make(chan struct{}), make(chan error, 1)
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[MonthlyReportArgs]) error {
		close(started)
		<-ctx.Done() // a long computation that watches its context
		stopped <- context.Cause(ctx)
		return ctx.Err() // whatever it returns, the job ends cancelled
	}))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers})
	if err != nil {
		panic(err)
	}
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx)

	job, err := client.Enqueue(ctx, MonthlyReportArgs{Month: "2025-01"}, nil)
	if err != nil {
		panic(err)
	}
	<-started
	res, err := client.Cancel(ctx, job.Ref(), nil)
	fmt.Println(res, err)
	fmt.Println("handler stopped by cancel:", errors.Is(<-stopped, workq.ErrCancelled))

	// A job that has not started is cancelled at once.
	later, err := client.Enqueue(ctx, MonthlyReportArgs{Month: "2025-02"}, &workq.EnqueueOpts{Queue: "reports"})
	if err != nil {
		panic(err)
	}
	fmt.Println(client.Cancel(ctx, later.Ref(), nil))
	// Cancelling it again changes nothing.
	_, err = client.Cancel(ctx, later.Ref(), nil)
	fmt.Println(errors.Is(err, workq.ErrFinished), err)
	// Output:
	// cancel_requested <nil>
	// handler stopped by cancel: true
	// cancelled <nil>
	// true workq: job_runs 2 already finished (cancelled)
}
