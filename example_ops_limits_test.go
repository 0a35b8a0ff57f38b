package workq_test

import (
	"context"
	"fmt"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
)

// ListQueueLimits lists every global limit W with when it was set.
func ExampleClient_ListQueueLimits() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	client, err := workq.NewClient(pool, workq.Config{})
	if err != nil {
		panic(err)
	}
	if err := client.SetQueueLimit(ctx, workq.QueueRef{Table: workq.TableJobRuns, Queue: "emails"}, 5); err != nil {
		panic(err)
	}
	limits, err := client.ListQueueLimits(ctx)
	if err != nil {
		panic(err)
	}
	for _, l := range limits {
		fmt.Println(l.Table, l.Queue, l.W, !l.UpdatedAt.IsZero())
	}
	// Output:
	// job_runs emails 5 true
}
