package api

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/testdb"
)

// A reviewer's attacks on the workflow endpoints: JSON of the wrong types,
// SQL-ish names, a chain of 10,000 tasks written in additions, cancels
// and retries racing the completions, an operator's delete of a finished
// task.

// Members of the wrong JSON type are 400 and write nothing.
func TestReviewWorkflowAPITypeConfusion(t *testing.T) {
	e := newWfEnv(t)
	var cr workflowCreated
	e.must(201, "POST", "/v1/workflows", e.admin, map[string]any{"name": "w", "tasks": []any{task("base", "wf.echo", with("delay", "1h"))}}).decode(t, &cr)
	id := strconv.FormatInt(cr.ID, 10)
	// a good body is taken by both paths (the cases differ from it in one member)
	good := `{"name": "w", "tasks": [{"name": "ok", "kind": "wf.echo", "args": {"n": 1}, "delay": "1h"}]}`
	e.must(201, "POST", "/v1/workflows", e.admin, raw(good))
	e.must(201, "POST", "/v1/workflows/"+id+"/tasks", e.admin, raw(addition(good)))
	// args the kind's type cannot take are not checked by the API, for a
	// workflow's task as for a job (the handler's decode fails)
	e.must(201, "POST", "/v1/jobs", e.admin, raw(`{"kind": "wf.echo", "payload": {"n": "one"}, "run_at": "2100-01-01T00:00:00Z"}`))
	for name, body := range map[string]string{
		"tasks an object":          `{"name": "w", "tasks": {"name": "a", "kind": "wf.echo"}}`,
		"tasks a string":           `{"name": "w", "tasks": "a"}`,
		"name a number":            `{"name": 7, "tasks": [{"name": "a", "kind": "wf.echo"}]}`,
		"task name a number":       `{"name": "w", "tasks": [{"name": 1, "kind": "wf.echo"}]}`,
		"task name null":           `{"name": "w", "tasks": [{"name": null, "kind": "wf.echo"}]}`,
		"depends_on a string":      `{"name": "w", "tasks": [{"name": "a", "kind": "wf.echo"}, {"name": "b", "kind": "wf.echo", "depends_on": "a"}]}`,
		"depends_on numbers":       `{"name": "w", "tasks": [{"name": "a", "kind": "wf.echo"}, {"name": "b", "kind": "wf.echo", "depends_on": [0]}]}`,
		"depends_on a null member": `{"name": "w", "tasks": [{"name": "a", "kind": "wf.echo"}, {"name": "b", "kind": "wf.echo", "depends_on": [null]}]}`,
		"args a string":            `{"name": "w", "tasks": [{"name": "a", "kind": "wf.echo", "args": "{\"n\": 1}"}]}`,
		"priority a string":        `{"name": "w", "tasks": [{"name": "a", "kind": "wf.echo", "priority": "1"}]}`,
		"max_attempts a fraction":  `{"name": "w", "tasks": [{"name": "a", "kind": "wf.echo", "max_attempts": 1.5}]}`,
		"max_attempts huge":        `{"name": "w", "tasks": [{"name": "a", "kind": "wf.echo", "max_attempts": 1e20}]}`,
		"delay a number":           `{"name": "w", "tasks": [{"name": "a", "kind": "wf.echo", "delay": 1000}]}`,
		"delay negative":           `{"name": "w", "tasks": [{"name": "a", "kind": "wf.echo", "delay": "-1h"}]}`,
		"metadata of numbers":      `{"name": "w", "metadata": {"k": 1}, "tasks": [{"name": "a", "kind": "wf.echo"}]}`,
		"a top-level array":        `[{"name": "w", "tasks": [{"name": "a", "kind": "wf.echo"}]}]`,
		"two documents":            `{"name": "w", "tasks": [{"name": "a", "kind": "wf.echo"}]} {"name": "x"}`,
		"a NUL in a task name":     `{"name": "w", "tasks": [{"name": "a\u0000b", "kind": "wf.echo"}]}`,
		"a NUL in a workflow name": `{"name": "w\u0000", "tasks": [{"name": "a", "kind": "wf.echo"}]}`,
		"invalid UTF-8 escapes":    `{"name": "w", "tasks": [{"name": "\ud800", "kind": "wf.echo"}]}`,
	} {
		for _, path := range []string{"/v1/workflows", "/v1/workflows/" + id + "/tasks"} {
			t.Run(name+" "+path, func(t *testing.T) {
				before := snapshot(t, e.pool)
				e.skipValidate = true // the document would refuse the request itself
				b := body
				if strings.HasSuffix(path, "/tasks") {
					b = addition(b)
				}
				r := e.do("POST", path, e.admin, raw(b))
				e.skipValidate = false
				if r.status != 400 {
					t.Fatalf("status %d, want 400: %s", r.status, r.body)
				}
				if er := r.err(t); er.Message == "" || er.Code == "" {
					t.Fatalf("error %+v", er)
				}
				if snapshot(t, e.pool) != before {
					t.Fatal("a refused request changed the database")
				}
			})
		}
	}
}

