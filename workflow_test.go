package workq_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
)

type fetchArgs struct {
	URL string `json:"url"`
}

func (fetchArgs) Kind() string { return "wf.fetch" }

type fetched struct {
	Bytes int `json:"bytes"`
}

type sumArgs struct {
	Of []string `json:"of"`
}

func (sumArgs) Kind() string { return "wf.sum" }

type failArgs struct{}

func (failArgs) Kind() string { return "wf.fail" }

type splitArgs struct {
	N int `json:"n"`
}

func (splitArgs) Kind() string { return "wf.split" }

type doneArgs struct{}

func (doneArgs) Kind() string { return "wf.done" }

// wfClient runs a Client with the workflow test kinds; sums receives what
// each sum task computed, batches what each batch callback counted.
type wfClient struct {
	*workq.Client
	pool    *pgxpool.Pool
	mu      sync.Mutex
	sums    map[int64]int
	batches map[int64]workq.BatchCounts
}

func startWorkflowClient(t *testing.T) *wfClient {
	t.Helper()
	pool := testdb.Pool(t)
	wc := &wfClient{pool: pool, sums: map[int64]int{}, batches: map[int64]workq.BatchCounts{}}
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[fetchArgs]) error {
		return job.SetOutput(fetched{Bytes: len(job.Args.URL)})
	}))
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[sumArgs]) error {
		total := 0
		for _, name := range job.Args.Of {
			f, err := workq.Output[fetched](ctx, job, name)
			if err != nil {
				return workq.Permanent(err)
			}
			total += f.Bytes
		}
		wc.mu.Lock()
		wc.sums[job.ID] = total
		wc.mu.Unlock()
		return job.SetOutput(total)
	}))
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[failArgs]) error {
		return workq.Permanent(errors.New("no"))
	}))
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[splitArgs]) error {
		add, err := job.AddTasks(ctx)
		if err != nil {
			return err
		}
		var names []string
		for i := range job.Args.N {
			name := fmt.Sprintf("part-%d", i)
			names = append(names, name)
			add.Add(name, fetchArgs{URL: "x"}, &workq.TaskOpts{DependsOn: []string{"split"}})
		}
		add.Add("merge", sumArgs{Of: names}, &workq.TaskOpts{DependsOn: names})
		tx, err := wc.pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		if _, err := add.EnqueueTx(ctx, tx); err != nil {
			return err
		}
		if err := job.CompleteTx(ctx, tx); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}))
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[doneArgs]) error {
		n, err := workq.BatchResults(ctx, job)
		if err != nil {
			return err
		}
		wc.mu.Lock()
		wc.batches[job.ID] = n
		wc.mu.Unlock()
		return nil
	}))
	c, err := workq.NewClient(pool, workq.Config{Workers: workers, Maintenance: workq.MaintenanceConfig{Disabled: true},
		FetchPollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	wc.Client = c
	return wc
}

func waitWorkflow(t *testing.T, c *workq.Client, ref workq.WorkflowRef) workq.WorkflowInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := c.WaitWorkflow(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// A fan-out and fan-in: the sum runs after both fetches and reads their
// typed outputs; the workflow completes; Wait returns the sum's output.
func TestWorkflowFanInWithOutputs(t *testing.T) {
	c := startWorkflowClient(t)
	ctx := context.Background()
	res, err := c.NewWorkflow("report", nil).
		Add("a", fetchArgs{URL: "abc"}, nil).
		Add("b", fetchArgs{URL: "defgh"}, nil).
		Add("sum", sumArgs{Of: []string{"a", "b"}}, &workq.TaskOpts{DependsOn: []string{"a", "b"}}).
		Enqueue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	end, err := c.Wait(wctx, workq.ItemRef{Table: workq.TableJobRuns, ID: res.Tasks["sum"]})
	if err != nil {
		t.Fatal(err)
	}
	if end.State != workq.JobStateDone || string(end.Output) != "8" {
		t.Fatalf("sum ended %s with output %s, want done with 8", end.State, end.Output)
	}
	info := waitWorkflow(t, c.Client, res.Workflow)
	if info.State != workq.WorkflowCompleted || info.Tasks != 3 || info.Done != 3 {
		t.Fatalf("workflow %+v, want completed with 3 done", info)
	}
	if err := c.Delete(ctx, workq.ItemRef{Table: workq.TableJobRuns, ID: res.Tasks["a"]}); !errors.Is(err, workq.ErrWrongState) {
		t.Fatalf("delete of a task: %v, want ErrWrongState (a task goes with its workflow)", err)
	}
	tasks, err := c.WorkflowTasks(ctx, res.Workflow)
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 3 || tasks[2].Name != "sum" || len(tasks[2].DependsOn) != 2 || string(tasks[0].Output) != `{"bytes": 3}` {
		t.Fatalf("tasks %+v", tasks)
	}
}

// A failed dependency cancels its dependents, but not one that runs after
// any outcome; the workflow fails. Retrying the failed task cannot make it
// succeed here, but the cancelled dependent comes back pending with it.
func TestWorkflowFailureCancelsDependents(t *testing.T) {
	c := startWorkflowClient(t)
	ctx := context.Background()
	res, err := c.NewWorkflow("failing", nil).
		Add("bad", failArgs{}, nil).
		Add("after", fetchArgs{URL: "x"}, &workq.TaskOpts{DependsOn: []string{"bad"}}).
		Add("anyway", fetchArgs{URL: "y"}, &workq.TaskOpts{DependsOnAnyOutcome: []string{"bad"}}).
		Enqueue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info := waitWorkflow(t, c.Client, res.Workflow)
	if info.State != workq.WorkflowFailed || info.Failed != 1 || info.Cancelled != 1 || info.Done != 1 {
		t.Fatalf("workflow %+v, want failed: 1 failed, 1 cancelled, 1 done", info)
	}
}

// A task adds tasks to its own workflow in its transaction; the merge
// runs after every part; the workflow waits for the added tasks.
func TestWorkflowDynamicFanOut(t *testing.T) {
	c := startWorkflowClient(t)
	ctx := context.Background()
	res, err := c.NewWorkflow("dynamic", nil).Add("split", splitArgs{N: 5}, nil).Enqueue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info := waitWorkflow(t, c.Client, res.Workflow)
	if info.State != workq.WorkflowCompleted || info.Tasks != 7 {
		t.Fatalf("workflow %+v, want completed with 7 tasks", info)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.sums) != 1 {
		t.Fatalf("sums %v, want one merge", c.sums)
	}
	for _, s := range c.sums {
		if s != 5 {
			t.Fatalf("merge summed %d, want 5", s)
		}
	}
}

// A batch: the callback sees how the tasks ended.
func TestWorkflowBatchCallback(t *testing.T) {
	c := startWorkflowClient(t)
	ctx := context.Background()
	params := []workq.EnqueueParams{{Args: fetchArgs{URL: "a"}}, {Args: failArgs{}}, {Args: fetchArgs{URL: "b"}}}
	res, err := c.NewBatch("batch", params, doneArgs{}, nil).Enqueue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitWorkflow(t, c.Client, res.Workflow)
	c.mu.Lock()
	defer c.mu.Unlock()
	got := c.batches[res.Tasks[workq.BatchCallback]]
	if got != (workq.BatchCounts{Done: 2, Failed: 1, Total: 3}) {
		t.Fatalf("callback counted %+v, want 2 done, 1 failed of 3", got)
	}
}

// Refused shapes write nothing.
func TestWorkflowRefusedWritesNothing(t *testing.T) {
	c := startWorkflowClient(t)
	ctx := context.Background()
	for name, w := range map[string]*workq.Workflow{
		"cycle":   c.NewWorkflow("w", nil).Add("a", fetchArgs{}, &workq.TaskOpts{DependsOn: []string{"b"}}).Add("b", fetchArgs{}, &workq.TaskOpts{DependsOn: []string{"a"}}),
		"unknown": c.NewWorkflow("w", nil).Add("a", fetchArgs{}, &workq.TaskOpts{DependsOn: []string{"zz"}}),
		"dup":     c.NewWorkflow("w", nil).Add("a", fetchArgs{}, nil).Add("a", fetchArgs{}, nil),
		"kind":    c.NewWorkflow("w", nil).Add("a", workq.RawArgs{KindName: "no.such.kind"}, nil),
		"added":   c.AddToWorkflow(workq.WorkflowRef{ID: 1 << 40}).Add("a", fetchArgs{}, nil),
	} {
		if _, err := w.Enqueue(ctx); !errors.Is(err, workq.ErrInvalid) && !errors.Is(err, workq.ErrNotFound) {
			t.Errorf("%s: %v, want ErrInvalid or ErrNotFound", name, err)
		}
	}
	var n int
	if err := c.pool.QueryRow(ctx, "select (select count(*) from workq.workflows) + (select count(*) from workq.job_runs_all)").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows written, %v", n, err)
	}
}

// Cancelling a workflow cancels its waiting tasks and ends it cancelled.
func TestWorkflowCancel(t *testing.T) {
	c := startWorkflowClient(t)
	ctx := context.Background()
	res, err := c.NewWorkflow("later", nil).
		Add("first", fetchArgs{URL: "x"}, &workq.TaskOpts{Enqueue: &workq.EnqueueOpts{Delay: time.Hour}}).
		Add("second", fetchArgs{URL: "y"}, &workq.TaskOpts{DependsOn: []string{"first"}}).
		Enqueue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.CancelWorkflow(ctx, res.Workflow, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Cancelled != 2 {
		t.Fatalf("cancelled %+v, want 2 at once", r)
	}
	info := waitWorkflow(t, c.Client, res.Workflow)
	if info.State != workq.WorkflowCancelled || info.Cancelled != 2 {
		t.Fatalf("workflow %+v, want cancelled", info)
	}
	if _, err := c.CancelWorkflow(ctx, res.Workflow, nil); !errors.Is(err, workq.ErrWorkflowEnded) || !errors.Is(err, workq.ErrWrongState) {
		t.Fatalf("second cancel: %v, want ErrWorkflowEnded", err)
	}
	if _, err := c.AddToWorkflow(res.Workflow).Add("late", fetchArgs{}, nil).Enqueue(ctx); !errors.Is(err, workq.ErrWorkflowEnded) {
		t.Fatalf("add to a cancelled workflow: %v, want ErrWorkflowEnded", err)
	}
}

// A sharded Client puts a workflow on one shard and finds it by id alone.
func TestWorkflowSharded(t *testing.T) {
	ctx := context.Background()
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[fetchArgs]) error {
		return job.SetOutput(fetched{Bytes: len(job.Args.URL)})
	}))
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[sumArgs]) error {
		total := 0
		for _, name := range job.Args.Of {
			f, err := workq.Output[fetched](ctx, job, name)
			if err != nil {
				return workq.Permanent(err)
			}
			total += f.Bytes
		}
		return job.SetOutput(total)
	}))
	c, err := workq.NewShardedClient([]workq.Shard{{Name: "a", Pool: testdb.Pool(t)}, {Name: "b", Pool: testdb.Pool(t)}},
		workq.Config{Workers: workers, Maintenance: workq.MaintenanceConfig{Disabled: true}, FetchPollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	shards := map[string]bool{}
	for i := range 4 {
		res, err := c.NewWorkflow(fmt.Sprintf("w%d", i), nil).
			Add("a", fetchArgs{URL: "ab"}, nil).
			Add("sum", sumArgs{Of: []string{"a"}}, &workq.TaskOpts{DependsOn: []string{"a"}}).
			Enqueue(ctx)
		if err != nil {
			t.Fatal(err)
		}
		shards[res.Workflow.Shard] = true
		info := waitWorkflow(t, c, workq.WorkflowRef{ID: res.Workflow.ID, Shard: res.Workflow.Shard})
		if info.State != workq.WorkflowCompleted || info.Ref.Shard != res.Workflow.Shard {
			t.Fatalf("workflow %+v, want completed on %s", info, res.Workflow.Shard)
		}
		tasks, err := c.WorkflowTasks(ctx, workq.WorkflowRef{ID: res.Workflow.ID, Shard: res.Workflow.Shard})
		if err != nil || string(tasks[1].Output) != "2" {
			t.Fatalf("tasks %+v, %v", tasks, err)
		}
	}
	if len(shards) != 2 {
		t.Fatalf("workflows went to shards %v, want both", shards)
	}
	if _, err := c.NewWorkflow("tx", nil).Add("a", fetchArgs{}, nil).EnqueueTx(ctx, nil); !errors.Is(err, workq.ErrInvalid) {
		t.Fatalf("EnqueueTx on a sharded Client: %v, want ErrInvalid", err)
	}
}
