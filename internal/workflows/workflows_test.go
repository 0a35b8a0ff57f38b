package workflows_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/workflows"
	"github.com/workq/workq/workqtype"
)

func TestMain(m *testing.M) { testdb.Main(m) }

func enqueue(t *testing.T, pool *pgxpool.Pool, tasks ...jobq.Task) jobq.WorkflowWritten {
	t.Helper()
	w, err := jobq.New(jobq.Options{}).EnqueueWorkflow(context.Background(), pool, jobq.Workflow{Name: "w", Tasks: tasks})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func end(t *testing.T, pool *pgxpool.Pool, id int64, outcome lease.Outcome) {
	t.Helper()
	ctx := context.Background()
	e := lease.New(pool, lease.JobRuns)
	it, ok, err := e.ClaimByID(ctx, id, time.Minute, "test")
	if err != nil || !ok {
		t.Fatalf("claim %d: %v %v", id, ok, err)
	}
	if _, err := e.Complete(ctx, []lease.Completion{{ID: id, Token: it.OwnerToken, RunID: it.RunID, Outcome: outcome, Error: "x"}}); err != nil {
		t.Fatal(err)
	}
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Retention never deletes a task before its workflow has ended, and
// deletes an ended workflow whole: its tasks, names and edges.
func TestRetentionKeepsRunningWorkflows(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	job := jobq.Job{Kind: "k"}
	w := enqueue(t, pool, jobq.Task{Name: "a", Job: job}, jobq.Task{Name: "b", Job: job, DependsOn: []string{"a"}})
	end(t, pool, w.Tasks["a"], lease.Done)
	e := lease.New(pool, lease.JobRuns)
	if n, err := e.DeleteFinished(ctx, -time.Hour, 100); err != nil || n != 0 {
		t.Fatalf("job retention deleted %d (%v), want none of a running workflow's tasks", n, err)
	}
	if n, err := workflows.DeleteFinished(ctx, pool, -time.Hour, 10); err != nil || n != 0 {
		t.Fatalf("workflow retention deleted %d (%v) running workflows", n, err)
	}
	end(t, pool, w.Tasks["b"], lease.Done)
	if n, err := e.DeleteFinished(ctx, -time.Hour, 100); err != nil || n != 0 {
		t.Fatalf("job retention deleted %d (%v): a workflow's tasks go with it", n, err)
	}
	if n, err := workflows.DeleteFinished(ctx, pool, -time.Hour, 10); err != nil || n != 1 {
		t.Fatalf("workflow retention deleted %d (%v), want 1", n, err)
	}
	left := count(t, pool, `select (select count(*) from workq.job_runs_all) + (select count(*) from workq.workflow_tasks)
		+ (select count(*) from workq.workflow_deps) + (select count(*) from workq.workflows)`)
	if left != 0 {
		t.Fatalf("%d rows left after the workflow's retention", left)
	}
}

// Cancel: pending and ready tasks end at once, a running one is asked to
// stop, and the workflow ends cancelled when it ends. Retry brings the
// cancelled ones back, the dependents pending.
func TestCancelAndRetry(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	job := jobq.Job{Kind: "k"}
	w := enqueue(t, pool,
		jobq.Task{Name: "run", Job: job},
		jobq.Task{Name: "ready", Job: job},
		jobq.Task{Name: "wait", Job: job, DependsOn: []string{"ready"}})
	e := lease.New(pool, lease.JobRuns)
	it, ok, err := e.ClaimByID(ctx, w.Tasks["run"], time.Minute, "test")
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	r, err := workflows.Cancel(ctx, pool, w.ID, "test", "because")
	if err != nil || r.Cancelled != 2 || r.Requested != 1 {
		t.Fatalf("cancel: %+v, %v; want 2 cancelled, 1 requested", r, err)
	}
	info, err := workflows.Get(ctx, pool, w.ID)
	if err != nil || info.State != workflows.Running || info.CancelRequestedAt == nil {
		t.Fatalf("after cancel: %+v, %v; want running with a cancel request", info, err)
	}
	if _, err := e.Complete(ctx, []lease.Completion{{ID: it.ID, Token: it.OwnerToken, RunID: it.RunID, Outcome: lease.Done}}); err != nil {
		t.Fatal(err)
	}
	info, _ = workflows.Get(ctx, pool, w.ID)
	if info.State != workflows.Cancelled || info.Cancelled != 3 {
		t.Fatalf("after the running task ended: %+v; want cancelled, 3 cancelled", info)
	}
	if _, err := workflows.Cancel(ctx, pool, w.ID, "test", ""); !errors.Is(err, workflows.ErrEnded) || !errors.Is(err, workqtype.ErrWrongState) {
		t.Fatalf("cancel of an ended workflow: %v", err)
	}
	n, err := workflows.Retry(ctx, pool, w.ID, "test", "")
	if err != nil || n != 3 {
		t.Fatalf("retry revived %d, %v; want 3", n, err)
	}
	info, _ = workflows.Get(ctx, pool, w.ID)
	if info.State != workflows.Running || info.CancelRequestedAt != nil {
		t.Fatalf("after retry: %+v", info)
	}
	if got := count(t, pool, "select status from workq.job_runs_all where id = $1", w.Tasks["wait"]); got != -1 {
		// wait was cancelled by the workflow's cancel, not by its
		// dependency; retried with it, it waits for it again.
		t.Fatalf("wait's status %d after retry, want pending (-1)", got)
	}
	if got := count(t, pool, "select status from workq.job_runs_all where id = $1", w.Tasks["ready"]); got != 0 {
		t.Fatalf("ready's status %d after retry, want ready (0)", got)
	}
	if _, err := workflows.Cancel(ctx, pool, 1<<40, "test", ""); !errors.Is(err, workflows.ErrNotFound) {
		t.Fatalf("cancel of no workflow: %v", err)
	}
}

// A failure cascades down a long chain without exhausting the stack, and
// a retry of the failed task brings the whole chain back pending.
func TestCascadeDownALongChain(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	const n = 2000
	tasks := []jobq.Task{{Name: "t0", Job: jobq.Job{Kind: "k"}}}
	for i := 1; i < n; i++ {
		tasks = append(tasks, jobq.Task{Name: "t" + itoa(i), Job: jobq.Job{Kind: "k"}, DependsOn: []string{"t" + itoa(i-1)}})
	}
	w := enqueue(t, pool, tasks...)
	end(t, pool, w.Tasks["t0"], lease.Failed)
	if got := count(t, pool, "select count(*) from workq.job_runs_all where workflow_id = $1 and status = 4", w.ID); got != n-1 {
		t.Fatalf("%d cancelled, want %d", got, n-1)
	}
	info, _ := workflows.Get(ctx, pool, w.ID)
	if info.State != workflows.Failed || info.Failed != 1 || info.Cancelled != n-1 {
		t.Fatalf("workflow %+v", info)
	}
	if k, err := workflows.Retry(ctx, pool, w.ID, "test", ""); err != nil || k != 1 {
		t.Fatalf("retry revived %d, %v; want the failed task only", k, err)
	}
	if got := count(t, pool, "select count(*) from workq.job_runs_all where workflow_id = $1 and status = -1", w.ID); got != n-1 {
		t.Fatalf("%d pending after the retry, want %d", got, n-1)
	}
	end(t, pool, w.Tasks["t0"], lease.Done)
	if got := count(t, pool, "select status from workq.job_runs_all where id = $1", w.Tasks["t1"]); got != 0 {
		t.Fatalf("t1 status %d after t0 succeeded, want ready", got)
	}
}

// Wait returns at once for an ended job, and when a running one ends.
func TestWaitJob(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	id := enqueue(t, pool, jobq.Task{Name: "a", Job: jobq.Job{Kind: "k"}}).Tasks["a"]
	wt := workflows.Waiter{Pool: pool, Channel: "workq_done", Wrap: func(db workqtype.DB) workqtype.DB { return db }}
	got := make(chan workflows.JobEnd, 1)
	go func() {
		r, err := wt.WaitJob(ctx, id)
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	// wait until the waiter has marked the row (it listens first)
	for count(t, pool, "select count(*) from workq.job_runs_all where id = $1 and awaited", id) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	e := lease.New(pool, lease.JobRuns)
	it, _, err := e.ClaimByID(ctx, id, time.Minute, "test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Complete(ctx, []lease.Completion{{ID: id, Token: it.OwnerToken, RunID: it.RunID, Outcome: lease.Done, Output: []byte(`[1,2]`)}}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.State != "done" || string(r.Output) != "[1, 2]" {
			t.Fatalf("waited %+v", r)
		}
	case <-time.After(20 * time.Second): // far below the 30 s safety poll: the NOTIFY woke it
		t.Fatal("Wait did not return within 20 s of the job's end")
	}
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	other := enqueue(t, pool, jobq.Task{Name: "b", Job: jobq.Job{Kind: "k"}}).Tasks["b"]
	if _, err := wt.WaitJob(cctx, other); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait past its deadline: %v", err)
	}
}

func itoa(i int) string {
	const digits = "0123456789"
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{digits[i%10]}, b...)
	}
	return string(b)
}

