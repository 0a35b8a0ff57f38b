package workq_test

import (
	"context"
	"errors"
	"testing"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
)

// TestRetryCancelledWorkflowKeepsDependentsPending: a workflow cancelled
// before any task ran, then retried, must run its tasks in dependency
// order again: a task whose dependencies have not ended comes back
// pending, not ready. Found by the CLI's `workflows cancel` then `retry`
// (branch hapi): the retry revives every cancelled task to ready, so
// "sum" would run before "a" and "b". Fails until the core is fixed.
func TestRetryCancelledWorkflowKeepsDependentsPending(t *testing.T) {
	ctx := context.Background()
	c, err := workq.NewClient(testdb.Pool(t), workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.NewWorkflow("cancel-retry", nil).
		Add("a", workq.RawArgs{KindName: "k"}, nil).
		Add("b", workq.RawArgs{KindName: "k"}, nil).
		Add("sum", workq.RawArgs{KindName: "k"}, &workq.TaskOpts{DependsOn: []string{"a", "b"}}).
		Add("after", workq.RawArgs{KindName: "k"}, &workq.TaskOpts{DependsOnAnyOutcome: []string{"sum"}}).
		Enqueue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := c.CancelWorkflow(ctx, res.Workflow, nil); err != nil || r.Cancelled != 4 {
		t.Fatalf("cancel: %+v %v", r, err)
	}
	if _, err := c.RetryWorkflow(ctx, res.Workflow, nil); err != nil {
		t.Fatal(err)
	}
	tasks, err := c.WorkflowTasks(ctx, res.Workflow)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]workq.JobState{"a": workq.JobStateReady, "b": workq.JobStateReady, "sum": "pending", "after": "pending"}
	for _, tk := range tasks {
		if tk.State != want[tk.Name] {
			t.Errorf("after cancel and retry, task %s is %s with %d dependencies left, want %s", tk.Name, tk.State, tk.DepsLeft, want[tk.Name])
		}
	}
}

// TestAddToUnknownWorkflowIsNotFound: adding tasks to a workflow that does
// not exist is ErrNotFound whatever the tasks are; with a dependency on an
// earlier task it is ErrInvalid ("a dependency names a task workflow 999
// does not have"), so the API answers 400 instead of 404. Fails until the
// core checks the workflow first.
func TestAddToUnknownWorkflowIsNotFound(t *testing.T) {
	ctx := context.Background()
	c, err := workq.NewClient(testdb.Pool(t), workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	for _, deps := range [][]string{nil, {"earlier"}} {
		_, err := c.AddToWorkflow(workq.WorkflowRef{ID: 999}).
			Add("x", workq.RawArgs{KindName: "k"}, &workq.TaskOpts{DependsOn: deps}).Enqueue(ctx)
		if !errors.Is(err, workq.ErrNotFound) {
			t.Errorf("add to workflow 999 (depends on %v): %v, want ErrNotFound", deps, err)
		}
	}
}
