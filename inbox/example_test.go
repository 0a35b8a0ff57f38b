package inbox_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/workq/workq"
	"github.com/workq/workq/inbox"
	"github.com/workq/workq/internal/testdb"
)

// Receive a message inside the consumer's own transaction: the receipt
// commits with the consumer's writes, and a redelivery is recognised as a
// duplicate. Acknowledge the broker only after the commit.
func ExampleReceived() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	client, err := workq.NewClient(pool, workq.Config{}) // receives only
	if err != nil {
		panic(err)
	}

	deliver := func(payload string) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			panic(err)
		}
		defer tx.Rollback(ctx)
		r, err := client.ReceiveTx(ctx, tx, inbox.Message{
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
			fmt.Println("new, status", r.Status)
		}
		if err := tx.Commit(ctx); err != nil {
			panic(err)
		}
	}
	deliver(`{"amount": 10}`)
	deliver(`{ "amount" : 10 }`) // the same JSON value: a redelivery
	deliver(`{"amount": 99}`)
	// Output:
	// new, status ready
	// duplicate, processed already: false
	// conflict: same id, another payload; nothing changed
}

// Settled is a payment event's payload.
type Settled struct {
	Amount int `json:"amount"`
}

// Received messages are routed by topic to handlers; a message without a
// topic (or with a topic without a handler) goes to the default handler
// ("").
func Example() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()

	done := make(chan string, 2)
	workers := workq.NewWorkers()
	err := errors.Join(
		workq.HandleInbox(workers, "payment.settled", func(ctx context.Context, m *workq.Message[Settled]) error {
			done <- fmt.Sprintf("%s/%s settled %d", m.Source, m.MessageID, m.Payload.Amount)
			return nil // processed; an error retries with backoff, until the message is dead
		}),
		workq.HandleInbox(workers, "", func(ctx context.Context, m *workq.Message[map[string]any]) error {
			done <- fmt.Sprintf("%s/%s: no handler for topic %q", m.Source, m.MessageID, m.Topic)
			return nil
		}),
	)
	if err != nil {
		panic(err)
	}
	client, err := workq.NewClient(pool, workq.Config{Workers: workers})
	if err != nil {
		panic(err)
	}
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx)

	if _, err := client.Receive(ctx, inbox.Message{Source: "payments", MessageID: "evt-1", Topic: "payment.settled", Payload: Settled{Amount: 10}}); err != nil {
		panic(err)
	}
	fmt.Println(<-done)
	if _, err := client.Receive(ctx, inbox.Message{Source: "payments", MessageID: "evt-2"}); err != nil {
		panic(err)
	}
	fmt.Println(<-done)
	// Output:
	// payments/evt-1 settled 10
	// payments/evt-2: no handler for topic ""
}
