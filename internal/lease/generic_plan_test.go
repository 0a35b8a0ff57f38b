package lease_test

import (
	"context"
	"testing"
	"time"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
)

// TestSmallCompletionsKeepTheGenericPlan: a connection that completes one
// attempt at a time (a flush at a modest rate) keeps the prepared
// LeaseComplete's generic plan after its first five executions. While the
// statement's arrays were constants to the planner, a custom plan of a
// small batch was estimated far cheaper than the generic plan, so
// PostgreSQL planned every such flush again (about 3 ms of server time for
// a batch of one that ran in 0.5 ms).
func TestSmallCompletionsKeepTheGenericPlan(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool := testdb.PoolWith(t, 1) // one connection: its prepared statements are the ones read below
	e := lease.New(pool, lease.JobRuns)
	const rounds = 12
	for i := range rounds {
		var id int64
		if err := pool.QueryRow(ctx, `insert into workq.job_runs (queue, kind) values ('gp', 'k') returning id`).Scan(&id); err != nil {
			t.Fatal(err)
		}
		it, ok, err := e.ClaimByID(ctx, id, time.Minute, "w1")
		if err != nil || !ok {
			t.Fatalf("claim %d: %v %v", i, ok, err)
		}
		a, err := e.Complete(ctx, []lease.Completion{{ID: id, Token: it.OwnerToken, Outcome: lease.Done}})
		if err != nil || a.Status[id] != lease.StatusDone {
			t.Fatalf("complete %d: %+v, %v", i, a, err)
		}
	}
	var generic, custom int64
	if err := pool.QueryRow(ctx, `select generic_plans, custom_plans from pg_prepared_statements
		where statement like '%-- name: LeaseComplete %'`).Scan(&generic, &custom); err != nil {
		t.Fatalf("read the connection's prepared LeaseComplete: %v", err)
	}
	if generic+custom != rounds || custom > 5 {
		t.Errorf("LeaseComplete of one attempt, %d times on one connection: %d custom plans and %d generic; want at most the first 5 custom",
			rounds, custom, generic)
	}
}
