package workq_test

import (
	"context"
	"fmt"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/inbox"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/timers"
)

// EmailArgs are the arguments of a typed job: their Kind picks the worker,
// their JSON is the payload.
type EmailArgs struct {
	To string `json:"to"`
}

func (EmailArgs) Kind() string { return "email.send" }

// A Client enqueues typed jobs and works them with the workers added for
// their kind; Stop drains in-flight work within a bound.
func Example() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()

	sent := make(chan string, 1)
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[EmailArgs]) error {
		sent <- job.Args.To
		return nil // done; an error retries with backoff, workq.Permanent(err) fails at once
	}))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers})
	if err != nil {
		panic(err)
	}
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx)

	// In the caller's transaction: the job exists if and only if it commits.
	tx, err := pool.Begin(ctx)
	if err != nil {
		panic(err)
	}
	if _, err := client.EnqueueTx(ctx, tx, EmailArgs{To: "ada@example.com"}, nil); err != nil {
		panic(err)
	}
	if err := tx.Commit(ctx); err != nil {
		panic(err)
	}
	fmt.Println("sent to", <-sent)
	// Output: sent to ada@example.com
}

// OrderPaid is the payload of an outbox message, an inbox message and a
// timer alike here.
type OrderPaid struct {
	Order int `json:"order"`
}

// The outbox, the inbox and timers have typed handlers by topic, on the
// same runtime as jobs.
func Example_fourKinds() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()

	seen := make(chan string, 3)
	workers := workq.NewWorkers()
	record := func(kind string) func(context.Context, *workq.Message[OrderPaid]) error {
		return func(_ context.Context, m *workq.Message[OrderPaid]) error {
			seen <- fmt.Sprintf("%s %s order %d", kind, m.Topic, m.Payload.Order)
			return nil
		}
	}
	must(workq.HandleOutbox(workers, "orders.paid", record("outbox")))
	must(workq.HandleInbox(workers, "payments.settled", record("inbox")))
	must(workq.HandleTimer(workers, "orders.expire", record("timer")))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers})
	must(err)
	must(client.Start(ctx))
	defer client.Stop(ctx)

	tx, err := pool.Begin(ctx)
	must(err)
	// ... the business write, then the message, in one transaction:
	_, err = client.SendTx(ctx, tx, outbox.Message{Topic: "orders.paid", PartitionKey: "order-1", Payload: OrderPaid{1}})
	must(err)
	must(tx.Commit(ctx))
	fmt.Println(<-seen)

	_, err = client.Receive(ctx, inbox.Message{Source: "psp", MessageID: "evt-7", Topic: "payments.settled", Payload: OrderPaid{2}})
	must(err)
	fmt.Println(<-seen)

	_, err = client.ScheduleTimer(ctx, timers.Timer{Topic: "orders.expire", Delay: 10 * time.Millisecond, Payload: OrderPaid{3}})
	must(err)
	fmt.Println(<-seen)
	// Output:
	// outbox orders.paid order 1
	// inbox payments.settled order 2
	// timer orders.expire order 3
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}
