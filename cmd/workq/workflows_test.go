package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/testutil"
)

// TestWorkflowsCLI runs the real binary: `workq workflows create`, `add`,
// `list`, `show` (a table, --json, --wait), `cancel` and `retry` do what
// they say; every bad input exits 1 with one line naming what is wrong
// and writes nothing.
func TestWorkflowsCLI(t *testing.T) {
	isolateEnv(t)
	bin := testutil.BuildWorkq(t, "../..")
	dbURL := testdb.URL(t)
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	run := func(args ...string) string {
		t.Helper()
		out, stderr, code := runBinary(t, bin, dbURL, args...)
		if code != 0 {
			t.Fatalf("workq %s: exit %d: %s", strings.Join(args, " "), code, stderr)
		}
		return out
	}
	show := func(args ...string) workflowShowJSON {
		t.Helper()
		var v workflowShowJSON
		if err := json.Unmarshal([]byte(run(append([]string{"workflows", "show", "--json"}, args...)...)), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	spec, err := filepath.Abs("testdata/workflow.json")
	if err != nil {
		t.Fatal(err)
	}
	addSpec, err := filepath.Abs("testdata/workflow_add.json")
	if err != nil {
		t.Fatal(err)
	}

	if out := run("workflows", "list"); out != "no workflows\n" {
		t.Fatalf("list of nothing: %q", out)
	}
	var created struct {
		ID    int64            `json:"id"`
		Shard string           `json:"shard"`
		Tasks map[string]int64 `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(run("workflows", "create", "--file", spec, "--json")), &created); err != nil {
		t.Fatal(err)
	}
	if created.ID != 1 || len(created.Tasks) != 4 || created.Tasks["sum"] == 0 || created.Shard != "" {
		t.Fatalf("create --json: %+v", created)
	}
	v := show("1")
	if v.Workflow.Name != "report" || v.Workflow.State != "running" || v.Workflow.Metadata["team"] != "data" || len(v.Tasks) != 4 {
		t.Fatalf("show --json: %+v", v)
	}
	if sum := v.Tasks[2]; sum.Name != "sum" || sum.State != "pending" || strings.Join(sum.DependsOn, ",") != "fetch-a,fetch-b" || sum.JobID != created.Tasks["sum"] {
		t.Fatalf("task sum: %+v", sum)
	}
	if b := v.Tasks[1]; b.Queue != "io" || b.MaxAttempts != 5 || b.State != "ready" {
		t.Fatalf("task fetch-b: %+v", b)
	}

	// The text: a line for the workflow, a table of its tasks.
	text := run("workflows", "show", "1")
	t.Logf("workq workflows show 1:\n%s", text)
	for _, want := range []string{
		"workflow 1 \"report\": running (4 tasks: 0 done, 0 failed, 0 cancelled)\n",
		"TASK     JOB  STATE    KIND    DEPENDS ON         ATTEMPTS  LAST ERROR\n",
		"fetch-a  1    ready    fetch   -                  0/4       -\n",
		"fetch-b  2    ready    fetch   -                  0/5       -\n",
		"sum      3    pending  sum     fetch-a, fetch-b   0/4       -\n",
		"notify   4    pending  notify  sum (any outcome)  0/4       -\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("show has no %q:\n%s", want, text)
		}
	}
	// A task's item names its workflow; a job run's output is shown as
	// JSON (set here by hand: no worker runs these kinds).
	if out := run("jobs", "show", "3"); !strings.Contains(out, "workflow id  1\n") {
		t.Fatalf("jobs show of a task:\n%s", out)
	}
	if _, err := pool.Exec(context.Background(), `update workq.job_runs set output = '{"n": 1}' where id = 1`); err != nil {
		t.Fatal(err)
	}
	if out := run("jobs", "show", "1"); !strings.Contains(out, `{"n": 1}`) {
		t.Fatalf("jobs show of a job run with an output:\n%s", out)
	}
	if v := show("1"); strings.Join(strings.Fields(string(v.Tasks[0].Output)), "") != `{"n":1}` {
		t.Fatalf("show --json of a task with an output: %s", v.Tasks[0].Output)
	}
	if out := run("workflows", "show", "1", "--wait", "200ms"); !strings.Contains(out, "(the wait ran out before it ended)") {
		t.Fatalf("show --wait with nothing running:\n%s", out)
	}

	if out := run("workflows", "add", "1", "--file", addSpec); !strings.HasPrefix(out, "workflow 1: 2 tasks\n") || !strings.Contains(out, "sum-c    6\n") {
		t.Fatalf("add:\n%s", out)
	}
	if v := show("1"); len(v.Tasks) != 6 || strings.Join(v.Tasks[5].DependsOn, ",") != "fetch-c,sum" {
		t.Fatalf("after add: %+v", v.Tasks)
	}
	run("workflows", "create", "--file", spec)
	var list struct {
		Workflows []workflowJSON `json:"workflows"`
	}
	if err := json.Unmarshal([]byte(run("workflows", "list", "--json", "--limit", "1")), &list); err != nil || len(list.Workflows) != 1 || list.Workflows[0].ID != 2 {
		t.Fatalf("list --limit 1: %+v %v", list, err)
	}
	if text := run("workflows", "list", "--state", "running"); !strings.Contains(text, "ID  NAME    STATE    TASKS  DONE  FAILED  CANCELLED  CREATED\n2   report  running  4      0     0       0          ") ||
		!strings.Contains(text, "\n1   report  running  6 ") {
		t.Fatalf("list:\n%s", text)
	}

	// show --wait returns when the workflow ends: a cancel ends it (no
	// task is running).
	type shown struct {
		v   workflowShowJSON
		err string
	}
	waited := make(chan shown, 1)
	start := time.Now()
	go func() {
		out, stderr, code := runBinary(t, bin, dbURL, "workflows", "show", "1", "--wait", "30s", "--json")
		var s shown
		if code != 0 {
			s.err = stderr
		} else if err := json.Unmarshal([]byte(out), &s.v); err != nil {
			s.err = err.Error()
		}
		waited <- s
	}()
	time.Sleep(300 * time.Millisecond) // let it wait first (a wait that starts late returns at once, which is also right)
	if out := run("workflows", "cancel", "1", "--reason", "not needed"); out != "workflow 1: 6 tasks cancelled, 0 running tasks asked to stop\n" {
		t.Fatalf("cancel: %q", out)
	}
	s := <-waited
	if s.err != "" || s.v.TimedOut || s.v.Workflow.State != "cancelled" || s.v.Workflow.Cancelled != 6 || time.Since(start) > 25*time.Second {
		t.Fatalf("show --wait across a cancel: %+v after %s", s, time.Since(start))
	}
	if out := run("workflows", "retry", "1", "--json"); !strings.Contains(out, `"revived": 6`) {
		t.Fatalf("retry --json: %q", out)
	}
	// (Its dependent tasks should come back pending; the core revives
	// them ready: TestRetryCancelledWorkflowKeepsDependentsPending.)
	if v := show("1"); v.Workflow.State != "running" || v.Workflow.Cancelled != 0 || v.Tasks[0].State != "ready" {
		t.Fatalf("after retry: %+v", v)
	}

	// Bad input: exit 1, one line naming what is wrong, nothing written.
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cycle := file("cycle.json", `{"name": "c", "tasks": [{"name": "a", "kind": "k", "depends_on": ["b"]}, {"name": "b", "kind": "k", "depends_on": ["a"]}]}`)
	unknownDep := file("dep.json", `{"name": "c", "tasks": [{"name": "a", "kind": "k", "depends_on": ["nope"]}]}`)
	badJSON := file("bad.json", `{"name": "c", "tasks": [`)
	unknownField := file("field.json", `{"name": "c", "tasks": [{"name": "a", "kind": "k", "run_at": "2030-01-01T00:00:00Z"}]}`)
	noTasks := file("empty.json", `{"name": "c", "tasks": []}`)
	badDelay := file("delay.json", `{"name": "c", "tasks": [{"name": "a", "kind": "k", "delay": "soon"}]}`)
	addDep := file("adddep.json", `{"tasks": [{"name": "a2", "kind": "k", "depends_on": ["nope"]}]}`)
	addPlain := file("addplain.json", `{"tasks": [{"name": "a3", "kind": "k"}]}`)
	named := file("named.json", `{"name": "c", "tasks": [{"name": "z", "kind": "k"}]}`)
	before := testdb.Snapshot(t, pool)
	bad := []struct {
		args []string
		want string
	}{
		{[]string{"workflows", "show", "x"}, `"x" is not a valid workflow id`},
		{[]string{"workflows", "show", "999"}, "not found"},
		{[]string{"workflows", "show", "1", "--wait", "-1s"}, "must not be negative"},
		{[]string{"workflows", "show"}, "missing ID"},
		{[]string{"workflows", "cancel", "999"}, "not found"},
		{[]string{"workflows", "retry", "0"}, "not a valid workflow id"},
		{[]string{"workflows", "cancel", "1", "--reason", strings.Repeat("r", 1025)}, "reason is 1025 bytes, want at most 1024"},
		{[]string{"workflows", "create"}, "--file is required"},
		{[]string{"workflows", "create", "--file", filepath.Join(dir, "missing.json")}, "no such file"},
		{[]string{"workflows", "create", "--file", cycle}, "cycle"},
		{[]string{"workflows", "create", "--file", unknownDep}, "nope"},
		{[]string{"workflows", "create", "--file", badJSON}, "unexpected EOF"},
		{[]string{"workflows", "create", "--file", unknownField}, `unknown field "run_at"`},
		{[]string{"workflows", "create", "--file", noTasks}, "at least one task"},
		{[]string{"workflows", "create", "--file", badDelay}, `tasks[0].delay "soon"`},
		{[]string{"workflows", "add", "999", "--file", addPlain}, "no such workflow"},
		{[]string{"workflows", "add", "1", "--file", named}, "take only \"tasks\""},
		{[]string{"workflows", "add", "2", "--file", addDep}, "does not have"},
		{[]string{"workflows", "list", "--state", "done"}, `--state "done"`},
		{[]string{"workflows", "list", "--limit", "0"}, "--limit 0"},
		{[]string{"workflows", "list", "--limit", "5000"}, "limit 5000"},
	}
	for _, c := range bad {
		out, stderr, code := runBinary(t, bin, dbURL, c.args...)
		if code != 1 || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || out != "" {
			t.Errorf("workq %s: exit %d, stdout %q, stderr %q; want exit 1 and %q", strings.Join(c.args, " "), code, out, stderr, c.want)
		}
	}
	if after := testdb.Snapshot(t, pool); after != before {
		t.Fatal("a refused workflows command changed the database")
	}
	run("workflows", "cancel", "2")
	if out, stderr, code := runBinary(t, bin, dbURL, "workflows", "cancel", "2"); code != 1 || out != "" || !strings.Contains(stderr, "ended") {
		t.Fatalf("cancel of an ended workflow: exit %d, %q %q", code, out, stderr)
	}
}
