package worker

import (
	"context"
	"testing"
	"time"

	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
)

// A claim loop's reap of its queue's expired leases runs beside the loop,
// not in it: a job notified while a reap is still in the database is
// claimed and started at once. Here every reap is held until the test ends
// and the poll is 10 s, so only a claim loop that does not wait for its
// reap starts the job within the bound.
//
// Issue 32 (goal 4): the reap ran in the claim loop once a second while it
// was idle; on a machine at load 20 it took 11 ms at the median and up to
// 83 ms, and the notification of a batch that arrived meanwhile waited for
// it (about one batch in a hundred at 100 batches a second: the p99 of
// `workq bench --rate 1000 --enqueue-batch 10`).
func TestClaimLoopDoesNotWaitForItsReap(t *testing.T) {
	pool := testdb.Pool(t)
	cfg := faultConfig(t, "reap-aside")
	cfg.Poll = 10 * time.Second
	w, err := New(pool, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	reaping := make(chan struct{}, 1)
	release := make(chan struct{})
	w.reapFn = func(e *lease.Engine, ctx context.Context, queue string, max int) (lease.Reaped, error) {
		poke(reaping)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return e.ReapExpired(ctx, queue, max)
	}
	started := make(chan int64, 16)
	if err := w.Register("wake", func(_ context.Context, j *Job) error { started <- j.ID; return nil }); err != nil {
		t.Fatal(err)
	}
	runFaulty(t, w)
	t.Cleanup(func() { close(release) }) // runs before runFaulty's Stop

	deadline := time.Now().Add(5 * time.Second)
	for {
		var n int64
		if err := pool.QueryRow(context.Background(),
			"select count(*) from pg_stat_activity where datname = current_database() and query ilike 'listen %'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the worker did not LISTEN within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case <-reaping:
	case <-time.After(5 * time.Second):
		t.Fatal("the claim loop did not reap within 5s of its start")
	}

	const bound = 2 * time.Second
	for round := range 3 {
		// A fresh client: its NOTIFY debounce cannot skip this one.
		id, err := jobq.New(jobq.Options{}).Enqueue(context.Background(), pool, jobq.Job{Kind: "wake"})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-started:
			if got != id.ID {
				t.Fatalf("round %d: started job %d, want %d", round, got, id.ID)
			}
		case <-time.After(bound):
			t.Fatalf("round %d: job %d not started within %s of its Enqueue while a reap was held (poll %s): the claim loop waits for its reap",
				round, id.ID, bound, cfg.Poll)
		}
	}
}
