package lease_test

import (
	"context"
	"testing"
	"time"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
)

// TestSmallBatchesKeepTheGenericPlan: a connection that completes, or
// extends the lease of, one attempt at a time (a flush or a heartbeat at a
// modest rate) keeps the prepared statement's generic plan after its first
// five executions. While the statements' arrays were constants to the
// planner, a custom plan of a small batch was estimated far cheaper than
// the generic plan, so PostgreSQL planned every such batch again (about
// 3 ms of server time for a completion of one that ran in 0.5 ms).
func TestSmallBatchesKeepTheGenericPlan(t *testing.T) {
	const rounds = 12
	cases := []struct {
		statement string
		run       func(ctx context.Context, e *lease.Engine, it lease.Item) error
	}{
		{"LeaseComplete", func(ctx context.Context, e *lease.Engine, it lease.Item) error {
			a, err := e.Complete(ctx, []lease.Completion{{ID: it.ID, Token: it.OwnerToken, Outcome: lease.Done}})
			if err == nil && a.Status[it.ID] != lease.StatusDone {
				t.Errorf("complete: %+v", a)
			}
			return err
		}},
		{"LeaseHeartbeat", func(ctx context.Context, e *lease.Engine, it lease.Item) error {
			extended, _, err := e.Heartbeat(ctx, []lease.Held{{ID: it.ID, Token: it.OwnerToken}}, time.Minute)
			if err == nil && len(extended) != 1 {
				t.Errorf("heartbeat extended %v, want %d", extended, it.ID)
			}
			return err
		}},
	}
	for _, c := range cases {
		t.Run(c.statement, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			pool := testdb.PoolWith(t, 1) // one connection: its prepared statements are the ones read below
			e := lease.New(pool, lease.JobRuns)
			for i := range rounds {
				var id int64
				if err := pool.QueryRow(ctx, `insert into workq.job_runs (queue, kind) values ('gp', 'k') returning id`).Scan(&id); err != nil {
					t.Fatal(err)
				}
				it, ok, err := e.ClaimByID(ctx, id, time.Minute, "w1")
				if err != nil || !ok {
					t.Fatalf("claim %d: %v %v", i, ok, err)
				}
				if err := c.run(ctx, e, it); err != nil {
					t.Fatalf("%s %d: %v", c.statement, i, err)
				}
			}
			var generic, custom int64
			if err := pool.QueryRow(ctx, `select generic_plans, custom_plans from pg_prepared_statements
				where statement like '%-- name: ' || $1 || ' %'`, c.statement).Scan(&generic, &custom); err != nil {
				t.Fatalf("read the connection's prepared %s: %v", c.statement, err)
			}
			if generic+custom != rounds || custom > 5 {
				t.Errorf("%s of one attempt, %d times on one connection: %d custom plans and %d generic; want at most the first 5 custom",
					c.statement, rounds, custom, generic)
			}
		})
	}
}
