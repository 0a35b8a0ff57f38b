package workq_test

import (
	"context"
	"fmt"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
)

// HourlyReportArgs are the arguments of an hourly report.
type HourlyReportArgs struct {
	Account int `json:"account"`
}

func (HourlyReportArgs) Kind() string { return "report.hourly" }

// Unique jobs: once per hour per account, also after the hour's job has
// finished. A duplicate returns the run that holds the key.
func ExampleUniqueOpts() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	client, err := workq.NewClient(pool, workq.Config{})
	if err != nil {
		panic(err)
	}
	opts := &workq.EnqueueOpts{Unique: workq.UniqueOpts{ByArgs: true, ByPeriod: time.Hour}}
	first, err := client.Enqueue(ctx, HourlyReportArgs{Account: 7}, opts)
	if err != nil {
		panic(err)
	}
	again, err := client.Enqueue(ctx, HourlyReportArgs{Account: 7}, opts)
	if err != nil {
		panic(err)
	}
	other, err := client.Enqueue(ctx, HourlyReportArgs{Account: 8}, opts)
	if err != nil {
		panic(err)
	}
	fmt.Println("again is a duplicate of the first:", again.Duplicate && again.ID == first.ID)
	fmt.Println("another account is new:", !other.Duplicate)
	// Output:
	// again is a duplicate of the first: true
	// another account is new: true
}

// Metadata set at enqueue reaches the handler (and the HTTP API and the
// dashboard's job page).
func ExampleEnqueueOpts_metadata() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	tenants := make(chan string, 1)
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(_ context.Context, job *workq.Job[EmailArgs]) error {
		tenants <- job.Metadata["tenant"]
		return nil
	}))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers})
	if err != nil {
		panic(err)
	}
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx)
	if _, err := client.Enqueue(ctx, EmailArgs{To: "ada@example.com"},
		&workq.EnqueueOpts{Metadata: map[string]string{"tenant": "acme"}}); err != nil {
		panic(err)
	}
	fmt.Println("tenant", <-tenants)
	// Output: tenant acme
}
