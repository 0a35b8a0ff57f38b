package test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/workq/workq/internal/jobq"

	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/workqtype"
)

// EnqueueMany returns one id per job, in input order, on both paths: the
// plain insert (no job has a dedup key) and the ON CONFLICT insert.
func TestEnqueueManyReturnsIDsInInputOrder(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	c := jobq.New(jobq.Options{})
	for _, withKey := range []bool{false, true} {
		t.Run(fmt.Sprintf("dedup key %v", withKey), func(t *testing.T) {
			jobs := make([]jobq.Job, 50)
			for i := range jobs {
				jobs[i] = jobq.Job{Queue: "order", Kind: fmt.Sprintf("k%d", i), Payload: map[string]int{"i": i}}
			}
			if withKey {
				jobs[7].DedupKey = fmt.Sprintf("key-%v", withKey)
			}
			got, err := c.EnqueueMany(ctx, pool, jobs)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(jobs) {
				t.Fatalf("%d results for %d jobs", len(got), len(jobs))
			}
			for i, e := range got {
				var kind string
				var n int
				if err := pool.QueryRow(ctx, "select kind, (payload->>'i')::int from workq.job_runs_all where id = $1", e.ID).Scan(&kind, &n); err != nil {
					t.Fatalf("job %d: id %d: %v", i, e.ID, err)
				}
				if kind != jobs[i].Kind || n != i || e.Duplicate {
					t.Fatalf("job %d: id %d holds kind %s payload %d duplicate %v", i, e.ID, kind, n, e.Duplicate)
				}
			}
		})
	}
}

// EnqueueMany sends NOTIFY on both paths, once per queue of the batch (issue
// 7 item 10: the pg_notify CTE sat behind a left join that the planner
// removed, so it never ran and workers only learnt of batched work by
// polling).
func TestEnqueueManyNotifies(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Conn().Close(ctx); conn.Release() }()
	if _, err := conn.Exec(ctx, "listen "+workqtype.NotifyChannel("", "job_runs")); err != nil {
		t.Fatal(err)
	}
	for _, withKey := range []bool{false, true} {
		t.Run(fmt.Sprintf("dedup key %v", withKey), func(t *testing.T) {
			jobs := []jobq.Job{{Queue: "nq-a", Kind: "k"}, {Queue: "nq-b", Kind: "k"}, {Queue: "nq-a", Kind: "k"}}
			if withKey {
				jobs[1].DedupKey = "notify-key"
			}
			// A fresh client, so the debounce of an earlier subtest cannot skip it.
			if _, err := jobq.New(jobq.Options{}).EnqueueMany(ctx, pool, jobs); err != nil {
				t.Fatal(err)
			}
			got := map[string]int{}
			for len(got) < 2 {
				wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				n, err := conn.Conn().WaitForNotification(wctx)
				cancel()
				if err != nil {
					t.Fatalf("notifications so far %v, want one each for nq-a and nq-b: %v", got, err)
				}
				got[n.Payload]++
			}
			if got["nq-a"] != 1 || got["nq-b"] != 1 {
				t.Fatalf("notifications %v, want one each for nq-a and nq-b", got)
			}
		})
	}
}
