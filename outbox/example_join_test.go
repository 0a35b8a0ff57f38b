package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/outbox"
)

// A fan-in join: three member messages written in the transaction that
// starts the join; when the relay has delivered all three, the join writes
// its on-complete message into the outbox, exactly once, and the relay
// delivers it too.
func ExampleJoinSpec() {
	pool, done := testdb.ExamplePool()
	defer done()
	ctx := context.Background()

	packed := make(chan string, 1)
	workers := workq.NewWorkers()
	err := workq.HandleOutbox(workers, "pick.item", func(ctx context.Context, m *workq.Message[map[string]int]) error {
		return nil // the member's work
	})
	if err != nil {
		panic(err)
	}
	err = workq.HandleOutbox(workers, "order.packed", func(ctx context.Context, m *workq.Message[map[string]int]) error {
		// The headers: the spec's, plus the join's id and its outcome.
		var headers map[string]string
		if err := json.Unmarshal(m.Headers, &headers); err != nil {
			return workq.Permanent(err)
		}
		packed <- fmt.Sprintf("order %d packed (%s)", m.Payload["order"], headers[outbox.HeaderJoinOutcome])
		return nil
	})
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
	j, err := client.StartJoinTx(ctx, tx, outbox.JoinSpec{
		Expected:        3,
		OnComplete:      outbox.JoinMessage{Topic: "order.packed", Payload: map[string]any{"order": 42}},
		OnFail:          &outbox.JoinMessage{Topic: "order.stuck", Payload: map[string]any{"order": 42}},
		OnMemberFailure: outbox.FailFast,
		Timeout:         time.Hour,
	})
	if err != nil {
		panic(err)
	}
	for i := 1; i <= 3; i++ {
		if _, err := client.SendTx(ctx, tx, outbox.Message{Topic: "pick.item", JoinID: j.ID, Payload: map[string]int{"item": i}}); err != nil {
			panic(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		panic(err)
	}

	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx)
	fmt.Println(<-packed)
	j, err = client.GetJoin(ctx, j.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println("join:", j.Status, j.Completed, "of", j.Expected, "members done")
	// Output:
	// order 42 packed (completed)
	// join: completed 3 of 3 members done
}
