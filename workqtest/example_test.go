package workqtest_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/workqtest"
)

type ChargeArgs struct {
	Order  int `json:"order"`
	Amount int `json:"amount"`
}

func (ChargeArgs) Kind() string { return "order.charge" }

type ReceiptArgs struct {
	Order int `json:"order"`
}

func (ReceiptArgs) Kind() string { return "order.receipt" }

// chargeWorker is the handler under test: it snoozes while the payment
// provider is down, and otherwise enqueues a receipt and sends an outbox
// message in its own transaction, completing the job in it too.
type chargeWorker struct {
	client       *workq.Client
	providerDown bool
}

func (w *chargeWorker) Work(ctx context.Context, job *workq.Job[ChargeArgs]) error {
	if w.providerDown {
		return workq.Snooze(30 * time.Second)
	}
	if job.Args.Amount <= 0 {
		return workq.Permanent(errors.New("nothing to charge"))
	}
	tx, err := w.client.Pool().Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := w.client.EnqueueTx(ctx, tx, ReceiptArgs{Order: job.Args.Order}, &workq.EnqueueOpts{Queue: "mail"}); err != nil {
		return err
	}
	if _, err := w.client.SendTx(ctx, tx, outbox.Message{Topic: "orders.charged", PartitionKey: fmt.Sprint("order-", job.Args.Order), Payload: job.Args}); err != nil {
		return err
	}
	if err := job.CompleteTx(ctx, tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// Work runs a handler once, inside the test's transaction, and reports the
// outcome, including a snooze's duration.
func ExampleWork() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	t := workqtest.PanicTB() // in a test: the *testing.T
	client, err := workq.NewClient(pool, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		panic(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		panic(err)
	}
	defer tx.Rollback(ctx) // the test leaves nothing behind

	res := workqtest.Work(ctx, t, client, tx, &chargeWorker{client: client, providerDown: true}, ChargeArgs{Order: 1, Amount: 5}, nil)
	fmt.Println(res.Outcome, res.Snooze, res.Status)
	res = workqtest.Work(ctx, t, client, tx, &chargeWorker{client: client}, ChargeArgs{Order: 2}, nil)
	fmt.Println(res.Outcome, res.Err, res.Status)
	// Output:
	// snoozed 30s ready
	// failed permanent: nothing to charge failed
}

// RequireEnqueued and RequireSent check what the code under test wrote;
// their failure lists what is there instead.
func ExampleRequireEnqueued() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	t := workqtest.PanicTB()
	client, err := workq.NewClient(pool, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		panic(err)
	}
	// On the pool: the handler writes in a transaction of its own.
	res := workqtest.Work(ctx, t, client, pool, &chargeWorker{client: client}, ChargeArgs{Order: 3, Amount: 9}, nil)
	fmt.Println(res.Outcome, res.CompletedInTx)

	receipt := workqtest.RequireEnqueued[ReceiptArgs](ctx, t, client, pool, &workqtest.Opts{Queue: "mail"})
	fmt.Println("receipt for order", receipt.Args.Order)
	msg := workqtest.RequireSent[ChargeArgs](ctx, t, client, pool, "orders.charged", nil)
	fmt.Println("outbox:", msg.Topic, msg.PartitionKey, msg.Payload.Amount, msg.MessageID != "")
	// Output:
	// done true
	// receipt for order 3
	// outbox: orders.charged order-3 9 true
}

// refundWorker retries a refund the provider rejected an hour later.
type refundWorker struct{}

func (refundWorker) Work(context.Context, *workq.Job[RefundArgs]) error {
	return errors.New("provider busy")
}

func (refundWorker) NextRetry(*workq.Job[RefundArgs]) time.Time { return time.Now().Add(time.Hour) }

type RefundArgs struct {
	Order int `json:"order"`
}

func (RefundArgs) Kind() string { return "order.refund" }

// Work runs the handler as the Client's worker would: its NextRetry (and
// Timeout), the Client's work middleware and retry policy. RetryAt is when
// a retried job runs again.
func ExampleWork_nextRetry() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	t := workqtest.PanicTB()
	client, err := workq.NewClient(pool, workq.Config{
		Maintenance: workq.MaintenanceConfig{Disabled: true},
		WorkMiddleware: []workq.WorkMiddleware{func(ctx context.Context, info workq.WorkInfo, next func(context.Context) error) error {
			fmt.Println("middleware runs", info.Kind, "attempt", info.Attempt)
			return next(ctx)
		}},
	})
	if err != nil {
		panic(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		panic(err)
	}
	defer tx.Rollback(ctx)

	res := workqtest.Work(ctx, t, client, tx, refundWorker{}, RefundArgs{Order: 4}, nil)
	fmt.Println(res.Outcome, res.Status, "again in", time.Until(res.RetryAt).Round(time.Minute))
	// Output:
	// middleware runs order.refund attempt 1
	// retry ready again in 1h0m0s
}

// syncWorker fails until its third attempt.
type syncWorker struct{}

type SyncArgs struct {
	Account int `json:"account"`
}

func (SyncArgs) Kind() string { return "account.sync" }

func (syncWorker) Work(_ context.Context, job *workq.Job[SyncArgs]) error {
	if job.Attempt < 3 {
		return fmt.Errorf("upstream busy (attempt %d)", job.Attempt)
	}
	return nil
}

// WithAttempt runs a later attempt of the job: "fails twice, then
// succeeds" is three calls, and an error on the last attempt fails the job.
func ExampleWithAttempt() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	t := workqtest.PanicTB()
	client, err := workq.NewClient(pool, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		panic(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		panic(err)
	}
	defer tx.Rollback(ctx)

	opts := &workq.EnqueueOpts{MaxAttempts: 3}
	for n := 1; n <= 3; n++ {
		res := workqtest.Work(ctx, t, client, tx, syncWorker{}, SyncArgs{Account: 1}, opts, workqtest.WithAttempt(n))
		fmt.Println("attempt", res.Job.Attempt, res.Outcome, res.Status)
	}
	res := workqtest.Work(ctx, t, client, tx, syncWorker{}, SyncArgs{Account: 2}, &workq.EnqueueOpts{MaxAttempts: 2}, workqtest.WithAttempt(2))
	fmt.Println("last attempt", res.Job.Attempt, res.Outcome, res.Status)
	// Output:
	// attempt 1 retry ready
	// attempt 2 retry ready
	// attempt 3 done done
	// last attempt 2 failed failed
}
