package workq_test

import (
	"context"
	"testing"

	"github.com/workq/workq"
)

// A workflow cancelled by an operator while a task still waited for its
// dependency, then retried: the waiting task must come back pending (its
// dependency has not run again yet), not ready. Found by the dashboard's
// tests (internal/ui, TestWorkflowActions); it fails on the core as it is:
// RetryWorkflow revives the operator-cancelled dependent with LeaseRevive,
// straight to ready, so it runs before the task it depends on.
func TestWorkflowRetryAfterCancelKeepsDependentsPending(t *testing.T) {
	c := startWorkflowClient(t)
	ctx := context.Background()
	parked := &workq.EnqueueOpts{Queue: "parked"} // no worker takes it: root stays ready
	res, err := c.NewWorkflow("cancel-retry", nil).
		Add("root", fetchArgs{URL: "r"}, &workq.TaskOpts{Enqueue: parked}).
		Add("child", fetchArgs{URL: "c"}, &workq.TaskOpts{Enqueue: parked, DependsOn: []string{"root"}}).
		Enqueue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CancelWorkflow(ctx, res.Workflow, &workq.ActionOpts{Actor: "test"}); err != nil {
		t.Fatal(err)
	}
	n, err := c.RetryWorkflow(ctx, res.Workflow, &workq.ActionOpts{Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := c.WorkflowTasks(ctx, res.Workflow)
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]workq.JobState{}
	for _, tk := range tasks {
		states[tk.Name] = tk.State
	}
	if n != 2 || states["root"] != "ready" || states["child"] != workq.JobState(workq.StatePending) {
		t.Fatalf("after cancel and retry: %d revived, root %s, child %s; want 2, ready, pending (child depends on root, which has not run)",
			n, states["root"], states["child"])
	}
}
