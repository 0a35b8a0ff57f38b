package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/workq/workq/inbox"
	"github.com/workq/workq/internal/config"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/worker"
)

// Receive a message inside the consumer's own transaction: the receipt
// commits with the consumer's writes, and a redelivery is recognised as a
// duplicate. Acknowledge the broker only after the commit.
func ExampleClient_Receive() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	client := inbox.NewClient(inbox.ClientOptions{})

	deliver := func(payload string) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			panic(err)
		}
		defer tx.Rollback(ctx)
		r, err := client.Receive(ctx, tx, inbox.Message{
			Source: "payments", MessageID: "evt-42", Topic: "payment.settled", Payload: []byte(payload),
		})
		switch {
		case errors.Is(err, inbox.ErrConflict):
			fmt.Println("conflict: same id, another payload; nothing changed")
			return
		case err != nil:
			panic(err)
		case r.Duplicate:
			fmt.Println("duplicate, processed already:", r.Processed)
		default:
			fmt.Println("new")
		}
		if err := tx.Commit(ctx); err != nil {
			panic(err)
		}
	}
	deliver(`{"amount": 10}`)
	deliver(`{ "amount" : 10 }`) // the same JSON value: a redelivery
	deliver(`{"amount": 99}`)
	// Output:
	// new
	// duplicate, processed already: false
	// conflict: same id, another payload; nothing changed
}

// A Processor routes received messages by topic on the shared runtime; a
// message without a topic (or with a topic without a handler) goes to the
// default handler.
func ExampleProcessor() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()

	done := make(chan string, 2)
	p := inbox.NewProcessor()
	if err := p.Handle("payment.settled", func(ctx context.Context, j *worker.Job) error {
		var v struct{ Amount int }
		if err := j.Decode(&v); err != nil {
			return err
		}
		done <- fmt.Sprintf("%s/%s settled %d", j.Kind, j.MessageID, v.Amount)
		return nil
	}); err != nil {
		panic(err)
	}
	p.HandleDefault(func(ctx context.Context, j *worker.Job) error {
		done <- fmt.Sprintf("%s/%s: no handler for topic %q", j.Kind, j.MessageID, j.Topic)
		return nil
	})
	cfg := config.Default()
	cfg.Poll = 50 * time.Millisecond
	w, err := worker.New(pool, cfg.Worker(), worker.Options{})
	if err != nil {
		panic(err)
	}
	if err := w.AddSource(p.Source("default")); err != nil {
		panic(err)
	}
	if err := w.Start(ctx); err != nil {
		panic(err)
	}
	client := inbox.NewClient(inbox.ClientOptions{})
	if _, err := client.Receive(ctx, pool, inbox.Message{Source: "payments", MessageID: "evt-1", Topic: "payment.settled", Payload: map[string]int{"amount": 10}}); err != nil {
		panic(err)
	}
	fmt.Println(<-done)
	if _, err := client.Receive(ctx, pool, inbox.Message{Source: "payments", MessageID: "evt-2"}); err != nil {
		panic(err)
	}
	fmt.Println(<-done)
	if err := w.Stop(ctx); err != nil {
		panic(err)
	}
	// Output:
	// payments/evt-1 settled 10
	// payments/evt-2: no handler for topic ""
}
