package jobq_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/workqtype"
)

// wfStatus reads each task's status by name.
func wfStatus(t *testing.T, pool *pgxpool.Pool, ids map[string]int64) map[string]lease.Status {
	t.Helper()
	out := map[string]lease.Status{}
	for name, id := range ids {
		var st int16
		if err := pool.QueryRow(context.Background(), "select status from workq.job_runs_all where id = $1", id).Scan(&st); err != nil {
			t.Fatal(err)
		}
		out[name] = lease.Status(st)
	}
	return out
}

// endTask claims the job by id and ends it with outcome.
func endTask(t *testing.T, e *lease.Engine, id int64, outcome lease.Outcome) {
	t.Helper()
	ctx := context.Background()
	it, ok, err := e.ClaimByID(ctx, id, time.Minute, "test")
	if err != nil || !ok {
		t.Fatalf("claim %d: ok %v, %v", id, ok, err)
	}
	a, err := e.Complete(ctx, []lease.Completion{{ID: id, Token: it.OwnerToken, RunID: it.RunID, Outcome: outcome, Error: "boom", Output: []byte(`{"n":1}`)}})
	if err != nil || len(a.Lost) > 0 {
		t.Fatalf("complete %d: %v lost %v", id, err, a.Lost)
	}
}

func TestWorkflowReleaseCancelRevive(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	c := jobq.New(jobq.Options{})
	job := jobq.Job{Kind: "k"}
	w, err := c.EnqueueWorkflow(ctx, pool, jobq.Workflow{Name: "w", Tasks: []jobq.Task{
		{Name: "a", Job: job},
		{Name: "b", Job: job},
		{Name: "c", Job: job, DependsOn: []string{"a", "b"}},
		{Name: "d", Job: job, DependsOn: []string{"c"}},
		{Name: "e", Job: job, AnyOutcome: []string{"c"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]lease.Status{"a": 0, "b": 0, "c": -1, "d": -1, "e": -1}
	if got := wfStatus(t, pool, w.Tasks); !equal(got, want) {
		t.Fatalf("after enqueue: %v, want %v", got, want)
	}
	e := lease.New(pool, lease.JobRuns)
	if st, err := e.QueueStats(ctx); err != nil || len(st) != 1 || st[0].Pending != 3 || st[0].Ready != 2 {
		t.Fatalf("queue stats %+v, %v; want 3 pending and 2 ready", st, err)
	}
	endTask(t, e, w.Tasks["a"], lease.Done)
	if got := wfStatus(t, pool, w.Tasks); got["c"] != -1 {
		t.Fatalf("c released after one of two dependencies: %v", got)
	}
	endTask(t, e, w.Tasks["b"], lease.Done)
	if got := wfStatus(t, pool, w.Tasks); got["c"] != 0 {
		t.Fatalf("c not released after both: %v", got)
	}
	endTask(t, e, w.Tasks["c"], lease.Failed)
	want = map[string]lease.Status{"a": 2, "b": 2, "c": 3, "d": 4, "e": 0}
	if got := wfStatus(t, pool, w.Tasks); !equal(got, want) {
		t.Fatalf("after c failed: %v, want %v", got, want)
	}
	// revive c: d comes back pending, then c succeeds and releases d
	if _, err := e.Revive(ctx, "test", "", w.Tasks["c"]); err != nil {
		t.Fatal(err)
	}
	if got := wfStatus(t, pool, w.Tasks); got["d"] != -1 || got["c"] != 0 {
		t.Fatalf("after revive: %v", got)
	}
	endTask(t, e, w.Tasks["c"], lease.Done)
	if got := wfStatus(t, pool, w.Tasks); got["d"] != 0 {
		t.Fatalf("d not released after c revived and done: %v", got)
	}
	endTask(t, e, w.Tasks["d"], lease.Done)
	endTask(t, e, w.Tasks["e"], lease.Done)
	var status int16
	var done, failed, cancelled int32
	if err := pool.QueryRow(ctx, "select status, done, failed, cancelled from workq.workflows where id = $1", w.ID).Scan(&status, &done, &failed, &cancelled); err != nil {
		t.Fatal(err)
	}
	if status != 2 || done != 5 || failed != 0 || cancelled != 0 {
		t.Fatalf("workflow status %d done %d failed %d cancelled %d, want 2 5 0 0", status, done, failed, cancelled)
	}
	var out string
	if err := pool.QueryRow(ctx, "select output::text from workq.job_runs_all where id = $1", w.Tasks["a"]).Scan(&out); err != nil || out != `{"n": 1}` {
		t.Fatalf("output %q, %v", out, err)
	}
}

func TestWorkflowRefusesBadShapes(t *testing.T) {
	c := jobq.New(jobq.Options{})
	job := jobq.Job{Kind: "k"}
	for name, w := range map[string]jobq.Workflow{
		"cycle":     {Name: "w", Tasks: []jobq.Task{{Name: "a", Job: job, DependsOn: []string{"b"}}, {Name: "b", Job: job, DependsOn: []string{"a"}}}},
		"unknown":   {Name: "w", Tasks: []jobq.Task{{Name: "a", Job: job, DependsOn: []string{"x"}}}},
		"duplicate": {Name: "w", Tasks: []jobq.Task{{Name: "a", Job: job}, {Name: "a", Job: job}}},
		"self":      {Name: "w", Tasks: []jobq.Task{{Name: "a", Job: job, DependsOn: []string{"a"}}}},
		"empty":     {Name: "w"},
		"no name":   {Tasks: []jobq.Task{{Name: "a", Job: job}}},
		"dedup":     {Name: "w", Tasks: []jobq.Task{{Name: "a", Job: jobq.Job{Kind: "k", DedupKey: "x"}}}},
	} {
		if err := c.ValidateWorkflow(w); !errors.Is(err, workqtype.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

func equal(a, b map[string]lease.Status) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// Many completions at once, in batches that mix two workflows' tasks in
// random orders on several connections: each workflow's final task is
// released exactly once and no statement deadlocks (the lease statements
// lock workflows in id order).
func TestWorkflowConcurrentCompletions(t *testing.T) {
	ctx := context.Background()
	pool := testdb.PoolWith(t, 12)
	c := jobq.New(jobq.Options{})
	const n = 300
	var all []int64
	finals := map[int64]int64{} // workflow -> final task
	for w := range 2 {
		tasks := make([]jobq.Task, 0, n+1)
		names := make([]string, n)
		for i := range n {
			names[i] = fmt.Sprintf("t%d", i)
			tasks = append(tasks, jobq.Task{Name: names[i], Job: jobq.Job{Kind: "k", Queue: "q"}})
		}
		tasks = append(tasks, jobq.Task{Name: "final", Job: jobq.Job{Kind: "k", Queue: fmt.Sprintf("final%d", w)}, DependsOn: names})
		res, err := c.EnqueueWorkflow(ctx, pool, jobq.Workflow{Name: "fan-in", Tasks: tasks})
		if err != nil {
			t.Fatal(err)
		}
		finals[res.ID] = res.Tasks["final"]
	}
	e := lease.New(pool, lease.JobRuns)
	claim, err := e.Claim(ctx, lease.ClaimParams{Queue: "q", Max: 2 * n, Lease: time.Minute, WorkerID: "test"})
	if err != nil || len(claim.Items) != 2*n {
		t.Fatalf("claimed %d, %v", len(claim.Items), err)
	}
	items := claim.Items
	rand.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
	for _, it := range items {
		all = append(all, it.ID)
	}
	// disjoint batches of random sizes (a completion is its owner's: two
	// batches never share an item), on six connections at once
	var batches [][]lease.Completion
	for i := 0; i < len(items); {
		end := min(i+1+rand.IntN(17), len(items))
		var cs []lease.Completion
		for _, it := range items[i:end] {
			cs = append(cs, lease.Completion{ID: it.ID, Token: it.OwnerToken, RunID: it.RunID, Outcome: lease.Done})
		}
		batches = append(batches, cs)
		i = end
	}
	next := make(chan []lease.Completion, len(batches))
	for _, b := range batches {
		next <- b
	}
	close(next)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for cs := range next {
				a, err := e.Complete(ctx, cs)
				if err != nil {
					errs <- err
					return
				}
				if len(a.Lost) > 0 {
					errs <- fmt.Errorf("lost %v", a.Lost)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for wf, final := range finals {
		var st int16
		var left int32
		var done int32
		if err := pool.QueryRow(ctx, `select j.status, t.deps_left, w.done from workq.job_runs_all j join workq.workflow_tasks t on t.job_id = j.id
			join workq.workflows w on w.id = t.workflow_id where j.id = $1`, final).Scan(&st, &left, &done); err != nil {
			t.Fatal(err)
		}
		if st != 0 || left != 0 || done != n {
			t.Fatalf("workflow %d: final status %d, deps left %d, done %d; want ready, 0, %d", wf, st, left, done, n)
		}
	}
	var runs int
	if err := pool.QueryRow(ctx, "select count(*) from workq.runs where item_id = any($1) and outcome = 'done'", all).Scan(&runs); err != nil || runs != 2*n {
		t.Fatalf("%d done runs archived, want %d (%v)", runs, 2*n, err)
	}
}
