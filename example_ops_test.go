package workq_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/outbox"
)

// BillArgs are the arguments of the operator examples' job.
type BillArgs struct {
	Customer string `json:"customer"`
}

func (BillArgs) Kind() string { return "bill.send" }

// Get reads one item of any table, payload included; a ref that names no
// item is ErrNotFound.
func ExampleClient_Get() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	client, err := workq.NewClient(pool, workq.Config{})
	if err != nil {
		panic(err)
	}
	res, err := client.Enqueue(ctx, BillArgs{Customer: "ada"}, &workq.EnqueueOpts{Queue: "billing"})
	if err != nil {
		panic(err)
	}
	it, err := client.Get(ctx, res.Ref())
	if err != nil {
		panic(err)
	}
	fmt.Println(it.Table, it.ID, it.Queue, it.Kind, it.Status, string(it.Payload))

	sent, err := client.Send(ctx, outbox.Message{Topic: "invoice.sent", Payload: map[string]string{"customer": "ada"}})
	if err != nil {
		panic(err)
	}
	msg, err := client.Get(ctx, workq.ItemRef{Table: workq.TableOutbox, ID: sent.ID})
	fmt.Println(msg.Table, msg.Kind, string(msg.Payload), err)

	_, err = client.Get(ctx, workq.JobRef(12345))
	fmt.Println(errors.Is(err, workq.ErrNotFound))
	// Output:
	// job_runs 1 billing bill.send ready {"customer": "ada"}
	// outbox invoice.sent {"customer": "ada"} <nil>
	// true
}

// List pages through the items of one table, newest first, with their
// payloads; the filters narrow it (states, queue, kind, metadata, time, an
// error text), and Next is the cursor of the next page.
func ExampleClient_List() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	client, err := workq.NewClient(pool, workq.Config{})
	if err != nil {
		panic(err)
	}
	for _, c := range []string{"ada", "bob", "cy"} {
		if _, err := client.Enqueue(ctx, BillArgs{Customer: c}, &workq.EnqueueOpts{
			Queue: "billing", Metadata: map[string]string{"region": "eu"}}); err != nil {
			panic(err)
		}
	}
	p := workq.ListParams{Table: workq.TableJobRuns, Queue: "billing", States: []string{workq.StateReady},
		Metadata: map[string]string{"region": "eu"}, Limit: 2}
	for page := 1; ; page++ {
		res, err := client.List(ctx, p)
		if err != nil {
			panic(err)
		}
		for _, it := range res.Items {
			fmt.Println(page, it.ID, string(it.Payload))
		}
		if res.Next == "" {
			break
		}
		p.Cursor = res.Next
	}
	// Output:
	// 1 3 {"customer": "cy"}
	// 1 2 {"customer": "bob"}
	// 2 1 {"customer": "ada"}
}

// Retry puts a failed (or cancelled) item back to ready with its attempts
// reset; the archive records who did it and why. An item in another state
// is left alone: ErrWrongState.
func ExampleClient_Retry() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(context.Context, *workq.Job[BillArgs]) error {
		return workq.Permanent(errors.New("smtp: connection refused"))
	}))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers})
	if err != nil {
		panic(err)
	}
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	res, err := client.Enqueue(ctx, BillArgs{Customer: "ada"}, nil)
	if err != nil {
		panic(err)
	}
	for it, _ := client.Get(ctx, res.Ref()); it.Status != workq.StateFailed; it, _ = client.Get(ctx, res.Ref()) {
		time.Sleep(20 * time.Millisecond) // until its one attempt has failed
	}
	if err := client.Stop(ctx); err != nil { // the mail server is fixed while nothing runs
		panic(err)
	}

	err = client.Retry(ctx, res.Ref(), &workq.ActionOpts{Actor: "ops:alice", Reason: "smtp fixed"})
	fmt.Println(err)
	it, _ := client.Get(ctx, res.Ref())
	fmt.Println(it.Status, it.Attempts)
	atts, _ := client.Attempts(ctx, res.Ref())
	for _, a := range atts {
		fmt.Println(a.Outcome, a.Worker != "", a.Error)
	}
	err = client.Retry(ctx, res.Ref(), nil)
	fmt.Println(errors.Is(err, workq.ErrWrongState))
	// Output:
	// <nil>
	// ready 0
	// failed true permanent: smtp: connection refused
	// revived true smtp fixed
	// true
}

// Delete deletes a finished item (done, failed or cancelled); one still
// to run is cancelled first.
func ExampleClient_Delete() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	client, err := workq.NewClient(pool, workq.Config{})
	if err != nil {
		panic(err)
	}
	res, err := client.Enqueue(ctx, BillArgs{Customer: "ada"}, &workq.EnqueueOpts{Delay: time.Hour})
	if err != nil {
		panic(err)
	}
	err = client.Delete(ctx, res.Ref())
	fmt.Println(errors.Is(err, workq.ErrWrongState), err)

	if _, err := client.Cancel(ctx, res.Ref(), &workq.ActionOpts{Reason: "customer left"}); err != nil {
		panic(err)
	}
	fmt.Println(client.Delete(ctx, res.Ref()))
	_, err = client.Get(ctx, res.Ref())
	fmt.Println(errors.Is(err, workq.ErrNotFound))
	// Output:
	// true workq: delete default:job_runs/1: it is ready; delete takes finished (done, failed or cancelled) items
	// <nil>
	// true
}

// PauseQueue stops every worker of every process from claiming a queue's
// items (of one table, or of all four) until ResumeQueue; ListQueues shows
// it with the counts.
func ExampleClient_PauseQueue() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	client, err := workq.NewClient(pool, workq.Config{})
	if err != nil {
		panic(err)
	}
	if _, err := client.Enqueue(ctx, BillArgs{Customer: "ada"}, &workq.EnqueueOpts{Queue: "billing"}); err != nil {
		panic(err)
	}
	billing := workq.QueueRef{Table: workq.TableJobRuns, Queue: "billing"}
	changed, err := client.PauseQueue(ctx, billing, &workq.ActionOpts{Actor: "ops:alice", Reason: "invoice template broken"})
	fmt.Println(changed, err)
	qs, err := client.ListQueues(ctx)
	if err != nil {
		panic(err)
	}
	for _, q := range qs {
		fmt.Println(q.Table, q.Queue, q.Ready, q.Paused, q.PausedBy, q.PauseReason)
	}
	fmt.Println(client.ResumeQueue(ctx, billing))
	// Output:
	// true <nil>
	// job_runs billing 1 true ops:alice invoice template broken
	// true <nil>
}