// Of tells a job in a workflow from one in none and from none at all,
// wherever the job's row is: a plain job that ended done has moved to
// job_runs_done (a handler that asks for its workflow after its
// completion committed) and is in none, not missing.
func TestOf(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	task := enqueue(t, pool, jobq.Task{Name: "a", Job: jobq.Job{Kind: "k"}}).Tasks["a"]
	plain, err := jobq.New(jobq.Options{}).EnqueueMany(ctx, pool, []jobq.Job{{Kind: "k"}, {Kind: "k"}})
	if err != nil {
		t.Fatal(err)
	}
	end(t, pool, plain[1].ID, lease.Done)
	if n := count(t, pool, "select count(*) from workq.job_runs_done where id = $1", plain[1].ID); n != 1 {
		t.Fatalf("the done plain job is not in job_runs_done (%d rows)", n)
	}
	end(t, pool, task, lease.Done)
	for _, c := range []struct {
		name     string
		id       int64
		wantTask string
		wantErr  error
	}{
		{"a workflow's task, done", task, "a", nil},
		{"a plain job, ready", plain[0].ID, "", workflows.ErrNotInWorkflow},
		{"a plain job, done and moved", plain[1].ID, "", workflows.ErrNotInWorkflow},
		{"no such job", plain[1].ID + 1000, "", workqtype.ErrNotFound},
	} {
		t.Run(c.name, func(t *testing.T) {
			wf, name, err := workflows.Of(ctx, pool, c.id)
			if !errors.Is(err, c.wantErr) || name != c.wantTask || (c.wantErr == nil) != (wf > 0) {
				t.Fatalf("Of(%d) = %d, %q, %v; want task %q, error %v", c.id, wf, name, err, c.wantTask, c.wantErr)
			}
		})
	}
}
