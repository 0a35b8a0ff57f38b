package test

import (
	"context"
	"fmt"
	"testing"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
)

// EnqueueMany returns one id per job, in input order, on both paths: the
// plain insert (no job has a dedup key) and the ON CONFLICT insert.
func TestEnqueueManyReturnsIDsInInputOrder(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	c := workq.NewClient(workq.ClientOptions{})
	for _, withKey := range []bool{false, true} {
		t.Run(fmt.Sprintf("dedup key %v", withKey), func(t *testing.T) {
			jobs := make([]workq.Job, 50)
			for i := range jobs {
				jobs[i] = workq.Job{Queue: "order", Kind: fmt.Sprintf("k%d", i), Payload: map[string]int{"i": i}}
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
				if err := pool.QueryRow(ctx, "select kind, (payload->>'i')::int from job_runs where id = $1", e.ID).Scan(&kind, &n); err != nil {
					t.Fatalf("job %d: id %d: %v", i, e.ID, err)
				}
				if kind != jobs[i].Kind || n != i || e.Duplicate {
					t.Fatalf("job %d: id %d holds kind %s payload %d duplicate %v", i, e.ID, kind, n, e.Duplicate)
				}
			}
		})
	}
}
