package workq_test

// A reviewer's port of a River Pro workflow (an order pipeline) and the
// awkward cases a user porting one meets.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
)

type rvStepArgs struct {
	Step string `json:"step"`
	// FailFirst makes the first attempt fail permanently (a retry from
	// RetryWorkflow then succeeds).
	FailFirst bool `json:"fail_first,omitempty"`
	// Block makes the handler wait for its context to end.
	Block bool `json:"block,omitempty"`
}

func (rvStepArgs) Kind() string { return "rv.step" }

// errSkipOutput from a rig's hook ends the job done without its default
// output.
var errSkipOutput = errors.New("done, no output")

// rvRig is a Client whose rv.step handler counts its runs per task name.
type rvRig struct {
	*workq.Client
	pool     *pgxpool.Pool
	mu       sync.Mutex
	runs     map[string]int
	started  chan string
	ctxEnded chan string
}

func startRig(t *testing.T, maint workq.MaintenanceConfig, hook func(r *rvRig, ctx context.Context, job *workq.Job[rvStepArgs]) error) *rvRig {
	t.Helper()
	r := &rvRig{pool: testdb.Pool(t), runs: map[string]int{}, started: make(chan string, 100), ctxEnded: make(chan string, 100)}
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[rvStepArgs]) error {
		r.mu.Lock()
		r.runs[job.Args.Step]++
		n := r.runs[job.Args.Step]
		r.mu.Unlock()
		select {
		case r.started <- job.Args.Step:
		default:
		}
		if hook != nil {
			if err := hook(r, ctx, job); errors.Is(err, errSkipOutput) {
				return nil
			} else if err != nil {
				return err
			}
		}
		if job.Args.Block {
			<-ctx.Done()
			r.ctxEnded <- job.Args.Step
			return ctx.Err()
		}
		if job.Args.FailFirst && n == 1 {
			return workq.Permanent(errors.New("first attempt fails"))
		}
		return job.SetOutput(job.Args.Step + "-out")
	}))
	if maint == (workq.MaintenanceConfig{}) {
		maint.Disabled = true
	}
	c, err := workq.NewClient(r.pool, workq.Config{Workers: workers, Maintenance: maint, FetchPollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	r.Client = c
	return r
}

func (r *rvRig) runsOf(step string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs[step]
}

// checkCounts checks that the workflow's counts equal its tasks' states,
// and that every pending task's deps_left counts its unended dependencies.
func checkCounts(t *testing.T, c *workq.Client, pool *pgxpool.Pool, ref workq.WorkflowRef) workq.WorkflowInfo {
	t.Helper()
	ctx := context.Background()
	info, err := c.GetWorkflow(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := c.WorkflowTasks(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	var done, failed, cancelled, unended int
	for _, k := range tasks {
		switch k.State {
		case workq.JobStateDone:
			done++
		case workq.JobStateFailed:
			failed++
		case workq.JobStateCancelled:
			cancelled++
		default:
			unended++
		}
	}
	if info.Tasks != len(tasks) || info.Done != done || info.Failed != failed || info.Cancelled != cancelled {
		t.Errorf("workflow counts %d tasks, %d done, %d failed, %d cancelled; its tasks: %d, %d, %d, %d",
			info.Tasks, info.Done, info.Failed, info.Cancelled, len(tasks), done, failed, cancelled)
	}
	if (info.State == workq.WorkflowRunning) != (unended > 0) {
		t.Errorf("workflow %s with %d tasks not ended", info.State, unended)
	}
	var bad int
	err = c.InSchema(pool).QueryRow(ctx, `
		select count(*) from workq.workflow_tasks k join workq.job_runs_all j on j.id = k.job_id
		where k.workflow_id = $1 and j.status = -1 and k.deps_left <> (
			select count(*) from workq.workflow_deps d join workq.job_runs_all x on x.id = d.dep_id
			where d.task_id = k.job_id and x.status < 2)`, ref.ID).Scan(&bad)
	if err != nil {
		t.Fatal(err)
	}
	if bad != 0 {
		t.Errorf("%d pending tasks whose deps_left differs from their unended dependencies", bad)
	}
	return info
}

// The order pipeline as a River Pro user writes it: fetch, a resize that
// fails once, merge and notify after it, and a cleanup after notify
// whatever happens. The workflow fails; RetryWorkflow reruns the resize,
// and merge and notify then run exactly once each, reading the resize's
// output from its second attempt.
func TestReviewRetryMidWorkflowRunsDependentsOnce(t *testing.T) {
	var mergeSaw atomic.Value
	r := startRig(t, workq.MaintenanceConfig{}, func(r *rvRig, ctx context.Context, job *workq.Job[rvStepArgs]) error {
		if job.Args.Step == "merge" {
			s, err := workq.Output[string](ctx, job, "resize")
			if err != nil {
				return workq.Permanent(err)
			}
			mergeSaw.Store(s)
		}
		return nil
	})
	ctx := context.Background()
	res, err := r.NewWorkflow("order 42", nil).
		Add("fetch", rvStepArgs{Step: "fetch"}, nil).
		Add("resize", rvStepArgs{Step: "resize", FailFirst: true}, &workq.TaskOpts{DependsOn: []string{"fetch"}}).
		Add("merge", rvStepArgs{Step: "merge"}, &workq.TaskOpts{DependsOn: []string{"resize"}}).
		Add("notify", rvStepArgs{Step: "notify"}, &workq.TaskOpts{DependsOn: []string{"merge"}}).
		Add("cleanup", rvStepArgs{Step: "cleanup"}, &workq.TaskOpts{DependsOnAnyOutcome: []string{"notify"}}).
		Enqueue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info := waitWorkflow(t, r.Client, res.Workflow)
	if info.State != workq.WorkflowFailed || info.Failed != 1 || info.Cancelled != 2 || info.Done != 2 {
		t.Fatalf("workflow %+v, want failed: 1 failed, 2 cancelled, 2 done", info)
	}
	checkCounts(t, r.Client, r.pool, res.Workflow)
	n, err := r.RetryWorkflow(ctx, res.Workflow, nil)
	if err != nil || n != 1 {
		t.Fatalf("RetryWorkflow revived %d (%v), want 1 (the resize)", n, err)
	}
	info = waitWorkflow(t, r.Client, res.Workflow)
	if info.State != workq.WorkflowCompleted || info.Done != 5 {
		t.Fatalf("workflow %+v after the retry, want completed with 5 done", info)
	}
	checkCounts(t, r.Client, r.pool, res.Workflow)
	for step, want := range map[string]int{"fetch": 1, "resize": 2, "merge": 1, "notify": 1, "cleanup": 1} {
		if got := r.runsOf(step); got != want {
			t.Errorf("%s ran %d times, want %d", step, got, want)
		}
	}
	if s, _ := mergeSaw.Load().(string); s != "resize-out" {
		t.Errorf("merge read the resize's output %q, want resize-out", s)
	}
}

// CancelWorkflow while a task runs cancels its handler's context, ends the
// pending ones at once, and the workflow ends cancelled.
func TestReviewCancelWhileRunningCancelsHandlerContext(t *testing.T) {
	r := startRig(t, workq.MaintenanceConfig{}, nil)
	ctx := context.Background()
	res, err := r.NewWorkflow("cancel me", nil).
		Add("long", rvStepArgs{Step: "long", Block: true}, nil).
		Add("after", rvStepArgs{Step: "after"}, &workq.TaskOpts{DependsOn: []string{"long"}}).
		Add("cleanup", rvStepArgs{Step: "cleanup"}, &workq.TaskOpts{DependsOnAnyOutcome: []string{"after"}}).
		Enqueue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.started:
	case <-time.After(30 * time.Second):
		t.Fatal("the long task never started")
	}
	cr, err := r.CancelWorkflow(ctx, res.Workflow, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cr.Requested != 1 || cr.Cancelled != 2 {
		t.Errorf("cancel %+v, want 1 requested, 2 cancelled", cr)
	}
	select {
	case <-r.ctxEnded:
	case <-time.After(30 * time.Second):
		t.Fatal("the running handler's context was not cancelled")
	}
	info := waitWorkflow(t, r.Client, res.Workflow)
	if info.State != workq.WorkflowCancelled {
		t.Errorf("workflow %s, want cancelled", info.State)
	}
	checkCounts(t, r.Client, r.pool, res.Workflow)
	if n := r.runsOf("cleanup"); n != 0 {
		t.Errorf("cleanup ran %d times after CancelWorkflow, want 0 (the workflow takes no more work)", n)
	}
	if _, err := r.CancelWorkflow(ctx, res.Workflow, nil); !errors.Is(err, workq.ErrWorkflowEnded) || !errors.Is(err, workq.ErrWrongState) {
		t.Errorf("second cancel: %v, want ErrWorkflowEnded and ErrWrongState", err)
	}
}

// A handler adds tasks with EnqueueTx in its transaction and the
// transaction rolls back: nothing was added, the workflow counts one task.
func TestReviewAddTasksRolledBackAddsNothing(t *testing.T) {
	r := startRig(t, workq.MaintenanceConfig{}, func(r *rvRig, ctx context.Context, job *workq.Job[rvStepArgs]) error {
		if job.Args.Step != "split" {
			return nil
		}
		add, err := job.AddTasks(ctx)
		if err != nil {
			return err
		}
		add.Add("part", rvStepArgs{Step: "part"}, &workq.TaskOpts{DependsOn: []string{"split"}})
		tx, err := r.pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		if _, err := add.EnqueueTx(ctx, tx); err != nil {
			return err
		}
		return workq.Permanent(errors.New("the business write failed"))
	})
	ctx := context.Background()
	res, err := r.NewWorkflow("split", nil).Add("split", rvStepArgs{Step: "split"}, nil).Enqueue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info := waitWorkflow(t, r.Client, res.Workflow)
	if info.State != workq.WorkflowFailed || info.Tasks != 1 {
		t.Fatalf("workflow %+v, want failed with 1 task", info)
	}
	checkCounts(t, r.Client, r.pool, res.Workflow)
	var rows int
	if err := r.InSchema(r.pool).QueryRow(ctx, `select (select count(*) from workq.job_runs_all) + (select count(*) from workq.workflow_tasks)
		+ (select count(*) from workq.workflow_deps)`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 2 {
		t.Errorf("%d rows of job_runs, workflow_tasks and workflow_deps, want 2 (the split's)", rows)
	}
}

// EnqueueTx rolled back leaves nothing: no workflow, no job run.
func TestReviewEnqueueTxRolledBackLeavesNothing(t *testing.T) {
	r := startRig(t, workq.MaintenanceConfig{}, nil)
	ctx := context.Background()
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.NewWorkflow("never", nil).Add("a", rvStepArgs{Step: "a"}, nil).
		Add("b", rvStepArgs{Step: "b"}, &workq.TaskOpts{DependsOn: []string{"a"}}).EnqueueTx(ctx, tx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r.GetWorkflow(ctx, res.Workflow); !errors.Is(err, workq.ErrNotFound) {
		t.Errorf("GetWorkflow after the rollback: %v, want ErrNotFound", err)
	}
	ws, err := r.ListWorkflows(ctx, workq.ListWorkflowsParams{})
	if err != nil || len(ws) != 0 {
		t.Errorf("ListWorkflows %v (%v), want none", ws, err)
	}
	var rows int
	if err := r.InSchema(r.pool).QueryRow(ctx, `select (select count(*) from workq.job_runs_all) + (select count(*) from workq.workflow_tasks)
		+ (select count(*) from workq.workflow_deps)`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 0 {
		t.Errorf("%d rows after the rollback, want 0", rows)
	}
}

// SetOutput refuses a value that does not marshal and one that is too
// large, with ErrInvalid; the job can still record a good output after.
func TestReviewSetOutputRefusesBadValues(t *testing.T) {
	errs := make(chan error, 2)
	r := startRig(t, workq.MaintenanceConfig{}, func(r *rvRig, ctx context.Context, job *workq.Job[rvStepArgs]) error {
		errs <- job.SetOutput(make(chan int))
		errs <- job.SetOutput(strings.Repeat("x", workq.MaxOutputBytes))
		return nil
	})
	ctx := context.Background()
	res, err := r.NewWorkflow("out", nil).Add("a", rvStepArgs{Step: "a"}, nil).Enqueue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-errs; !errors.Is(err, workq.ErrInvalid) {
			t.Errorf("SetOutput: %v, want ErrInvalid", err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	end, err := r.Wait(wctx, workq.ItemRef{ID: res.Tasks["a"]})
	if err != nil {
		t.Fatal(err)
	}
	if end.State != workq.JobStateDone || string(end.Output) != `"a-out"` {
		t.Errorf("task ended %s with %s, want done with \"a-out\"", end.State, end.Output)
	}
}

// Names in any script round-trip: the workflow's, its tasks', Output by
// name, the list's name prefix.
func TestReviewUnicodeNames(t *testing.T) {
	var got atomic.Value
	r := startRig(t, workq.MaintenanceConfig{}, func(r *rvRig, ctx context.Context, job *workq.Job[rvStepArgs]) error {
		if job.Args.Step == "合併" {
			s, err := workq.Output[string](ctx, job, "取得 🚚")
			if err != nil {
				return workq.Permanent(err)
			}
			got.Store(s)
		}
		return nil
	})
	ctx := context.Background()
	res, err := r.NewWorkflow("注文 №42 — Größe", nil).
		Add("取得 🚚", rvStepArgs{Step: "取得 🚚"}, nil).
		Add("合併", rvStepArgs{Step: "合併"}, &workq.TaskOpts{DependsOn: []string{"取得 🚚"}}).
		Enqueue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info := waitWorkflow(t, r.Client, res.Workflow)
	if info.State != workq.WorkflowCompleted || info.Name != "注文 №42 — Größe" {
		t.Fatalf("workflow %+v", info)
	}
	if s, _ := got.Load().(string); s != "取得 🚚-out" {
		t.Errorf("Output by a unicode name: %q", s)
	}
	ws, err := r.ListWorkflows(ctx, workq.ListWorkflowsParams{NamePrefix: "注文"})
	if err != nil || len(ws) != 1 {
		t.Errorf("ListWorkflows by a unicode prefix: %v (%v)", ws, err)
	}
	tasks, err := r.WorkflowTasks(ctx, res.Workflow)
	if err != nil || len(tasks) != 2 || tasks[1].DependsOn[0] != "取得 🚚" {
		t.Errorf("tasks %+v (%v)", tasks, err)
	}
}

// Wait and WaitWorkflow with a deadline return the deadline's error soon
// after it, and give their connection back to the pool.
func TestReviewWaitWithDeadline(t *testing.T) {
	r := startRig(t, workq.MaintenanceConfig{}, nil)
	ctx := context.Background()
	res, err := r.NewWorkflow("slow", nil).Add("later", rvStepArgs{Step: "later"}, &workq.TaskOpts{Enqueue: &workq.EnqueueOpts{Delay: time.Hour}}).
		Enqueue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	base := r.pool.Stat().AcquiredConns()
	for _, wait := range []func(context.Context) error{
		func(ctx context.Context) error {
			_, err := r.Wait(ctx, workq.ItemRef{ID: res.Tasks["later"]})
			return err
		},
		func(ctx context.Context) error { _, err := r.WaitWorkflow(ctx, res.Workflow); return err },
	} {
		start := time.Now()
		wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		err := wait(wctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("wait: %v, want context.DeadlineExceeded", err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("wait returned %v after a 300ms deadline", d)
		}
	}
	// the waits' connections are back in the pool
	deadline := time.Now().Add(10 * time.Second)
	for r.pool.Stat().AcquiredConns() > base && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := r.pool.Stat().AcquiredConns(); n > base {
		t.Errorf("%d connections acquired after the waits, %d before", n, base)
	}
}

// Retention with a tiny RetainFinished never deletes a task of a running
// workflow (its dependents read its output), and deletes the whole
// workflow once it has ended.
func TestReviewRetentionWaitsForTheWorkflow(t *testing.T) {
	release := make(chan struct{})
	var outErr atomic.Value
	r := startRig(t, workq.MaintenanceConfig{RetainFinished: time.Millisecond, RetentionInterval: time.Second, ReapInterval: 100 * time.Millisecond},
		func(r *rvRig, ctx context.Context, job *workq.Job[rvStepArgs]) error {
			if job.Args.Step == "merge" {
				<-release
				_, err := workq.Output[string](ctx, job, "fetch")
				outErr.Store(fmt.Sprint(err))
			}
			return nil
		})
	ctx := context.Background()
	res, err := r.NewWorkflow("keep", nil).
		Add("fetch", rvStepArgs{Step: "fetch"}, nil).
		Add("merge", rvStepArgs{Step: "merge"}, &workq.TaskOpts{DependsOn: []string{"fetch"}}).
		Enqueue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// a plain job finished at the same time goes: retention has run
	plain, err := r.Enqueue(ctx, rvStepArgs{Step: "plain"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := r.InSchema(r.pool).QueryRow(ctx, `select count(*) from workq.job_runs_all where id = $1`, plain.ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("retention never deleted the plain job")
		}
		time.Sleep(100 * time.Millisecond)
	}
	var fetchLeft int
	if err := r.InSchema(r.pool).QueryRow(ctx, `select count(*) from workq.job_runs_all where id = $1`, res.Tasks["fetch"]).Scan(&fetchLeft); err != nil {
		t.Fatal(err)
	}
	if fetchLeft != 1 {
		t.Fatal("retention deleted a done task of a running workflow")
	}
	close(release)
	info := waitWorkflow(t, r.Client, res.Workflow)
	if info.State != workq.WorkflowCompleted {
		t.Fatalf("workflow %s", info.State)
	}
	if s, _ := outErr.Load().(string); s != "<nil>" {
		t.Errorf("merge read fetch's output: %s", s)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		var rows int
		if err := r.InSchema(r.pool).QueryRow(ctx, `select (select count(*) from workq.job_runs_all) + (select count(*) from workq.workflow_tasks)
			+ (select count(*) from workq.workflow_deps) + (select count(*) from workq.workflows)`).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if rows == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d rows left 30s after the workflow ended", rows)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A workflow of 20,000 tasks (a fan-out and a fan-in) written by EnqueueTx
// in one transaction.
func TestReviewWorkflow20000TasksTx(t *testing.T) {
	if testing.Short() {
		t.Skip("20,000 tasks: not in -short")
	}
	pool := testdb.Pool(t)
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[rvStepArgs]) error { return nil }))
	c, err := workq.NewClient(pool, workq.Config{Workers: workers, Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	w := c.NewWorkflow("big", nil).Add("root", rvStepArgs{Step: "root"}, nil)
	names := make([]string, 0, 19_998)
	for i := range 19_998 {
		name := fmt.Sprintf("leaf-%05d", i)
		names = append(names, name)
		w.Add(name, rvStepArgs{Step: "leaf"}, &workq.TaskOpts{DependsOn: []string{"root"}})
	}
	w.Add("join", rvStepArgs{Step: "join"}, &workq.TaskOpts{DependsOn: names})
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	start := time.Now()
	res, err := w.EnqueueTx(ctx, tx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("20,000 tasks and 39,996 edges written in %v", time.Since(start))
	if len(res.Tasks) != 20_000 {
		t.Fatalf("%d task ids", len(res.Tasks))
	}
	info, err := c.GetWorkflow(ctx, res.Workflow)
	if err != nil || info.Tasks != 20_000 {
		t.Fatalf("workflow %+v (%v)", info, err)
	}
	var ready, pending, edges int
	if err := c.InSchema(pool).QueryRow(ctx, `select count(*) filter (where status = 0), count(*) filter (where status = -1),
		(select count(*) from workq.workflow_deps) from workq.job_runs_all`).Scan(&ready, &pending, &edges); err != nil {
		t.Fatal(err)
	}
	if ready != 1 || pending != 19_999 || edges != 2*19_998 {
		t.Errorf("%d ready, %d pending, %d edges; want 1, 19999, %d", ready, pending, edges, 2*19_998)
	}
}

// RetryWorkflow right after CancelWorkflow, while a task the cancel asked
// to stop still runs (its handler has not returned yet): the retry "lifts
// the cancel", so the workflow should run to completion once that task
// returns done. Today the running task's own cancel request stays, it
// ends cancelled though its handler succeeded, its revived dependent is
// cancelled again, and the workflow ends failed.
func TestReviewRetryAfterCancelWhileTaskRuns(t *testing.T) {
	release := make(chan struct{})
	r := startRig(t, workq.MaintenanceConfig{}, func(r *rvRig, ctx context.Context, job *workq.Job[rvStepArgs]) error {
		if job.Args.Step == "slow" && r.runsOf("slow") == 1 {
			<-release // a handler that finishes its unit of work whatever ctx says
		}
		return nil
	})
	ctx := context.Background()
	res, err := r.NewWorkflow("cancel then retry", nil).
		Add("slow", rvStepArgs{Step: "slow"}, nil).
		Add("after", rvStepArgs{Step: "after"}, &workq.TaskOpts{DependsOn: []string{"slow"}}).
		Enqueue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.started:
	case <-time.After(30 * time.Second):
		t.Fatal("slow never started")
	}
	if _, err := r.CancelWorkflow(ctx, res.Workflow, nil); err != nil {
		t.Fatal(err)
	}
	// The running task was told to stop and ends cancelled whatever its
	// handler returns: a retry now would lose it, so it is refused.
	if _, err := r.RetryWorkflow(ctx, res.Workflow, nil); !errors.Is(err, workq.ErrWrongState) {
		t.Fatalf("retry while the cancel winds down: %v, want ErrWrongState", err)
	}
	close(release)
	if info := waitWorkflow(t, r.Client, res.Workflow); info.State != workq.WorkflowCancelled {
		t.Fatalf("workflow %s after the cancel, want cancelled", info.State)
	}
	if _, err := r.RetryWorkflow(ctx, res.Workflow, nil); err != nil {
		t.Fatal(err)
	}
	info := waitWorkflow(t, r.Client, res.Workflow)
	checkCounts(t, r.Client, r.pool, res.Workflow)
	if info.State != workq.WorkflowCompleted {
		tasks, _ := r.WorkflowTasks(ctx, res.Workflow)
		for _, k := range tasks {
			t.Logf("task %s: %s (%s)", k.Name, k.State, k.LastError)
		}
		t.Errorf("workflow %s after a retry of the ended workflow, want completed", info.State)
	}
}

// Tasks complete while other goroutines cancel and retry the workflow over
// and over: no deadlock (or other) error reaches the caller, and once it
// has ended its counts equal its tasks' states.
func TestReviewCancelRetryRaceWithCompletions(t *testing.T) {
	r := startRig(t, workq.MaintenanceConfig{}, func(r *rvRig, ctx context.Context, job *workq.Job[rvStepArgs]) error {
		select {
		case <-time.After(time.Duration(job.ID%5) * time.Millisecond):
		case <-ctx.Done():
		}
		return nil
	})
	ctx := context.Background()
	w := r.NewWorkflow("race", nil)
	var names []string
	for i := range 60 {
		name := fmt.Sprintf("t%d", i)
		var deps []string
		if i >= 20 {
			deps = []string{fmt.Sprintf("t%d", i-20)}
			if d := (i * 7) % 20; d != i-20 {
				deps = append(deps, fmt.Sprintf("t%d", d))
			}
		}
		w.Add(name, rvStepArgs{Step: name}, &workq.TaskOpts{DependsOn: deps})
		names = append(names, name)
	}
	w.Add("report", rvStepArgs{Step: "report"}, &workq.TaskOpts{DependsOnAnyOutcome: names})
	res, err := w.Enqueue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				var err error
				if g%2 == 0 {
					_, err = r.CancelWorkflow(ctx, res.Workflow, nil)
					if errors.Is(err, workq.ErrWorkflowEnded) {
						err = nil
					}
				} else {
					_, err = r.RetryWorkflow(ctx, res.Workflow, nil)
					if errors.Is(err, workq.ErrWrongState) { // a cancel winding down
						err = nil
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("cancel or retry: %v", err)
	}
	// let it end: retry until it completes
	deadline := time.Now().Add(60 * time.Second)
	for {
		info := waitWorkflow(t, r.Client, res.Workflow)
		checkCounts(t, r.Client, r.pool, res.Workflow)
		if info.State == workq.WorkflowCompleted || t.Failed() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("workflow still %s after a minute of retries", info.State)
		}
		if _, err := r.RetryWorkflow(ctx, res.Workflow, nil); err != nil && !errors.Is(err, workq.ErrWrongState) {
			t.Fatal(err)
		}
	}
}

// The order pipeline on a sharded Client: fetch fans out dynamically
// (AddTasks in its transaction), a batch with its callback, Wait from Go;
// every call finds the workflow on its shard without being told.
func TestReviewShardedDynamicPipelineAndBatch(t *testing.T) {
	pa, pb := testdb.Pool(t), testdb.Pool(t)
	workers := workq.NewWorkers()
	var cbCounts atomic.Value
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[rvStepArgs]) error {
		switch {
		case job.Args.Step == "fetch":
			add, err := job.AddTasks(ctx)
			if err != nil {
				return err
			}
			var parts []string
			for i := range 5 {
				n := fmt.Sprintf("resize-%d", i)
				parts = append(parts, n)
				add.Add(n, rvStepArgs{Step: "resize"}, &workq.TaskOpts{DependsOn: []string{"fetch"}})
			}
			add.Add("merge", rvStepArgs{Step: "merge"}, &workq.TaskOpts{DependsOn: parts})
			add.Add("notify", rvStepArgs{Step: "notify"}, &workq.TaskOpts{DependsOn: []string{"merge"}})
			add.Add("cleanup", rvStepArgs{Step: "cleanup"}, &workq.TaskOpts{DependsOnAnyOutcome: []string{"notify"}})
			_, err = add.Enqueue(ctx)
			return err
		case job.Args.Step == "merge":
			if _, err := workq.Output[string](ctx, job, "resize-3"); err != nil {
				return workq.Permanent(err)
			}
			return job.SetOutput("merged")
		case job.Args.Step == "callback":
			n, err := workq.BatchResults(ctx, job)
			if err != nil {
				return err
			}
			cbCounts.Store(n)
		case job.Args.FailFirst:
			return workq.Permanent(errors.New("bad item"))
		}
		return nil
	}))
	c, err := workq.NewShardedClient([]workq.Shard{{Name: "a", Pool: pa}, {Name: "b", Pool: pb}},
		workq.Config{Workers: workers, Maintenance: workq.MaintenanceConfig{Disabled: true}, FetchPollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	var refs []workq.WorkflowRef
	for range 2 { // one per shard
		res, err := c.NewWorkflow("order", nil).Add("fetch", rvStepArgs{Step: "fetch"}, nil).Enqueue(ctx)
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, res.Workflow)
	}
	if refs[0].Shard == refs[1].Shard {
		t.Errorf("both workflows on shard %s", refs[0].Shard)
	}
	for _, ref := range refs {
		info, err := c.WaitWorkflow(ctx, workq.WorkflowRef{ID: ref.ID, Shard: ref.Shard})
		if err != nil {
			t.Fatal(err)
		}
		if info.State != workq.WorkflowCompleted || info.Tasks != 9 || info.Done != 9 {
			t.Errorf("workflow %+v, want completed with 9 done", info)
		}
	}
	batch, err := c.NewBatch("import", []workq.EnqueueParams{{Args: rvStepArgs{Step: "x"}}, {Args: rvStepArgs{Step: "y", FailFirst: true}},
		{Args: rvStepArgs{Step: "z"}}}, rvStepArgs{Step: "callback"}, nil).Enqueue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	end, err := c.Wait(wctx, workq.ItemRef{ID: batch.Tasks[workq.BatchCallback], Shard: batch.Workflow.Shard})
	if err != nil || end.State != workq.JobStateDone {
		t.Fatalf("callback %+v (%v)", end, err)
	}
	if n, _ := cbCounts.Load().(workq.BatchCounts); n != (workq.BatchCounts{Done: 2, Failed: 1, Total: 3}) {
		t.Errorf("batch counts %+v, want 2 done, 1 failed of 3", n)
	}
}

// A chain of 10,000 tasks whose first fails: the cancel cascades down the
// whole chain (a work list in one statement), the workflow fails, and
// RetryWorkflow brings the chain back, pending, behind its first task.
func TestReviewDeepChainCascade(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 tasks: not in -short")
	}
	r := startRig(t, workq.MaintenanceConfig{}, nil)
	ctx := context.Background()
	const n = 10_000
	w := r.NewWorkflow("chain", nil).Add("t0", rvStepArgs{Step: "t0", FailFirst: true}, nil)
	for i := 1; i < n; i++ {
		w.Add(fmt.Sprintf("t%d", i), rvStepArgs{Step: "link", Block: true}, &workq.TaskOpts{DependsOn: []string{fmt.Sprintf("t%d", i-1)}})
	}
	res, err := w.Enqueue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	info := waitWorkflow(t, r.Client, res.Workflow)
	t.Logf("the cascade of %d cancels took %v", n-1, time.Since(start))
	if info.State != workq.WorkflowFailed || info.Failed != 1 || info.Cancelled != n-1 {
		t.Fatalf("workflow %+v, want failed with 1 failed, %d cancelled", info, n-1)
	}
	checkCounts(t, r.Client, r.pool, res.Workflow)
	start = time.Now()
	got, err := r.RetryWorkflow(ctx, res.Workflow, nil)
	if err != nil || got != 1 {
		t.Fatalf("RetryWorkflow revived %d (%v), want 1", got, err)
	}
	t.Logf("the retry's revive of %d tasks took %v", n, time.Since(start))
	// t0 now succeeds; t1 runs and blocks; the rest wait
	select {
	case <-r.started: // t0
	case <-time.After(30 * time.Second):
		t.Fatal("t0 never ran again")
	}
	var pending int
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := r.InSchema(r.pool).QueryRow(ctx, `select count(*) from workq.job_runs_all where status = -1`).Scan(&pending); err != nil {
			t.Fatal(err)
		}
		if pending == n-2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if pending != n-2 {
		t.Errorf("%d tasks pending after the retry, want %d", pending, n-2)
	}
	if _, err := r.CancelWorkflow(ctx, res.Workflow, nil); err != nil {
		t.Fatal(err)
	}
	info = waitWorkflow(t, r.Client, res.Workflow)
	if info.State != workq.WorkflowCancelled {
		t.Errorf("workflow %s after CancelWorkflow", info.State)
	}
	checkCounts(t, r.Client, r.pool, res.Workflow)
}

// An attempt that records an output and then fails stores nothing: the
// dependent reads the output of the attempt that ended done (here none:
// the zero value), and two workflows with the same task names each read
// their own.
func TestReviewOutputOfAnotherAttempt(t *testing.T) {
	var mu sync.Mutex
	read := map[int64]string{}
	r := startRig(t, workq.MaintenanceConfig{}, func(r *rvRig, ctx context.Context, job *workq.Job[rvStepArgs]) error {
		switch job.Args.Step {
		case "flaky":
			if job.Attempt == 1 {
				if err := job.SetOutput("from the failed attempt"); err != nil {
					return err
				}
				return workq.RetryIn(10*time.Millisecond, errors.New("try again"))
			}
			return errSkipOutput // done, recording nothing
		case "reader":
			s, err := workq.Output[string](ctx, job, "flaky")
			if err != nil {
				return workq.Permanent(err)
			}
			o, err := workq.Output[string](ctx, job, "own")
			if err != nil {
				return workq.Permanent(err)
			}
			mu.Lock()
			read[job.ID] = s + "|" + o
			mu.Unlock()
			return errSkipOutput
		}
		return nil
	})
	ctx := context.Background()
	var reader []int64
	for i := range 2 {
		res, err := r.NewWorkflow("same names", nil).
			Add("flaky", rvStepArgs{Step: "flaky"}, &workq.TaskOpts{Enqueue: &workq.EnqueueOpts{MaxAttempts: 3}}).
			Add("own", rvStepArgs{Step: fmt.Sprintf("own%d", i)}, nil).
			Add("reader", rvStepArgs{Step: "reader"}, &workq.TaskOpts{DependsOn: []string{"flaky", "own"}}).
			Enqueue(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info := waitWorkflow(t, r.Client, res.Workflow); info.State != workq.WorkflowCompleted {
			t.Fatalf("workflow %s", info.State)
		}
		reader = append(reader, res.Tasks["reader"])
	}
	mu.Lock()
	defer mu.Unlock()
	for i, id := range reader {
		if want := fmt.Sprintf("|own%d-out", i); read[id] != want {
			t.Errorf("reader %d read %q, want %q (no output from the failed attempt, its own workflow's task)", i, read[id], want)
		}
	}
}

// A task added to a running workflow behind a task that a failure had
// cancelled is cancelled at once; RetryWorkflow brings the failed task
// back, and with it the cancelled one and the added one, which then run.
func TestReviewAddedBehindCancelledComesBackOnRetry(t *testing.T) {
	release := make(chan struct{})
	r := startRig(t, workq.MaintenanceConfig{}, func(r *rvRig, ctx context.Context, job *workq.Job[rvStepArgs]) error {
		if job.Args.Step == "keepalive" {
			<-release
		}
		return nil
	})
	ctx := context.Background()
	res, err := r.NewWorkflow("grow", nil).
		Add("root", rvStepArgs{Step: "root", FailFirst: true}, nil).
		Add("mid", rvStepArgs{Step: "mid"}, &workq.TaskOpts{DependsOn: []string{"root"}}).
		Add("keepalive", rvStepArgs{Step: "keepalive"}, nil).
		Enqueue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := r.GetWorkflow(ctx, res.Workflow)
		if err != nil {
			t.Fatal(err)
		}
		if info.Failed == 1 && info.Cancelled == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("root never failed: %+v", info)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := r.AddToWorkflow(res.Workflow).Add("late", rvStepArgs{Step: "late"}, &workq.TaskOpts{DependsOn: []string{"mid"}}).Enqueue(ctx); err != nil {
		t.Fatal(err)
	}
	tasks, err := r.WorkflowTasks(ctx, res.Workflow)
	if err != nil || len(tasks) != 4 || tasks[3].Name != "late" || tasks[3].State != workq.JobStateCancelled {
		t.Fatalf("tasks %+v (%v), want late cancelled at once", tasks, err)
	}
	if n, err := r.RetryWorkflow(ctx, res.Workflow, nil); err != nil || n != 1 {
		t.Fatalf("RetryWorkflow revived %d (%v), want 1", n, err)
	}
	close(release)
	info := waitWorkflow(t, r.Client, res.Workflow)
	checkCounts(t, r.Client, r.pool, res.Workflow)
	if info.State != workq.WorkflowCompleted || info.Done != 4 {
		t.Errorf("workflow %+v, want completed with 4 done", info)
	}
	for step, want := range map[string]int{"root": 2, "mid": 1, "late": 1, "keepalive": 1} {
		if got := r.runsOf(step); got != want {
			t.Errorf("%s ran %d times, want %d", step, got, want)
		}
	}
}

// NewBatch's callback depends on the batch's tasks: dependencies given in
// its TaskOpts are refused (ErrInvalid), not silently dropped.
func TestReviewNewBatchRefusesCallbackDeps(t *testing.T) {
	r := startRig(t, workq.MaintenanceConfig{}, nil)
	ctx := context.Background()
	params := []workq.EnqueueParams{{Args: rvStepArgs{Step: "x"}}}
	for _, opts := range []*workq.TaskOpts{{DependsOn: []string{"0"}}, {DependsOnAnyOutcome: []string{"elsewhere"}}} {
		_, err := r.NewBatch("b", params, rvStepArgs{Step: "callback"}, opts).Enqueue(ctx)
		if !errors.Is(err, workq.ErrInvalid) {
			t.Errorf("NewBatch with callback options %+v: %v, want ErrInvalid", opts, err)
		}
	}
	ws, err := r.ListWorkflows(ctx, workq.ListWorkflowsParams{})
	if err != nil || len(ws) != 0 {
		t.Errorf("workflows %v (%v), want none written", ws, err)
	}
}
