package outbox_test

import (
	"context"
	"fmt"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/outbox"
)

// OrderUpdated is the messages' payload; handlers get it decoded.
type OrderUpdated struct {
	Version int `json:"version"`
}

// Write messages in the same transaction as the change they announce (they
// exist if and only if it commits), and relay them to a handler per topic.
// Messages of one partition key arrive one at a time, in write order.
func Example() {
	pool, done := testdb.ExamplePool()
	defer done()
	ctx := context.Background()

	got := make(chan int)
	workers := workq.NewWorkers()
	err := workq.HandleOutbox(workers, "order.updated", func(ctx context.Context, m *workq.Message[OrderUpdated]) error {
		got <- m.Payload.Version // e.g. POST it to a webhook (package publish), publish it to a broker
		return nil
	}, outbox.TopicOptions{OnFinalFailure: outbox.Block})
	if err != nil {
		panic(err)
	}
	client, err := workq.NewClient(pool, workq.Config{Workers: workers})
	if err != nil {
		panic(err)
	}

	tx, err := pool.Begin(ctx)
	if err != nil {
		panic(err)
	}
	defer tx.Rollback(ctx)
	// ... the business change, on tx ...
	var msgs []outbox.Message
	for i := 1; i <= 3; i++ {
		msgs = append(msgs, outbox.Message{Topic: "order.updated", PartitionKey: "order-7", Payload: OrderUpdated{Version: i}})
	}
	if _, err := client.SendManyTx(ctx, tx, msgs); err != nil {
		panic(err)
	}
	if err := tx.Commit(ctx); err != nil {
		panic(err)
	}

	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx)
	for range 3 {
		fmt.Println("version", <-got)
	}
	// Output:
	// version 1
	// version 2
	// version 3
}
