package worker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/worker"
)

// Issue 32, goal 5: a job's handler finishes just as the database goes
// away for longer than the lease (4 s against a 2 s lease, whose local
// deadline is 1.8 s). While the database cannot be reached nothing can
// reap the row and the completion is fenced by its owner token, so the
// flush keeps trying past the deadline, and the worker's own claim loop
// holds its reaping meanwhile: when the database is back the completion is
// applied and the handler does not run again. (The flush used to give up
// at the deadline; the reaper then ran the finished job a second time.)
func TestRuntimeCompletionOutlivesADatabaseOutageLongerThanTheLease(t *testing.T) {
	t.Parallel()
	pool, outage := newOutagePool(t)
	cfg := rtConfig("flush-long-outage")
	cfg.Lease = 2 * time.Second
	const downFor = 4 * time.Second
	var runs atomic.Int32
	results := make(chan worker.Result, 4)
	id := enqueue(t, pool, jobq.Job{Kind: "once"})
	w := startWorker(t, pool, cfg, worker.Options{OnResult: func(r worker.Result) { results <- r }},
		map[string]worker.HandlerFunc{
			"once": func(ctx context.Context, j *worker.Job) error {
				if runs.Add(1) == 1 {
					outage.Down()
					time.AfterFunc(downFor, outage.Up)
				}
				return nil
			},
		})
	var r worker.Result
	select {
	case r = <-results:
	case <-time.After(60 * time.Second):
		t.Fatal("no result within 60s")
	}
	if r.Item.ID != id || !r.Applied || r.Status != lease.StatusDone {
		t.Errorf("result %+v; want job %d applied, done (the flush gave up during the outage?)", r, id)
	}
	waitFor(t, 10*time.Second, "the outage to end", func() bool { return !outage.down.Load() })
	waitStatus(t, pool, id, lease.StatusDone, 30*time.Second)
	// A reaper that got there first would have requeued it and the
	// handler run again: give a claim loop time to.
	time.Sleep(2 * time.Second)
	if got := outcomes(runRows(t, pool, id)); len(got) != 1 || got[0] != "done" {
		t.Errorf("runs %v, want [done]", got)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want once", n)
	}
	if st := w.Stats(); st.Unflushed != 0 || st.LeaseLost != 0 || st.Done != 1 {
		t.Errorf("stats %+v; want unflushed 0, lease_lost 0, done 1", st)
	}
}
