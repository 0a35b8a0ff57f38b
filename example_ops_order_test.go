package workq_test

import (
	"context"
	"fmt"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
)

// OldestFirst lists the oldest items first (River's OrderBy with
// SortOrderAsc); the cursor goes on up, across every shard of a sharded
// Client, and an item written meanwhile comes on a later page.
func ExampleListOrder() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	client, err := workq.NewClient(pool, workq.Config{})
	if err != nil {
		panic(err)
	}
	for _, who := range []string{"ada", "bob", "cy"} {
		if _, err := client.Enqueue(ctx, BillArgs{Customer: who}, &workq.EnqueueOpts{Queue: "billing"}); err != nil {
			panic(err)
		}
	}
	p := workq.ListParams{Queue: "billing", Order: workq.OldestFirst, Limit: 2}
	for {
		page, err := client.List(ctx, p)
		if err != nil {
			panic(err)
		}
		for _, it := range page.Items {
			fmt.Println(it.ID, string(it.Payload))
		}
		if page.Next == "" {
			break
		}
		p.Cursor = page.Next
	}
	// Output:
	// 1 {"customer": "ada"}
	// 2 {"customer": "bob"}
	// 3 {"customer": "cy"}
}
