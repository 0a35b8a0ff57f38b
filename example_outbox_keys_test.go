package workq_test

import (
	"context"
	"fmt"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/outbox"
)

// OutboxKeys lists an outbox queue's partition keys with messages not yet
// delivered, each with the head message that holds its order.
func ExampleClient_OutboxKeys() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	client, err := workq.NewClient(pool, workq.Config{})
	if err != nil {
		panic(err)
	}
	for _, key := range []string{"order-2", "order-1", "order-2"} {
		if _, err := client.Send(ctx, outbox.Message{Topic: "order.event", PartitionKey: key}); err != nil {
			panic(err)
		}
	}
	keys, err := client.OutboxKeys(ctx, outbox.KeyQuery{})
	if err != nil {
		panic(err)
	}
	for _, k := range keys {
		fmt.Println(k.PartitionKey, k.HeadID, k.Status, k.Blocked)
	}
	// Output:
	// order-1 2 ready false
	// order-2 1 ready false
}
