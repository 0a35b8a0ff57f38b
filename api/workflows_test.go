package api

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
)

type wfEchoArgs struct {
	N int `json:"n"`
}

func (wfEchoArgs) Kind() string { return "wf.echo" }

type wfFlakyArgs struct{}

func (wfFlakyArgs) Kind() string { return "wf.flaky" }

// wfWorkers works wf.echo (its output is its args) and wf.flaky (fails
// for good while failing is set).
func wfWorkers(failing *atomic.Bool) *workq.Workers {
	ws := workq.NewWorkers()
	workq.AddWorker(ws, workq.WorkFunc(func(ctx context.Context, job *workq.Job[wfEchoArgs]) error {
		return job.SetOutput(job.Args)
	}))
	workq.AddWorker(ws, workq.WorkFunc(func(ctx context.Context, job *workq.Job[wfFlakyArgs]) error {
		if failing.Load() {
			return workq.Permanent(errors.New("flaky says no"))
		}
		return nil
	}))
	return ws
}

// wfEnv is an env whose Client knows the workflow test kinds (so it
// refuses others), and a worker Client on its database, started by run.
type wfEnv struct {
	*env
	failing atomic.Bool
}

func newWfEnv(t *testing.T) *wfEnv {
	w := &wfEnv{}
	w.env = newEnv(t, func(s *setup) { s.config.Workers = wfWorkers(&w.failing) })
	return w
}

