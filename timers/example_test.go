package timers_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/timers"
)

// TrialExpired is the timer's payload; its handler gets it decoded.
type TrialExpired struct {
	Account string `json:"account"`
}

// Schedule a timer inside the transaction that writes the business change,
// and handle it with a workq.Client when it falls due.
func Example() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()

	fired := make(chan string, 1)
	workers := workq.NewWorkers()
	err := workq.HandleTimer(workers, "trial.expired", func(ctx context.Context, m *workq.Message[TrialExpired]) error {
		fired <- m.Payload.Account
		return nil // done; an error retries with backoff
	})
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

	tx, err := pool.Begin(ctx)
	if err != nil {
		panic(err)
	}
	// ... the caller's own writes in tx ...
	if _, err := client.ScheduleTimerTx(ctx, tx, timers.Timer{
		Topic: "trial.expired", Delay: 200 * time.Millisecond, Payload: TrialExpired{Account: "acme"},
	}); err != nil {
		panic(err)
	}
	if err := tx.Commit(ctx); err != nil { // the timer exists if and only if this commits
		panic(err)
	}
	fmt.Println("trial expired for", <-fired)
	// Output: trial expired for acme
}

// A timer can be cancelled while no worker has claimed it; a cancel is
// idempotent, and says why not otherwise.
func Example_cancel() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	client, err := workq.NewClient(pool, workq.Config{}) // enqueues only
	if err != nil {
		panic(err)
	}

	s, err := client.ScheduleTimer(ctx, timers.Timer{Topic: "reminder", Delay: time.Hour})
	if err != nil {
		panic(err)
	}
	fmt.Println(client.CancelTimer(ctx, s.ID))
	fmt.Println(client.CancelTimer(ctx, s.ID)) // idempotent
	err = client.CancelTimer(ctx, 12345)
	fmt.Println(errors.Is(err, timers.ErrNotFound), errors.Is(err, workq.ErrNotFound))
	// Output:
	// <nil>
	// <nil>
	// true true
}

// Many timers are written in one statement; a bad one rejects the batch
// and nothing is written.
func Example_scheduleMany() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	client, err := workq.NewClient(pool, workq.Config{})
	if err != nil {
		panic(err)
	}

	due := time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)
	out, err := client.ScheduleTimers(ctx, []timers.Timer{
		{Topic: "report", DueTime: due},
		{Topic: "report", DueTime: due.Add(24 * time.Hour)},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(len(out), out[0].DueTime.UTC(), out[1].DueTime.UTC())

	_, err = client.ScheduleTimers(ctx, []timers.Timer{{Topic: "report", DueTime: due}, {Topic: ""}})
	fmt.Println(errors.Is(err, workq.ErrInvalid))
	// Output:
	// 2 2030-01-01 09:00:00 +0000 UTC 2030-01-02 09:00:00 +0000 UTC
	// true
}
