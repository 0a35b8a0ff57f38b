package ui_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
)

type wfOK struct {
	Say string `json:"say"`
}

func (wfOK) Kind() string { return "wfui.ok" }

type wfFail struct{}

func (wfFail) Kind() string { return "wfui.fail" }

// wfWorkers is a Client on pool that works queue default: wfui.ok records
// its args' Say as its output, wfui.fail fails for good. Tasks in queue
// parked are never worked.
func wfWorkers(t *testing.T, pool *pgxpool.Pool) *workq.Client {
	t.Helper()
	ws := workq.NewWorkers()
	workq.AddWorker(ws, workq.WorkFunc(func(ctx context.Context, job *workq.Job[wfOK]) error {
		return job.SetOutput(map[string]string{"said": job.Args.Say})
	}))
	workq.AddWorker(ws, workq.WorkFunc(func(ctx context.Context, job *workq.Job[wfFail]) error {
		return workq.Permanent(errors.New("the load failed"))
	}))
	c, err := workq.NewClient(pool, workq.Config{Workers: ws, Maintenance: workq.MaintenanceConfig{Disabled: true},
		FetchPollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return c
}

func awaitWorkflow(t *testing.T, c *workq.Client, ref workq.WorkflowRef) workq.WorkflowInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := c.WaitWorkflow(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

var parked = &workq.TaskOpts{Enqueue: &workq.EnqueueOpts{Queue: "parked"}}

// enqueueETL writes workflow etl-a, run to its end by the workers: extract
// and transform done, load failed, notify (after load) cancelled, report
// (after extract, and after load whatever its outcome) done: 5 tasks, 4
// solid edges and 1 dashed.
func enqueueETL(t *testing.T, c *workq.Client) workq.WorkflowEnqueued {
	t.Helper()
	res, err := c.NewWorkflow("etl-a", &workq.WorkflowOpts{Metadata: map[string]string{"team": "data"}}).
		Add("extract", wfOK{Say: "rows"}, nil).
		Add("transform", wfOK{Say: "cleaned"}, &workq.TaskOpts{DependsOn: []string{"extract"}}).
		Add("load", wfFail{}, &workq.TaskOpts{DependsOn: []string{"transform"}}).
		Add("report", wfOK{Say: "report"}, &workq.TaskOpts{DependsOn: []string{"extract"}, DependsOnAnyOutcome: []string{"load"}}).
		Add("notify", wfOK{Say: "sent"}, &workq.TaskOpts{DependsOn: []string{"load"}}).
		Enqueue(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info := awaitWorkflow(t, c, res.Workflow); info.State != workq.WorkflowFailed || info.Done != 3 || info.Failed != 1 || info.Cancelled != 1 {
		t.Fatalf("etl-a ended %+v, want failed with 3 done, 1 failed, 1 cancelled", info)
	}
	return res
}

// enqueueParked writes workflow etl-b, which stays running: root is ready
// in queue parked (never worked), child waits for it, pending.
func enqueueParked(t *testing.T, c *workq.Client) workq.WorkflowEnqueued {
	t.Helper()
	res, err := c.NewWorkflow("etl-b", nil).
		Add("root", wfOK{Say: "r"}, parked).
		Add("child", wfOK{Say: "c"}, &workq.TaskOpts{Enqueue: parked.Enqueue, DependsOn: []string{"root"}}).
		Enqueue(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

var (
	nodeRe = regexp.MustCompile(`<a class="node s-(\w+)" href="[^"]*items/job_runs/(\d+)" data-task="([^"]+)">`)
	edgeRe = regexp.MustCompile(`<path class="(edge|edge any)" data-from="([^"]+)" data-to="([^"]+)"[^>]*?( stroke-dasharray="[^"]+")? marker-end`)
)

// graphOf reads the SVG of a workflow page: its nodes (task: state) and
// its edges ("from->to" or "from->to (any)").
func graphOf(t *testing.T, body string) (nodes map[string]string, edges []string) {
	t.Helper()
	start, end := strings.Index(body, `<svg class="wf-graph"`), strings.Index(body, `</svg>`)
	if start < 0 || end < start {
		t.Fatalf("no graph on the page:\n%s", body)
	}
	svg := body[start:end]
	nodes = map[string]string{}
	for _, m := range nodeRe.FindAllStringSubmatch(svg, -1) {
		if _, dup := nodes[m[3]]; dup {
			t.Errorf("task %s is drawn twice", m[3])
		}
		nodes[m[3]] = m[1]
	}
	if n := strings.Count(svg, `<a class="node `); n != len(nodes) {
		t.Errorf("%d node elements, %d read", n, len(nodes))
	}
	for _, m := range edgeRe.FindAllStringSubmatch(svg, -1) {
		e := m[2] + "->" + m[3]
		if m[1] == "edge any" {
			if m[4] == "" {
				t.Errorf("the any-outcome edge %s is not dashed", e)
			}
			e += " (any)"
		} else if m[4] != "" {
			t.Errorf("the edge %s is dashed", e)
		}
		edges = append(edges, e)
	}
	if n := strings.Count(svg, `<path class="edge`); n != len(edges) {
		t.Errorf("%d edge elements, %d read", n, len(edges))
	}
	return nodes, edges
}

// TestWorkflowPages: the list shows each workflow with its state and
// counts, filters by state and name prefix, and links to the workflow's
// page; that page has the header, one node per task coloured by its
// state and one edge per dependency (dashed for any outcome), and the
// table of tasks with their outputs and errors; the job run of a task
// links back to its workflow and shows its output, a pending one says it
// waits; an unknown workflow is a 404.
func TestWorkflowPages(t *testing.T) {
	s := newSite(t)
	c := wfWorkers(t, s.pool)
	a := enqueueETL(t, c)
	b := enqueueParked(t, c)
	br := s.browser()
	br.login(s.admin)

	p := br.get("/ui/workflows")
	must(t, p, 200, "<h1>Workflows</h1>", `href="./workflows" aria-current="page"`,
		fmt.Sprintf(`<tr data-key="%d">`, a.Workflow.ID), fmt.Sprintf(`<tr data-key="%d">`, b.Workflow.ID),
		fmt.Sprintf(`<a href="./workflows/%d">etl-a</a>`, a.Workflow.ID), `<span class="state w-failed">failed</span>`,
		`<span class="state w-running">running</span>`,
		`<td class="n" data-f="tasks">5</td><td class="n" data-f="done">3</td><td class="n" data-f="failed">1</td><td class="n" data-f="cancelled">1</td>`)
	if strings.Index(p.body, "etl-b") > strings.Index(p.body, "etl-a") {
		t.Errorf("the list is not newest first:\n%s", p.body)
	}
	if p := br.get("/ui/workflows?state=running"); p.status != 200 || strings.Contains(p.body, "etl-a") || !strings.Contains(p.body, "etl-b") {
		t.Errorf("state=running: %d\n%s", p.status, p.body)
	}
	if p := br.get("/ui/workflows?name=etl-a"); p.status != 200 || strings.Contains(p.body, "etl-b") || !strings.Contains(p.body, "etl-a") {
		t.Errorf("name=etl-a: %d\n%s", p.status, p.body)
	}
	must(t, br.get("/ui/workflows?name=nope"), 200, "No workflows match this filter.")
	must(t, br.get("/ui/workflows?state=sleeping"), http.StatusBadRequest, `state &#34;sleeping&#34;: want one of running, completed, failed, cancelled`)
	must(t, br.get("/ui/workflows?before=x"), http.StatusBadRequest, "is not a workflow id")

	p = br.get("/ui/workflows/" + itoa(a.Workflow.ID))
	must(t, p, 200, fmt.Sprintf("<h1>Workflow %d: etl-a", a.Workflow.ID), `id="wf-state">failed</span>`,
		"5 tasks: 3 done, 1 failed, 1 cancelled, 0 not ended", "<dt>team</dt>", "data",
		"Retry failed and cancelled tasks", `<tr data-task="load">`, "the load failed", `<code>{&#34;said&#34;:&#34;cleaned&#34;}</code>`,
		"extract; any outcome: load")
	if strings.Contains(p.body, "Cancel workflow") {
		t.Errorf("an ended workflow offers Cancel:\n%s", p.body)
	}
	nodes, edges := graphOf(t, p.body)
	wantNodes := map[string]string{"extract": "done", "transform": "done", "load": "failed", "report": "done", "notify": "cancelled"}
	if fmt.Sprint(nodes) != fmt.Sprint(wantNodes) {
		t.Errorf("nodes %v, want %v", nodes, wantNodes)
	}
	wantEdges := "[extract->transform transform->load extract->report load->report (any) load->notify]"
	if fmt.Sprint(edges) != wantEdges {
		t.Errorf("edges %v, want %s", edges, wantEdges)
	}
	for _, m := range nodeRe.FindAllStringSubmatch(p.body, -1) {
		if m[2] != itoa(a.Tasks[m[3]]) {
			t.Errorf("node %s links to job run %s, want %d", m[3], m[2], a.Tasks[m[3]])
		}
	}

	p = br.get("/ui/workflows/" + itoa(b.Workflow.ID))
	must(t, p, 200, `id="wf-state">running</span>`, "2 tasks: 0 done, 0 failed, 0 cancelled, 2 not ended", "Cancel workflow…", "(1 left)")
	if nodes, edges := graphOf(t, p.body); fmt.Sprint(nodes) != "map[child:pending root:ready]" || fmt.Sprint(edges) != "[root->child]" {
		t.Errorf("etl-b's graph: %v %v", nodes, edges)
	}

	// A task's job run links to its workflow and shows its output; a
	// pending one says what it waits for.
	must(t, br.get("/ui/items/job_runs/"+itoa(a.Tasks["transform"])), 200,
		fmt.Sprintf(`<a id="item-workflow" href="../../workflows/%d">workflow %d</a>`, a.Workflow.ID, a.Workflow.ID),
		"<dt>output</dt>", "&#34;said&#34;: &#34;cleaned&#34;")
	must(t, br.get("/ui/items/job_runs/"+itoa(b.Tasks["child"])), 200, `<span class="state s-pending">pending</span>`,
		"it waits for its dependencies in its workflow", `value="cancel">Cancel…`)
	must(t, br.get("/ui/items/job_runs?status=pending"), 200, "waits for its dependencies")

	// Unknown workflows.
	must(t, br.get("/ui/workflows/999999"), http.StatusNotFound)
	must(t, br.get("/ui/workflows/abc"), http.StatusNotFound, "is not a workflow id")
	must(t, br.get("/ui/workflows/0"), http.StatusNotFound)
	must(t, br.get("/ui/workflows/1?shard=mars"), http.StatusNotFound, "There is no shard")
}

// TestWorkflowActions: Cancel (confirmed first) and Retry from the
// workflow's page, by the session's actor; refused without the CSRF
// token, from another origin and for a read-only session, changing
// nothing; Cancel of an ended workflow says so; an unknown workflow is a
// 404.
func TestWorkflowActions(t *testing.T) {
	s := newSite(t)
	c := wfWorkers(t, s.pool)
	b := enqueueParked(t, c)
	ctx := context.Background()
	state := func() workq.WorkflowInfo {
		t.Helper()
		info, err := c.GetWorkflow(ctx, b.Workflow)
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	id := itoa(b.Workflow.ID)
	br := s.browser()
	br.login(s.admin)
	br.get("/ui/workflows/" + id)

	must(t, br.post("/ui/workflows/"+id+"/cancel", url.Values{"csrf": {""}, "confirm": {"yes"}}), http.StatusForbidden, "security token")
	must(t, br.post("/ui/workflows/"+id+"/cancel", url.Values{"confirm": {"yes"}}, "Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site"),
		http.StatusForbidden)
	ro := s.browser()
	ro.login(s.read)
	if p := ro.get("/ui/workflows/" + id); p.status != 200 || strings.Contains(p.body, "Cancel workflow") {
		t.Errorf("a read-only session: %d, or it sees Cancel", p.status)
	}
	must(t, ro.post("/ui/workflows/"+id+"/cancel", url.Values{"confirm": {"yes"}}), http.StatusForbidden)
	if info := state(); info.State != workq.WorkflowRunning || info.CancelRequestedAt != nil {
		t.Fatalf("a refused cancel changed the workflow: %+v", info)
	}

	// Cancel asks first, then cancels.
	must(t, br.post("/ui/workflows/"+id+"/cancel", url.Values{"reason": {"wrong input"}}), 200,
		fmt.Sprintf("Cancel workflow %s? Its pending and ready tasks end cancelled", id), `name="confirm" value="yes"`)
	if info := state(); info.State != workq.WorkflowRunning {
		t.Fatalf("the confirmation cancelled: %+v", info)
	}
	p := br.post("/ui/workflows/"+id+"/cancel", url.Values{"reason": {"wrong input"}, "confirm": {"yes"}})
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "../../workflows/"+id {
		t.Fatalf("cancel: %d Location %q\n%s", p.status, p.header.Get("Location"), p.body)
	}
	if info := state(); info.State != workq.WorkflowCancelled || info.Cancelled != 2 {
		t.Fatalf("after Cancel: %+v, want cancelled with 2 cancelled", info)
	}
	p = br.get("/ui/workflows/" + id)
	must(t, p, 200, fmt.Sprintf("Workflow %s cancelled: 2 task(s) cancelled at once, 0 running asked to stop", id),
		`id="wf-state">cancelled</span>`, `id="wf-cancel-requested"`, "Retry failed and cancelled tasks")
	if nodes, _ := graphOf(t, p.body); fmt.Sprint(nodes) != "map[child:cancelled root:cancelled]" {
		t.Errorf("after Cancel the graph shows %v", nodes)
	}
	att, err := c.Attempts(ctx, workq.ItemRef{Table: workq.TableJobRuns, ID: b.Tasks["root"]})
	if err != nil {
		t.Fatal(err)
	}
	if len(att) != 1 || att[0].Worker != "api:ops" || !strings.Contains(att[0].Error, "wrong input") {
		t.Errorf("the cancel's archive: %+v, want one by api:ops with the reason", att)
	}
	if p := br.post("/ui/workflows/"+id+"/cancel", url.Values{"confirm": {"yes"}}); p.status != http.StatusSeeOther {
		t.Fatalf("cancel again: %d\n%s", p.status, p.body)
	}
	must(t, br.get("/ui/workflows/"+id), 200, fmt.Sprintf("Workflow %s has already ended: there is nothing to cancel.", id))

	// Retry: no token refused; then the tasks come back.
	must(t, br.post("/ui/workflows/"+id+"/retry", url.Values{"csrf": {""}}), http.StatusForbidden)
	if info := state(); info.State != workq.WorkflowCancelled {
		t.Fatalf("a refused retry changed the workflow: %+v", info)
	}
	p = br.post("/ui/workflows/"+id+"/retry", url.Values{})
	if p.status != http.StatusSeeOther {
		t.Fatalf("retry: %d\n%s", p.status, p.body)
	}
	if info := state(); info.State != workq.WorkflowRunning || info.Cancelled != 0 {
		t.Fatalf("after Retry: %+v, want running with nothing cancelled", info)
	}
	p = br.get("/ui/workflows/" + id)
	must(t, p, 200, fmt.Sprintf("Workflow %s retried: 2 task(s) run again", id), `id="wf-state">running</span>`)
	// The graph shows the states the Client reads (the child's is the
	// core's: see TestWorkflowRetryAfterCancelKeepsDependentsPending).
	tasks, err := c.WorkflowTasks(ctx, b.Workflow)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, tk := range tasks {
		want[tk.Name] = string(tk.State)
	}
	if nodes, _ := graphOf(t, p.body); fmt.Sprint(nodes) != fmt.Sprint(want) || nodes["root"] != "ready" {
		t.Errorf("after Retry the graph shows %v, want %v with root ready", nodes, want)
	}

	must(t, br.post("/ui/workflows/999999/retry", url.Values{}), http.StatusNotFound)
	must(t, br.post("/ui/workflows/"+id+"/pause", url.Values{}), http.StatusNotFound)
}

// TestWorkflowGraphCapped: a workflow of more tasks than the drawing
// takes draws the first 500 and says so; the table lists every task.
func TestWorkflowGraphCapped(t *testing.T) {
	s := newSite(t)
	c := wfWorkers(t, s.pool)
	w := c.NewWorkflow("wide", nil).Add("start", wfOK{}, parked)
	for i := range 501 {
		w.Add(fmt.Sprintf("part-%03d", i), wfOK{}, &workq.TaskOpts{Enqueue: parked.Enqueue, DependsOn: []string{"start"}})
	}
	res, err := w.Enqueue(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	br := s.browser()
	br.login(s.read)
	p := br.get("/ui/workflows/" + itoa(res.Workflow.ID))
	must(t, p, 200, `id="graph-capped">This workflow has 502 tasks: the drawing shows the first 500`)
	nodes, edges := graphOf(t, p.body)
	if len(nodes) != 500 || len(edges) != 499 || nodes["start"] != "ready" || nodes["part-498"] != "pending" {
		t.Errorf("%d nodes, %d edges, start %q, part-498 %q; want 500, 499, ready, pending", len(nodes), len(edges), nodes["start"], nodes["part-498"])
	}
	if _, ok := nodes["part-499"]; ok {
		t.Error("the 501st task is drawn")
	}
	if n := strings.Count(p.body, `<tr data-task="`); n != 502 {
		t.Errorf("the table has %d tasks, want 502", n)
	}
}

// TestWorkflowsOverTwoShards: a sharded dashboard lists every shard's
// workflows with their shards, pages through all of them once, opens a
// workflow with its shard (or finds it without), and acts on it there.
func TestWorkflowsOverTwoShards(t *testing.T) {
	us := testdb.Pool(t)
	s := newShardedSite(t, us)
	ctx := context.Background()
	var want []string
	refs := map[string]workq.WorkflowRef{}
	for _, sh := range []struct {
		name string
		pool *pgxpool.Pool
	}{{"eu", s.pool}, {"us", us}} {
		c, err := workq.NewClient(sh.pool, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 30 {
			name := fmt.Sprintf("%s-%02d", sh.name, i)
			res, err := c.NewWorkflow(name, nil).Add("only", wfOK{}, parked).Enqueue(ctx)
			if err != nil {
				t.Fatal(err)
			}
			refs[name] = workq.WorkflowRef{ID: res.Workflow.ID, Shard: sh.name}
			want = append(want, name)
		}
	}
	br := s.browser()
	br.login(s.admin)
	row := regexp.MustCompile(`<tr data-key="(\w+):(\d+)">`)
	next := regexp.MustCompile(`href="\./workflows\?([^"]+)" rel="next"`)
	seen := map[string]bool{}
	path := "/ui/workflows"
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatal("more pages than 60 workflows take")
		}
		p := br.get(path)
		must(t, p, 200, "<th scope=\"col\">Shard</th>")
		for _, m := range row.FindAllStringSubmatch(p.body, -1) {
			k := m[1] + ":" + m[2]
			if seen[k] {
				t.Errorf("%s listed twice", k)
			}
			seen[k] = true
		}
		m := next.FindStringSubmatch(p.body)
		if m == nil {
			break
		}
		path = "/ui/workflows?" + strings.ReplaceAll(m[1], "&amp;", "&")
	}
	if len(seen) != len(want) {
		t.Errorf("listed %d workflows, want %d", len(seen), len(want))
	}
	must(t, br.get("/ui/workflows?shard=us"), 200, "us-29")
	if p := br.get("/ui/workflows?shard=us"); strings.Contains(p.body, "eu-29") {
		t.Error("shard=us lists eu's workflows")
	}
	must(t, br.get("/ui/workflows?cursor=nonsense"), http.StatusBadRequest, "is not a position of this list")

	u := refs["us-03"]
	must(t, br.get(fmt.Sprintf("/ui/workflows/%d?shard=us", u.ID)), 200, fmt.Sprintf("Workflow us:%d: us-03", u.ID),
		`<input type="hidden" name="shard" value="us">`, "?shard=us")
	must(t, br.post(fmt.Sprintf("/ui/workflows/%d/cancel", u.ID), url.Values{"confirm": {"yes"}}), http.StatusBadRequest, "Name the workflow&#39;s shard")
	if p := br.post(fmt.Sprintf("/ui/workflows/%d/cancel", u.ID), url.Values{"confirm": {"yes"}, "shard": {"us"}}); p.status != http.StatusSeeOther {
		t.Fatalf("cancel on us: %d\n%s", p.status, p.body)
	}
	c := siteClient(t, siteSetup{pool: us})
	if info, err := c.GetWorkflow(ctx, workq.WorkflowRef{ID: u.ID}); err != nil || info.State != workq.WorkflowCancelled {
		t.Fatalf("us-03 after cancel: %+v %v", info, err)
	}
	e := refs["eu-03"]
	if e.ID == u.ID { // the same id on eu: it must be left alone
		ce := siteClient(t, siteSetup{pool: s.pool})
		if info, err := ce.GetWorkflow(ctx, workq.WorkflowRef{ID: e.ID}); err != nil || info.State != workq.WorkflowRunning {
			t.Fatalf("eu-03 after us-03's cancel: %+v %v", info, err)
		}
	}
}
