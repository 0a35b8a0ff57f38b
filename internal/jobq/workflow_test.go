package jobq_test

import (
	"context"
	"errors"
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
		if err := pool.QueryRow(context.Background(), "select status from workq.job_runs where id = $1", id).Scan(&st); err != nil {
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
	if err := pool.QueryRow(ctx, "select output::text from workq.job_runs where id = $1", w.Tasks["a"]).Scan(&out); err != nil || out != `{"n": 1}` {
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
