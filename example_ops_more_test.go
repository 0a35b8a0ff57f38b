package workq_test

import (
	"context"
	"fmt"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
)

// CancelMatching cancels every ready item matching a filter, in batches,
// up to a cap; Next goes on from where a capped call stopped.
func ExampleClient_CancelMatching() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	client, err := workq.NewClient(pool, workq.Config{})
	if err != nil {
		panic(err)
	}
	for _, who := range []string{"ada", "bob", "cy"} {
		if _, err := client.Enqueue(ctx, BillArgs{Customer: who}, &workq.EnqueueOpts{Queue: "bills"}); err != nil {
			panic(err)
		}
	}
	p := workq.ListParams{Table: workq.TableJobRuns, Queue: "bills"}
	res, err := client.CancelMatching(ctx, p, 2, &workq.ActionOpts{Actor: "ops:alice", Reason: "bad batch"})
	fmt.Println(res.Applied, res.Next != "", err)
	p.Cursor = res.Next
	res, err = client.CancelMatching(ctx, p, 0, &workq.ActionOpts{Actor: "ops:alice", Reason: "bad batch"})
	fmt.Println(res.Applied, res.Next != "", err)
	// Output:
	// 2 true <nil>
	// 1 false <nil>
}
