package workq_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
)

// ReceiptArgs are the args of the job a payment's handler enqueues.
type ReceiptArgs struct {
	Order int `json:"order"`
}

func (ReceiptArgs) Kind() string { return "receipt.send" }

// ChargeArgs are the args of a payment job.
type ChargeArgs struct {
	Order int `json:"order"`
}

func (ChargeArgs) Kind() string { return "order.charge" }

// Subscribe returns a channel of what happens to the work a Client runs:
// here every attempt's outcome, with its item.
func ExampleClient_Subscribe() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()

	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[EmailArgs]) error {
		if job.Args.To == "" {
			return workq.Permanent(errors.New("no recipient"))
		}
		return nil
	}))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers})
	must(err)
	// Subscribe before Start to see everything; Stop closes the channel.
	events, unsubscribe := client.Subscribe(workq.EventCompleted, workq.EventFailed)
	defer unsubscribe()

	_, err = client.Enqueue(ctx, EmailArgs{To: "ada@example.com"}, nil)
	must(err)
	must(client.Start(ctx))
	defer client.Stop(ctx)
	ev := <-events
	fmt.Println(ev.Kind, ev.Work.Table, ev.Work.Kind, "attempt", ev.Work.Attempt)

	_, err = client.Enqueue(ctx, EmailArgs{}, nil)
	must(err)
	ev = <-events
	fmt.Println(ev.Kind, ev.Work.Kind+":", ev.Error)
	// Output:
	// completed job_runs email.send attempt 1
	// failed email.send: permanent: no recipient
}

// A handler reaches the Client that runs it through its context, and
// enqueues the next step in its own transaction, which also completes
// its job: the receipt job exists if and only if the charge is done.
func ExampleClientFromContext() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()

	receipts := make(chan int, 1)
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[ChargeArgs]) error {
		client := workq.ClientFromContext(ctx)
		return pgx.BeginFunc(ctx, client.Pool(), func(tx pgx.Tx) error {
			// ... the charge's own writes in tx ...
			if _, err := client.EnqueueTx(ctx, tx, ReceiptArgs{Order: job.Args.Order}, nil); err != nil {
				return err
			}
			return job.CompleteTx(ctx, tx)
		})
	}))
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[ReceiptArgs]) error {
		receipts <- job.Args.Order
		return nil
	}))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers})
	must(err)
	_, err = client.Enqueue(ctx, ChargeArgs{Order: 42}, nil)
	must(err)
	must(client.Start(ctx))
	defer client.Stop(ctx)
	fmt.Println("receipt for order", <-receipts)

	_, err = workq.ClientFromContextSafely(ctx) // not a handler's context
	fmt.Println(errors.Is(err, workq.ErrNoClient))
	// Output:
	// receipt for order 42
	// true
}

// A Client with job workers refuses to enqueue a kind none of them
// works, instead of leaving it to be retried until it fails; a producer
// (no job workers) or SkipUnknownKindCheck enqueues any kind.
func ExampleErrUnknownKind() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()

	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(context.Context, *workq.Job[EmailArgs]) error { return nil }))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers})
	must(err)
	_, err = client.Enqueue(ctx, ReceiptArgs{Order: 1}, nil)
	fmt.Println(errors.Is(err, workq.ErrUnknownKind), errors.Is(err, workq.ErrInvalid))
	fmt.Println(err)

	producer, err := workq.NewClient(pool, workq.Config{})
	must(err)
	_, err = producer.Enqueue(ctx, ReceiptArgs{Order: 1}, nil)
	fmt.Println("producer:", err)
	// Output:
	// true true
	// invalid request: kind "receipt.send" has no worker in this Client (unknown job kind): add its worker, or set Config.SkipUnknownKindCheck
	// producer: <nil>
}