// run starts workers of the test kinds on the env's database.
func (w *wfEnv) run() {
	t := w.t
	c, err := workq.NewClient(w.pool, workq.Config{Workers: wfWorkers(&w.failing), FetchPollInterval: 50 * time.Millisecond,
		Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
}

func task(name, kind string, mod ...func(map[string]any)) map[string]any {
	m := map[string]any{"name": name, "kind": kind}
	for _, f := range mod {
		f(m)
	}
	return m
}

func with(k string, v any) func(map[string]any) { return func(m map[string]any) { m[k] = v } }

func wfPath(id int64, rest string) string { return "/v1/workflows/" + strconv.FormatInt(id, 10) + rest }

func (w *wfEnv) show(id int64, query string) workflowWithTasks {
	var out workflowWithTasks
	w.must(200, "GET", wfPath(id, query), w.read, nil).decode(w.t, &out)
	return out
}

func taskNamed(t *testing.T, out workflowWithTasks, name string) taskRow {
	t.Helper()
	for _, tk := range out.Tasks {
		if tk.Name == name {
			return tk
		}
	}
	t.Fatalf("no task %q in %+v", name, out.Tasks)
	return taskRow{}
}

// TestWorkflowAPI: a fan-in workflow created, listed, shown and waited for
// through the API; its tasks' outputs in the workflow and in their items;
// an ended workflow refuses a cancel and more tasks (409), and takes a
// retry that revives nothing.
func TestWorkflowAPI(t *testing.T) {
	e := newWfEnv(t)
	var cr workflowCreated
	e.must(201, "POST", "/v1/workflows", e.admin, map[string]any{"name": "report", "metadata": map[string]string{"team": "a"},
		"tasks": []any{
			task("a", "wf.echo", with("args", map[string]any{"n": 1}), with("priority", 3), with("max_attempts", 2)),
			task("b", "wf.echo", with("args", map[string]any{"n": 2}), with("metadata", map[string]string{"k": "v"})),
			task("sum", "wf.echo", with("depends_on", []string{"a", "b"})),
			task("report", "wf.echo", with("depends_on_any_outcome", []string{"sum"}), with("limit_key", "t1")),
		}}).decode(t, &cr)
	if cr.ID <= 0 || len(cr.Tasks) != 4 || cr.Tasks["sum"] <= 0 || cr.Shard != "" {
		t.Fatalf("created %+v", cr)
	}

	out := e.show(cr.ID, "")
	if out.Workflow.Name != "report" || out.Workflow.State != "running" || out.Workflow.Tasks != 4 || out.Workflow.Metadata["team"] != "a" || out.TimedOut {
		t.Fatalf("workflow %+v", out.Workflow)
	}
	if len(out.Tasks) != 4 || out.Tasks[0].Name != "a" || out.Tasks[3].Name != "report" {
		t.Fatalf("tasks %+v", out.Tasks)
	}
	a, sum, rep := out.Tasks[0], taskNamed(t, out, "sum"), taskNamed(t, out, "report")
	if a.State != "ready" || a.Queue != "default" || a.MaxAttempts != 2 || a.JobID != cr.Tasks["a"] || len(a.DependsOn) != 0 {
		t.Fatalf("task a %+v", a)
	}
	if sum.State != "pending" || strings.Join(sum.DependsOn, ",") != "a,b" || sum.DepsLeft != 2 {
		t.Fatalf("task sum %+v", sum)
	}
	if rep.State != "pending" || strings.Join(rep.DependsOnAnyOutcome, ",") != "sum" || len(rep.DependsOn) != 0 {
		t.Fatalf("task report %+v", rep)
	}
	var it itemWithAttempts
	e.must(200, "GET", "/v1/tables/job_runs/items/"+strconv.FormatInt(cr.Tasks["a"], 10), e.read, nil).decode(t, &it)
	if it.Item.Priority != 3 || it.Item.Details["workflow_id"] != float64(cr.ID) || it.Item.Details["output"] != nil || it.TimedOut {
		t.Fatalf("task a's item %+v", it.Item)
	}

	// With no worker running, a wait runs out: 200, as it is, timed_out.
	start := time.Now()
	if out := e.show(cr.ID, "?wait=200ms"); !out.TimedOut || out.Workflow.State != "running" {
		t.Fatalf("a wait with nothing running: %+v", out)
	}
	e.must(200, "GET", "/v1/tables/job_runs/items/"+strconv.FormatInt(cr.Tasks["sum"], 10)+"?wait=200ms", e.read, nil).decode(t, &it)
	if !it.TimedOut || it.Item.Status != "pending" {
		t.Fatalf("a job's wait with nothing running: %+v", it)
	}
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Fatalf("two waits of 200ms took %s", d)
	}

	var list workflowList
	for q, want := range map[string]int{"": 1, "?state=running": 1, "?state=completed": 0, "?name_prefix=rep": 1, "?name_prefix=x": 0,
		"?limit=1": 1, "?before=" + strconv.FormatInt(cr.ID, 10): 0, "?before=" + strconv.FormatInt(cr.ID+1, 10): 1} {
		e.must(200, "GET", "/v1/workflows"+q, e.read, nil).decode(t, &list)
		if len(list.Workflows) != want || (want == 1 && list.Workflows[0].ID != cr.ID) {
			t.Fatalf("list %q: %+v, want %d", q, list.Workflows, want)
		}
	}

	e.run()
	out = e.show(cr.ID, "?wait=30s")
	if out.TimedOut || out.Workflow.State != "completed" || out.Workflow.Done != 4 || out.Workflow.FinishedAt == nil {
		t.Fatalf("after the wait: %+v", out.Workflow)
	}
	if o := string(taskNamed(t, out, "b").Output); o != `{"n":2}` {
		t.Fatalf("task b's output %s", o)
	}
	if tk := taskNamed(t, out, "sum"); tk.State != "done" || tk.Attempts != 1 || tk.DepsLeft != 0 || string(tk.Output) != `{"n":0}` {
		t.Fatalf("task sum %+v", tk)
	}
	it = itemWithAttempts{}
	e.must(200, "GET", "/v1/tables/job_runs/items/"+strconv.FormatInt(cr.Tasks["b"], 10)+"?wait=30s", e.read, nil).decode(t, &it)
	if it.TimedOut || it.Item.Status != "done" || it.Item.Details["workflow_id"] != float64(cr.ID) || fmt.Sprint(it.Item.Details["output"]) != "map[n:2]" {
		t.Fatalf("task b's item %+v", it.Item)
	}
	e.must(200, "GET", "/v1/workflows?state=completed", e.read, nil).decode(t, &list)
	if len(list.Workflows) != 1 {
		t.Fatalf("completed: %+v", list)
	}

	// An ended workflow: a cancel and more tasks are 409, and write nothing.
	before := snapshot(t, e.pool)
	if r := e.must(409, "POST", wfPath(cr.ID, "/cancel"), e.admin, nil); r.err(t).Code != CodeConflict {
		t.Fatalf("cancel of an ended workflow: %s", r.body)
	}
	e.must(409, "POST", wfPath(cr.ID, "/tasks"), e.admin, map[string]any{"tasks": []any{task("late", "wf.echo")}})
	if snapshot(t, e.pool) != before {
		t.Fatal("a refused request changed the database")
	}
	var rt workflowRetried
	e.must(200, "POST", wfPath(cr.ID, "/retry"), e.admin, map[string]any{"reason": "again"}).decode(t, &rt)
	if rt.ID != cr.ID || rt.Revived != 0 {
		t.Fatalf("retry of a completed workflow: %+v", rt)
	}
}

// TestWorkflowAPIRetryAndCancel: a failed task cancels its dependent;
// retry revives both and the workflow completes. A cancel ends the
// pending and ready tasks at once. Tasks added to a running workflow
// depend on its tasks.
func TestWorkflowAPIRetryAndCancel(t *testing.T) {
	e := newWfEnv(t)
	e.failing.Store(true)
	e.run()
	var cr workflowCreated
	e.must(201, "POST", "/v1/workflows", e.admin, map[string]any{"name": "flaky", "tasks": []any{
		task("bad", "wf.flaky"), task("after", "wf.echo", with("depends_on", []string{"bad"}))}}).decode(t, &cr)
	out := e.show(cr.ID, "?wait=30s")
	if out.Workflow.State != "failed" || out.Workflow.Failed != 1 || out.Workflow.Cancelled != 1 {
		t.Fatalf("failed workflow %+v", out.Workflow)
	}
	if bad := taskNamed(t, out, "bad"); bad.State != "failed" || !strings.Contains(bad.LastError, "flaky says no") {
		t.Fatalf("task bad %+v", bad)
	}
	e.failing.Store(false)
	var rt workflowRetried
	e.must(200, "POST", wfPath(cr.ID, "/retry"), e.admin, map[string]any{"reason": "fixed"}).decode(t, &rt)
	// The failed task; its dependent comes back pending with it (the
	// database's trigger), and is not counted.
	if rt.Revived != 1 {
		t.Fatalf("retry revived %d, want 1 (the failed task)", rt.Revived)
	}
	if out := e.show(cr.ID, "?wait=30s"); out.Workflow.State != "completed" || out.Workflow.Done != 2 {
		t.Fatalf("after retry %+v", out.Workflow)
	}

	// A workflow whose first task waits an hour: tasks added to it, then cancelled.
	e.must(201, "POST", "/v1/workflows", e.admin, map[string]any{"name": "later", "tasks": []any{
		task("first", "wf.echo", with("delay", "1h"), with("queue", "wq"))}}).decode(t, &cr)
	var add workflowCreated
	e.must(201, "POST", wfPath(cr.ID, "/tasks"), e.admin, map[string]any{"tasks": []any{
		task("second", "wf.echo", with("depends_on", []string{"first"})), task("third", "wf.echo", with("depends_on", []string{"second"}))}}).decode(t, &add)
	if add.ID != cr.ID || len(add.Tasks) != 2 || add.Tasks["third"] <= 0 {
		t.Fatalf("added %+v", add)
	}
	out = e.show(cr.ID, "")
	if len(out.Tasks) != 3 || taskNamed(t, out, "second").State != "pending" || taskNamed(t, out, "first").State != "ready" || taskNamed(t, out, "first").Queue != "wq" {
		t.Fatalf("after adding: %+v", out.Tasks)
	}
	var cc workflowCancelled
	e.must(200, "POST", wfPath(cr.ID, "/cancel"), e.admin, map[string]any{"reason": "not needed"}).decode(t, &cc)
	if cc.Cancelled != 3 || cc.Requested != 0 {
		t.Fatalf("cancel %+v", cc)
	}
	out = e.show(cr.ID, "?wait=30s")
	if out.Workflow.State != "cancelled" || out.Workflow.Cancelled != 3 || out.Workflow.CancelRequestedAt == nil {
		t.Fatalf("cancelled workflow %+v", out.Workflow)
	}
	e.must(409, "POST", wfPath(cr.ID, "/cancel"), e.admin, nil)
}

// TestWorkflowAPIRefusesInvalid: every bad request is a 400 (404 for an
// unknown workflow, 403 for a read token) in the API's error shape,
// naming the field when one is wrong, and writes nothing.
func TestWorkflowAPIRefusesInvalid(t *testing.T) {
	e := newWfEnv(t)
	var cr workflowCreated
	e.must(201, "POST", "/v1/workflows", e.admin, map[string]any{"name": "w", "tasks": []any{task("a", "wf.echo", with("delay", "1h"))}}).decode(t, &cr)
	var job jobResult
	e.must(201, "POST", "/v1/outbox", e.admin, map[string]any{"topic": "t"}).decode(t, &job)
	id := strconv.FormatInt(cr.ID, 10)
	wf := func(tasks ...any) map[string]any { return map[string]any{"name": "w", "tasks": tasks} }
	many := make([]any, MaxBatch+1)
	for i := range many {
		many[i] = task(fmt.Sprintf("t%d", i), "wf.echo")
	}
	cases := []struct {
		name, method, path, token string
		body                      any
		status                    int
		field, text               string
	}{
		{"cycle", "POST", "/v1/workflows", e.admin, wf(task("a", "wf.echo", with("depends_on", []string{"b"})), task("b", "wf.echo", with("depends_on", []string{"a"}))), 400, "", "cycle"},
		{"unknown kind", "POST", "/v1/workflows", e.admin, wf(task("a", "wf.echo"), task("b", "wf.nobody")), 400, "tasks[1].kind", "wf.nobody"},
		{"unknown dependency", "POST", "/v1/workflows", e.admin, wf(task("a", "wf.echo", with("depends_on", []string{"nope"}))), 400, "", "nope"},
		{"unknown dependency of an addition", "POST", "/v1/workflows/" + id + "/tasks", e.admin, map[string]any{"tasks": []any{task("b", "wf.echo", with("depends_on", []string{"nope"}))}}, 400, "depends_on", "does not have"},
		{"existing name in an addition", "POST", "/v1/workflows/" + id + "/tasks", e.admin, map[string]any{"tasks": []any{task("a", "wf.echo")}}, 400, "", ""},
		{"bad JSON", "POST", "/v1/workflows", e.admin, raw(`{"name": "w", "tasks": [`), 400, "", "JSON"},
		{"a member twice", "POST", "/v1/workflows", e.admin, raw(`{"name": "w", "tasks": [{"name": "a", "name": "b", "kind": "wf.echo"}]}`), 400, "", "twice"},
		{"a member in other case", "POST", "/v1/workflows", e.admin, raw(`{"name": "w", "tasks": [{"Name": "a", "kind": "wf.echo"}]}`), 400, "", ""},
		{"args null", "POST", "/v1/workflows", e.admin, raw(`{"name": "w", "tasks": [{"name": "a", "kind": "wf.echo", "args": null}]}`), 400, "", ""},
		{"args not an object", "POST", "/v1/workflows", e.admin, wf(task("a", "wf.echo", with("args", []int{1}))), 400, "", ""},
		{"too many tasks", "POST", "/v1/workflows", e.admin, wf(many...), 400, "tasks", "at most 1000"},
		{"no tasks", "POST", "/v1/workflows", e.admin, wf(), 400, "tasks", ""},
		{"no name", "POST", "/v1/workflows", e.admin, map[string]any{"tasks": []any{task("a", "wf.echo")}}, 400, "name", ""},
		{"duplicate task", "POST", "/v1/workflows", e.admin, wf(task("a", "wf.echo"), task("a", "wf.echo")), 400, "tasks", "two tasks"},
		{"self dependency", "POST", "/v1/workflows", e.admin, wf(task("a", "wf.echo", with("depends_on", []string{"a"}))), 400, "", ""},
		{"bad delay", "POST", "/v1/workflows", e.admin, wf(task("a", "wf.echo", with("delay", "soon"))), 400, "tasks[0].delay", ""},
		{"empty queue", "POST", "/v1/workflows", e.admin, wf(task("a", "wf.echo", with("queue", ""))), 400, "tasks[0].queue", ""},
		{"run_at is no field", "POST", "/v1/workflows", e.admin, wf(task("a", "wf.echo", with("run_at", "2030-01-01T00:00:00Z"))), 400, "run_at", "unknown field"},
		{"unknown member", "POST", "/v1/workflows", e.admin, map[string]any{"name": "w", "tasks": []any{task("a", "wf.echo")}, "dedup_key": "x"}, 400, "dedup_key", ""},
		{"no body", "POST", "/v1/workflows", e.admin, nil, 400, "", "empty"},
		{"read token", "POST", "/v1/workflows", e.read, wf(task("a", "wf.echo")), 403, "", ""},
		{"query parameter", "POST", "/v1/workflows?x=1", e.admin, wf(task("a", "wf.echo")), 400, "x", ""},
		{"bad id", "GET", "/v1/workflows/x", e.read, nil, 400, "id", ""},
		{"wait too long", "GET", "/v1/workflows/" + id + "?wait=2m", e.read, nil, 400, "wait", "at most"},
		{"wait not a duration", "GET", "/v1/workflows/" + id + "?wait=long", e.read, nil, 400, "wait", ""},
		{"wait on an outbox message", "GET", "/v1/tables/outbox/items/" + strconv.FormatInt(job.ID, 10) + "?wait=1s", e.read, nil, 400, "wait", "job run"},
		{"list state", "GET", "/v1/workflows?state=done", e.read, nil, 400, "state", ""},
		{"list limit", "GET", "/v1/workflows?limit=0", e.read, nil, 400, "limit", ""},
		{"list before", "GET", "/v1/workflows?before=-1", e.read, nil, 400, "before", ""},
		{"list empty prefix", "GET", "/v1/workflows?name_prefix=", e.read, nil, 400, "name_prefix", ""},
		{"list unknown shard", "GET", "/v1/workflows?shard=s9", e.read, nil, 404, "", "s9"},
		{"unknown workflow", "GET", "/v1/workflows/999999", e.read, nil, 404, "", ""},
		{"wait for an unknown workflow", "GET", "/v1/workflows/999999?wait=1s", e.read, nil, 404, "", ""},
		{"wait for an unknown job", "GET", "/v1/tables/job_runs/items/999999?wait=1s", e.read, nil, 404, "", ""},
		{"cancel unknown", "POST", "/v1/workflows/999999/cancel", e.admin, nil, 404, "", ""},
		{"retry unknown", "POST", "/v1/workflows/999999/retry", e.admin, map[string]any{"reason": "r"}, 404, "", ""},
		{"add to unknown", "POST", "/v1/workflows/999999/tasks", e.admin, map[string]any{"tasks": []any{task("a", "wf.echo")}}, 404, "", ""},
		{"cancel unknown member", "POST", "/v1/workflows/" + id + "/cancel", e.admin, map[string]any{"why": "x"}, 400, "why", ""},
		{"retry long reason", "POST", "/v1/workflows/" + id + "/retry", e.admin, map[string]any{"reason": strings.Repeat("r", 2000)}, 400, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := snapshot(t, e.pool)
			r := e.do(c.method, c.path, c.token, c.body)
			if r.status != c.status {
				t.Fatalf("status %d, want %d: %s", r.status, c.status, r.body)
			}
			er := r.err(t)
			if er.Message == "" || er.Code == "" || (c.field != "" && er.Field != c.field) || !strings.Contains(er.Message, c.text) {
				t.Fatalf("error %+v, want field %q and a message with %q", er, c.field, c.text)
			}
			if snapshot(t, e.pool) != before {
				t.Fatal("a refused request changed the database")
			}
		})
	}
}

