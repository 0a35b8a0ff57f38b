package lease_test

import (
	"context"
	"fmt"
	"time"

	"github.com/workq/workq/internal/jobq"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
)

// The lease protocol by hand, as the worker runtime drives it: claim a batch
// under a fresh owner token, heartbeat it, end each attempt. Every call that
// touches a claimed row is guarded by that token, so a holder whose lease
// was lost changes nothing.
func ExampleEngine() {
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
	if _, err := jobq.New(jobq.Options{}).EnqueueMany(ctx, pool, []jobq.Job{{Kind: "a"}, {Kind: "b"}}); err != nil {
		panic(err)
	}

	e := lease.New(pool, lease.JobRuns)
	c, err := e.Claim(ctx, lease.ClaimParams{Queue: "default", Max: 10, Lease: 30 * time.Second, WorkerID: "example"})
	if err != nil {
		panic(err)
	}
	fmt.Println("claimed", len(c.Items), "items under one token")

	held := []lease.Held{{ID: c.Items[0].ID, Token: c.Token}, {ID: c.Items[1].ID, Token: c.Token}}
	extended, _, err := e.Heartbeat(ctx, held, 30*time.Second)
	if err != nil {
		panic(err)
	}
	fmt.Println("heartbeat extended", len(extended))

	applied, err := e.Complete(ctx, []lease.Completion{
		{ID: c.Items[0].ID, Token: c.Token, Outcome: lease.Done},
		{ID: c.Items[1].ID, Token: c.Token, Outcome: lease.Retry, Error: "downstream busy", Delay: time.Second},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(c.Items[0].Kind, applied.Status[c.Items[0].ID])
	fmt.Println(c.Items[1].Kind, applied.Status[c.Items[1].ID])

	// A second completion with the same token finds the leases gone.
	err = e.Ack(ctx, c.Token, c.Items[0].ID)
	fmt.Println(err)
	// Output:
	// claimed 2 items under one token
	// heartbeat extended 2
	// a done
	// b ready
	// job_runs: lease lost on 1 item(s): [1]
}
