package workq_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/inbox"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/timers"
)

// The result of every write names its item, shard included, as the
// ItemRef the operator methods take: Enqueued.Ref, outbox.Sent.Ref,
// inbox.Received.Ref and timers.Scheduled.Ref; Item.Ref names an item
// Get or List returned.
func Example_refs() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	client, err := workq.NewClient(pool, workq.Config{})
	if err != nil {
		panic(err)
	}
	sent, err := client.Send(ctx, outbox.Message{Topic: "invoice.sent", Payload: map[string]string{"customer": "ada"}})
	if err != nil {
		panic(err)
	}
	got, err := client.Receive(ctx, inbox.Message{Source: "stripe", MessageID: "evt_1", Topic: "charge.paid", Payload: map[string]int{"cents": 500}})
	if err != nil {
		panic(err)
	}
	tm, err := client.ScheduleTimer(ctx, timers.Timer{Topic: "trial.ends", Delay: 14 * 24 * time.Hour, Payload: map[string]string{"customer": "ada"}})
	if err != nil {
		panic(err)
	}
	fmt.Println(sent.Ref(), got.Ref(), tm.Ref())

	if _, err := client.Cancel(ctx, tm.Ref(), &workq.ActionOpts{Reason: "customer upgraded"}); err != nil {
		panic(err)
	}
	it, err := client.Get(ctx, tm.Ref())
	if err != nil {
		panic(err)
	}
	fmt.Println(it.Ref() == tm.Ref(), it.Status)
	// Output:
	// default:outbox/1 default:inbox/1 default:timers/1
	// true cancelled
}

// A handler's Job (and Message) carries its attempt's RunID, the id the
// run archive, the logs and the runs directory know the attempt by, and
// the claim's LeaseVersion. ParseRunID reads the item and the lease
// version back from a run id, without the database.
func ExampleParseRunID() {
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[BillArgs]) error {
		job.Logger().Info("billing", "run_id", job.RunID, "lease_version", job.LeaseVersion)
		return nil
	}))

	ref, leaseVersion, err := workq.ParseRunID("00000000-0000-802a-8000-000000000003")
	fmt.Println(ref, leaseVersion, err)

	_, _, err = workq.ParseRunID("4f9e8b8c-7f0e-4a53-9d3e-1c2b3a4d5e6f") // a random UUID
	fmt.Println(errors.Is(err, workq.ErrInvalid))
	// Output:
	// job_runs/42 3 <nil>
	// true
}

// TimerNotifyWithin matches the poll of the workers of the timers: a
// Client that only schedules timers, for workers that poll every 10s,
// wakes them for every timer due within 10s.
func ExampleConfig_timerNotifyWithin() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	_, err := workq.NewClient(pool, workq.Config{TimerNotifyWithin: 10 * time.Second})
	fmt.Println(err)

	_, err = workq.NewClient(pool, workq.Config{TimerNotifyWithin: 48 * time.Hour})
	var ve *workq.ValidationError
	fmt.Println(errors.As(err, &ve) && ve.Field == "TimerNotifyWithin")
	// Output:
	// <nil>
	// true
}