// TestWorkflowAPIOnTwoShards: a sharded API writes each workflow on one
// shard and names it; reads and actions find it by id alone (the Client
// looks it up) or by its shard; the same id on both shards needs the
// shard; a list pages one shard at a time.
func TestWorkflowAPIOnTwoShards(t *testing.T) {
	second := testdb.Pool(t)
	e := &wfEnv{env: newEnv(t, func(o *setup) {
		o.shards = []workq.Shard{{Name: "eu", Pool: o.pool}, {Name: "us", Pool: second}}
	})}
	shards := map[string]int64{}
	for range 2 { // round robin: one on each shard, both with id 1
		var cr workflowCreated
		e.must(201, "POST", "/v1/workflows", e.admin, map[string]any{"name": "w", "tasks": []any{task("a", "k", with("delay", "1h"))}}).decode(t, &cr)
		shards[cr.Shard] = cr.ID
	}
	if len(shards) != 2 || shards["eu"] != 1 || shards["us"] != 1 {
		t.Fatalf("two workflows on two shards: %v", shards)
	}
	if r := e.must(400, "GET", "/v1/workflows/1", e.read, nil); !strings.Contains(r.err(t).Message, "several shards") {
		t.Fatalf("an id on both shards without a shard: %s", r.body)
	}
	out := e.show(1, "?shard=us")
	if out.Workflow.Shard != "us" || len(out.Tasks) != 1 {
		t.Fatalf("workflow 1 of us: %+v", out)
	}
	var cc workflowCancelled
	e.must(200, "POST", wfPath(1, "/cancel"), e.admin, map[string]any{"shard": "eu"}).decode(t, &cc)
	if cc.Shard != "eu" || cc.Cancelled != 1 {
		t.Fatalf("cancel on eu: %+v", cc)
	}
	if out := e.show(1, "?shard=us"); out.Workflow.State != "running" {
		t.Fatalf("cancelling eu's workflow 1 changed us's: %+v", out.Workflow)
	}
	var list workflowList
	e.must(200, "GET", "/v1/workflows", e.read, nil).decode(t, &list)
	if len(list.Workflows) != 2 || list.Workflows[0].Shard != "eu" || list.Workflows[1].Shard != "us" {
		t.Fatalf("list over two shards: %+v", list.Workflows)
	}
	e.must(200, "GET", "/v1/workflows?shard=us&state=running", e.read, nil).decode(t, &list)
	if len(list.Workflows) != 1 || list.Workflows[0].Shard != "us" {
		t.Fatalf("list of us: %+v", list.Workflows)
	}
	e.must(400, "GET", "/v1/workflows?before=5", e.read, nil)
	e.must(404, "GET", "/v1/workflows/1?shard=asia", e.read, nil)
}
