package shardlimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/shardlimit"
	"github.com/workq/workq/internal/testdb"
)

// A Rebalancer keeps W=10 job runs of queue "emails" in progress across
// two shard databases: here both are idle, so each gets half. With a
// backlog on one shard, that shard's budget grows and the other's shrinks,
// the shrinking always committed first.
func ExampleRebalancer() {
	ctx := context.Background()
	var shards []shardlimit.Shard
	for _, name := range []string{"eu", "us"} {
		url, drop, err := testdb.NewDatabase()
		if err != nil {
			fmt.Println(err)
			return
		}
		defer drop()
		pool, err := pgxpool.New(ctx, url)
		if err != nil {
			fmt.Println(err)
			return
		}
		defer pool.Close()
		shards = append(shards, shardlimit.Shard{Name: name, DB: pool})
	}
	r, err := shardlimit.New(shards, shardlimit.Options{
		Limits:   []shardlimit.Limit{{Table: lease.JobRuns, Queue: "emails", W: 10}},
		Interval: 100 * time.Millisecond,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	// Wait for the first round to set both budgets.
	for {
		got := r.Budgets()
		if got[0].Budget == 5 && got[1].Budget == 5 {
			for _, b := range got {
				fmt.Printf("%s %s/%s: %d\n", b.Shard, b.Table, b.Queue, b.Budget)
			}
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	fmt.Println(<-done)
	// Output:
	// eu job_runs/emails: 5
	// us job_runs/emails: 5
	// <nil>
}
