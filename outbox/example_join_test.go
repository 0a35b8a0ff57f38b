package outbox_test

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/outbox"
)

// A fan-in join: three member messages written in the transaction that
// starts the join; when the relay has delivered all three, the join writes
// its on-complete message into the outbox, exactly once.
func ExampleStartJoin() {
	url, drop, err := testdb.NewDatabase()
	if err != nil {
		panic(err)
	}
	defer func() { _ = drop() }()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		panic(err)
	}
	defer pool.Close()

	tx, err := pool.Begin(ctx)
	if err != nil {
		panic(err)
	}
	j, err := outbox.StartJoin(ctx, tx, outbox.JoinSpec{
		Expected:        3,
		OnComplete:      outbox.JoinMessage{Topic: "order.packed", Payload: map[string]any{"order": 42}},
		OnFail:          &outbox.JoinMessage{Topic: "order.stuck", Payload: map[string]any{"order": 42}},
		OnMemberFailure: outbox.FailFast,
		Timeout:         time.Hour,
	})
	if err != nil {
		panic(err)
	}
	// The members: outbox messages carrying the join's id (the outbox write
	// API sets it from Message.JoinID; plain SQL here).
	if _, err := tx.Exec(ctx, `insert into workq.outbox (topic, payload, join_id)
		select 'pick.item', jsonb_build_object('item', i), $1 from generate_series(1, 3) i`, j.ID); err != nil {
		panic(err)
	}
	if err := tx.Commit(ctx); err != nil {
		panic(err)
	}

	// The relay delivers the members (here by hand through the lease engine).
	e := lease.New(pool, lease.Outbox)
	c, err := e.Claim(ctx, lease.ClaimParams{Queue: "default", Max: 10, Lease: time.Minute, WorkerID: "example"})
	if err != nil {
		panic(err)
	}
	var done []lease.Completion
	for _, it := range c.Items {
		done = append(done, lease.Completion{ID: it.ID, Token: c.Token, Outcome: lease.Done})
	}
	if _, err := e.Complete(ctx, done); err != nil {
		panic(err)
	}

	j, err = outbox.GetJoin(ctx, pool, j.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println("join:", j.Status, j.Completed, "of", j.Expected, "members done")
	var topic string
	if err := pool.QueryRow(ctx, `select topic from workq.outbox where message_id = $1`, j.OutcomeMessageID).Scan(&topic); err != nil {
		panic(err)
	}
	fmt.Println("outcome message:", topic)
	// Output:
	// join: completed 3 of 3 members done
	// outcome message: order.packed
}
