package workq_test

import (
	"context"
	"fmt"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
)

// WaitsFor says what flow control holds a ready item back with: here its
// kind is paused.
func ExampleClient_WaitsFor() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	client, err := workq.NewClient(pool, workq.Config{})
	if err != nil {
		panic(err)
	}
	job, err := client.Enqueue(ctx, OpsArgs{N: 1}, &workq.EnqueueOpts{Queue: "emails"})
	if err != nil {
		panic(err)
	}
	kind := workq.KindRef{Table: workq.TableJobRuns, Queue: "emails", Kind: OpsArgs{}.Kind()}
	if _, err := client.PauseKind(ctx, kind, &workq.ActionOpts{Actor: "ops:ann", Reason: "the relay is down"}); err != nil {
		panic(err)
	}
	waits, err := client.WaitsFor(ctx, job.Ref())
	if err != nil {
		panic(err)
	}
	fmt.Println(waits)
	if _, err := client.ResumeKind(ctx, kind); err != nil {
		panic(err)
	}
	waits, err = client.WaitsFor(ctx, job.Ref())
	if err != nil {
		panic(err)
	}
	fmt.Println(len(waits))
	// Output:
	// [kind ops.test paused by ops:ann]
	// 0
}
