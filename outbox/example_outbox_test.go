package outbox_test

import (
	"context"
	"fmt"
	"time"

	"github.com/workq/workq/internal/config"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/worker"
	"github.com/workq/workq/outbox"
)

// Write a message in the same transaction as the change it announces: it
// exists if and only if the transaction commits.
func ExampleClient_Send() {
	pool, done := testdb.ExamplePool()
	defer done()
	ctx := context.Background()
	client := outbox.NewClient(outbox.ClientOptions{})

	tx, err := pool.Begin(ctx)
	if err != nil {
		panic(err)
	}
	defer tx.Rollback(ctx)
	// ... the business change, on tx ...
	sent, err := client.Send(ctx, tx, outbox.Message{
		Topic:        "order.created",
		PartitionKey: "order-42", // messages of one order are delivered in order
		Payload:      map[string]any{"order": 42, "total": "19.90"},
		Headers:      map[string]string{"Content-Type": "application/json"},
	})
	if err != nil {
		panic(err)
	}
	if err := tx.Commit(ctx); err != nil {
		panic(err)
	}
	msg, err := outbox.Get(ctx, pool, sent.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println(msg.Topic, msg.PartitionKey, msg.Status, string(msg.Payload))
	// Output: order.created order-42 ready {"order": 42, "total": "19.90"}
}

// A relay is a worker source: it hands each message to its topic's handler.
// Messages of one partition key arrive one at a time, in write order.
func ExampleRelay() {
	pool, done := testdb.ExamplePool()
	defer done()
	ctx := context.Background()
	client := outbox.NewClient(outbox.ClientOptions{})
	var msgs []outbox.Message
	for i := 1; i <= 3; i++ {
		msgs = append(msgs, outbox.Message{Topic: "order.updated", PartitionKey: "order-7", Payload: map[string]int{"version": i}})
	}
	if _, err := client.SendMany(ctx, pool, msgs); err != nil {
		panic(err)
	}

	got := make(chan int)
	relay := outbox.NewRelay(outbox.RelayOptions{})
	err := relay.Handle("order.updated", func(ctx context.Context, job *worker.Job) error {
		var p struct{ Version int }
		if err := job.Decode(&p); err != nil {
			return err
		}
		got <- p.Version // e.g. POST it to a webhook, publish it to a broker
		return nil
	}, outbox.TopicOptions{OnFinalFailure: outbox.Block})
	if err != nil {
		panic(err)
	}
	cfg := config.Default()
	cfg.Poll = 50 * time.Millisecond
	w, err := worker.New(pool, cfg.Worker(), worker.Options{})
	if err != nil {
		panic(err)
	}
	if err := w.AddSource(relay.Source("default")); err != nil {
		panic(err)
	}
	if err := w.Start(ctx); err != nil {
		panic(err)
	}
	for range 3 {
		fmt.Println("version", <-got)
	}
	if err := w.Stop(ctx); err != nil {
		panic(err)
	}
	// Output:
	// version 1
	// version 2
	// version 3
}