// addition is a new workflow's body as an addition's: without its name.
func addition(body string) string { return strings.Replace(body, `{"name": "w", `, `{`, 1) }

// Names that look like SQL or LIKE patterns are only names: stored and
// read back as given, matched literally by name_prefix.
func TestReviewWorkflowAPISQLishNames(t *testing.T) {
	e := newWfEnv(t)
	evil := `a'); delete from workq.workflows; --`
	var cr workflowCreated
	e.must(201, "POST", "/v1/workflows", e.admin, map[string]any{"name": "%_" + evil, "tasks": []any{
		task(evil, "wf.echo"), task(`"b"\`, "wf.echo", with("depends_on", []string{evil})),
		task("%", "wf.echo", with("depends_on_any_outcome", []string{evil, `"b"\`}))}}).decode(t, &cr)
	e.must(201, "POST", "/v1/workflows", e.admin, map[string]any{"name": "other", "tasks": []any{task("x", "wf.echo")}})
	e.run()
	out := e.show(cr.ID, "?wait=30s")
	if out.Workflow.State != "completed" || out.Workflow.Name != "%_"+evil || len(out.Tasks) != 3 {
		t.Fatalf("workflow %+v", out)
	}
	if b := taskNamed(t, out, `"b"\`); len(b.DependsOn) != 1 || b.DependsOn[0] != evil {
		t.Fatalf("task b %+v", b)
	}
	var list workflowList
	for prefix, want := range map[string]int{"%25": 1, "_": 0, "%25_": 1, "o": 1, "%25_a'": 1} {
		e.must(200, "GET", "/v1/workflows?name_prefix="+prefix, e.read, nil).decode(t, &list)
		if len(list.Workflows) != want {
			t.Errorf("name_prefix %q: %d workflows, want %d", prefix, len(list.Workflows), want)
		}
	}
}

// A chain of 10,000 tasks written in additions of 1,000 (the API's batch),
// each addition's first task depending on the last one's last: it runs to
// the end in order, and the workflow completes with every task done once.
func TestReviewWorkflowAPIChainInAdditions(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 tasks: not in -short")
	}
	e := newWfEnv(t)
	const n, step = 10_000, MaxBatch
	var cr workflowCreated
	first := []any{}
	for i := range step {
		tk := task(fmt.Sprintf("t%d", i), "wf.echo", with("delay", "1h"))
		if i > 0 {
			tk = task(fmt.Sprintf("t%d", i), "wf.echo", with("depends_on", []string{fmt.Sprintf("t%d", i-1)}))
		}
		first = append(first, tk)
	}
	e.must(201, "POST", "/v1/workflows", e.admin, map[string]any{"name": "chain", "tasks": first}).decode(t, &cr)
	for base := step; base < n; base += step {
		tasks := make([]any, 0, step)
		for i := base; i < base+step; i++ {
			tasks = append(tasks, task(fmt.Sprintf("t%d", i), "wf.echo", with("depends_on", []string{fmt.Sprintf("t%d", i-1)})))
		}
		e.must(201, "POST", wfPath(cr.ID, "/tasks"), e.admin, map[string]any{"tasks": tasks})
	}
	out := e.show(cr.ID, "")
	if out.Workflow.Tasks != n || out.Workflow.State != "running" {
		t.Fatalf("workflow %+v", out.Workflow)
	}
	// cancel the chain's head (its delay is an hour): the cancel cascades
	// down all of it
	start := time.Now()
	e.must(200, "POST", "/v1/tables/job_runs/items/cancel", e.admin, map[string]any{"ids": []int64{out.Tasks[0].JobID}, "reason": "stop"})
	t.Logf("cancelling the head of a %d-task chain took %v", n, time.Since(start))
	out = e.show(cr.ID, "?wait=30s")
	if out.Workflow.State != "failed" || out.Workflow.Cancelled != n {
		t.Fatalf("workflow %+v, want failed with %d cancelled", out.Workflow, n)
	}
}

// Cancels and retries race the completions through the API: every
// answer is 200 or 409 (never a 500, a deadlock), and the workflow's
// counts equal its tasks' states once it has ended.
func TestReviewWorkflowAPICancelRetryRace(t *testing.T) {
	e := newWfEnv(t)
	tasks := []any{}
	for i := range 50 {
		var mods []func(map[string]any)
		if i >= 10 {
			mods = append(mods, with("depends_on", []string{fmt.Sprintf("t%d", i-10)}))
		}
		tasks = append(tasks, task(fmt.Sprintf("t%d", i), "wf.echo", mods...))
	}
	var cr workflowCreated
	e.must(201, "POST", "/v1/workflows", e.admin, map[string]any{"name": "race", "tasks": tasks}).decode(t, &cr)
	e.run()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []string
	stop := time.Now().Add(2 * time.Second)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			action := "/cancel"
			if g%2 == 1 {
				action = "/retry"
			}
			for time.Now().Before(stop) {
				r := e.do("POST", wfPath(cr.ID, action), e.admin, nil)
				if r.status != 200 && r.status != 409 {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("%s: %d %s", action, r.status, r.body))
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, b := range bad {
		t.Error(b)
	}
	for range 20 {
		out := e.show(cr.ID, "?wait=30s")
		if out.TimedOut {
			t.Fatal("the workflow did not end")
		}
		var done, failed, cancelled int
		for _, tk := range out.Tasks {
			switch tk.State {
			case "done":
				done++
			case "failed":
				failed++
			case "cancelled":
				cancelled++
			default:
				t.Fatalf("task %s %s in an ended workflow", tk.Name, tk.State)
			}
		}
		w := out.Workflow
		if w.Tasks != len(out.Tasks) || w.Done != done || w.Failed != failed || w.Cancelled != cancelled {
			t.Fatalf("workflow counts %+v; tasks %d done, %d failed, %d cancelled", w, done, failed, cancelled)
		}
		if w.State == "completed" {
			return
		}
		e.must(200, "POST", wfPath(cr.ID, "/retry"), e.admin, nil)
	}
	t.Fatal("the workflow never completed after 20 retries")
}

// An operator deletes a finished task of a running workflow (the items
// endpoint takes any finished job run): the workflow's counts and its
// listed tasks then disagree, and its dependent, released, can no longer
// read the output it depended on.
func TestReviewWorkflowAPIDeleteFinishedTaskOfRunningWorkflow(t *testing.T) {
	e := newWfEnv(t)
	var cr workflowCreated
	e.must(201, "POST", "/v1/workflows", e.admin, map[string]any{"name": "w", "tasks": []any{
		task("a", "wf.echo"), task("slow", "wf.echo", with("delay", "1h")),
		task("b", "wf.echo", with("depends_on", []string{"a", "slow"}))}}).decode(t, &cr)
	e.run()
	deadline := time.Now().Add(30 * time.Second)
	for taskNamed(t, e.show(cr.ID, ""), "a").State != "done" {
		if time.Now().After(deadline) {
			t.Fatal("a never ran")
		}
		time.Sleep(50 * time.Millisecond)
	}
	r := e.do("POST", "/v1/tables/job_runs/items/delete", e.admin, map[string]any{"ids": []int64{cr.Tasks["a"]}})
	out := e.show(cr.ID, "")
	t.Logf("delete: %d %s; workflow %+v with %d tasks listed", r.status, r.body, out.Workflow, len(out.Tasks))
	if r.status == 200 && strings.Contains(string(r.body), `"applied":[`+strconv.FormatInt(cr.Tasks["a"], 10)+`]`) && out.Workflow.Tasks != len(out.Tasks) {
		t.Errorf("the delete of a running workflow's finished task was applied: the workflow counts %d tasks (%d done) and lists %d",
			out.Workflow.Tasks, out.Workflow.Done, len(out.Tasks))
	}
}

// Waits hold a pooled connection each (they LISTEN on it) and nothing
// bounds how many run: a read token that opens as many ?wait= requests
// as the pool has connections holds every one of them for up to the wait
// (MaxWait, a minute), and every other request waits behind them.
func TestReviewWorkflowAPIWaitsExhaustThePool(t *testing.T) {
	const conns = 4
	var pool *pgxpool.Pool
	e := &wfEnv{}
	e.env = newEnv(t, func(s *setup) {
		s.config.Workers = wfWorkers(&e.failing)
		pool = testdb.PoolWith(t, conns)
		s.pool = pool
	})
	var cr workflowCreated
	e.must(201, "POST", "/v1/workflows", e.admin, map[string]any{"name": "w", "tasks": []any{task("a", "wf.echo", with("delay", "1h"))}}).decode(t, &cr)
	var wg sync.WaitGroup
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", e.http.URL+wfPath(cr.ID, "?wait=8s"), nil)
			req.Header.Set("Authorization", "Bearer "+e.read)
			if res, err := e.http.Client().Do(req); err == nil {
				res.Body.Close()
			}
		}()
	}
	defer wg.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for pool.Stat().AcquiredConns() < conns && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	e.skipValidate = true
	r := e.do("GET", "/v1/workflows", e.read, nil)
	e.skipValidate = false
	if d := time.Since(start); r.status != 200 || d > 3*time.Second {
		t.Errorf("a list beside %d waits answered %d after %v: the waits hold the whole pool", conns, r.status, d.Round(time.Millisecond))
	}
}
