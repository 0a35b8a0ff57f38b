package ui_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/testutil"
)

// TestWorkflowInBrowser: the Workflows pages in Chromium against a `workq
// api` process: the list links to the workflow; its graph renders with one
// box per task, laid out in layers (a dependent right of its dependency),
// boxes of different states in different colours, one arrow per
// dependency and the any-outcome one dashed; a box opens its job run,
// which links back to the workflow.
func TestWorkflowInBrowser(t *testing.T) {
	chrome := chromium(t)
	bin := testutil.BuildWorkq(t, moduleRoot)
	dbURL := testdb.URL(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	c := siteClient(t, siteSetup{pool: pool})
	res, err := c.NewWorkflow("nightly", nil).
		Add("root", wfOK{}, parked).
		Add("child", wfOK{}, &workq.TaskOpts{Enqueue: parked.Enqueue, DependsOn: []string{"root"}}).
		Add("cleanup", wfOK{}, &workq.TaskOpts{Enqueue: parked.Enqueue, DependsOnAnyOutcome: []string{"child"}}).
		Enqueue(ctx)
	if err != nil {
		t.Fatal(err)
	}
	adminSecret, adminEntry, _, readEntry := newTokens(t)
	base := startAPI(t, bin, dbURL, t.TempDir(), adminEntry, readEntry)

	bctx, run := newChrome(t, chrome, 2*time.Minute)

	run("open the workflows page", chromedp.Navigate(base+"/ui/workflows"), chromedp.WaitVisible(`#token`, chromedp.ByID))
	run("log in", chromedp.SendKeys(`#token`, adminSecret, chromedp.ByID), chromedp.Submit(`#token`, chromedp.ByID),
		chromedp.WaitVisible(`#workflows`, chromedp.ByID))
	awaitJS(t, bctx, 5*time.Second, "the list shows the workflow, running, with 3 tasks",
		fmt.Sprintf(`(document.querySelector('tr[data-key="%d"] [data-f="state"]')||{}).textContent === "running" && `, res.Workflow.ID)+
			fmt.Sprintf(`(document.querySelector('tr[data-key="%d"] [data-f="tasks"]')||{}).textContent === "3" && `, res.Workflow.ID)+
			`document.querySelector('nav a[aria-current="page"]').textContent === "Workflows"`)
	run("open the workflow", chromedp.Click(`tr td[data-f="name"] a`, chromedp.ByQuery), chromedp.WaitVisible(`svg.wf-graph`, chromedp.ByQuery))

	box := func(task string) string {
		return fmt.Sprintf(`document.querySelector('svg.wf-graph a[data-task="%s"] rect').getBoundingClientRect()`, task)
	}
	stroke := func(task string) string {
		return fmt.Sprintf(`getComputedStyle(document.querySelector('svg.wf-graph a[data-task="%s"] rect')).stroke`, task)
	}
	awaitJS(t, bctx, 5*time.Second, "the graph renders three boxes in layers, coloured by state, and three arrows, one dashed",
		`document.querySelectorAll('svg.wf-graph a.node').length === 3 && `+
			box("root")+`.width > 100 && `+box("root")+`.height > 20 && `+
			box("child")+`.left > `+box("root")+`.right && `+box("cleanup")+`.left > `+box("child")+`.right && `+
			stroke("root")+` !== `+stroke("child")+` && `+
			`document.querySelectorAll('svg.wf-graph path.edge').length === 2 && `+
			`document.querySelectorAll('svg.wf-graph path.edge.any').length === 1 && `+
			`document.querySelector('svg.wf-graph path.edge.any').getTotalLength() > 10 && `+
			`getComputedStyle(document.querySelector('svg.wf-graph path.edge.any')).strokeDasharray !== "none" && `+
			`getComputedStyle(document.querySelector('svg.wf-graph path.edge:not(.any)')).strokeDasharray === "none"`)
	screenshot(t, bctx, "workflow")

	run("open the child's job run from its box", chromedp.Click(`svg.wf-graph a[data-task="child"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#item-workflow`, chromedp.ByID))
	awaitJS(t, bctx, 5*time.Second, "the job run is pending and links to its workflow",
		fmt.Sprintf(`location.pathname.endsWith("/ui/items/job_runs/%d") && `, res.Tasks["child"])+
			`document.querySelector('h1 .state').textContent === "pending" && `+
			fmt.Sprintf(`document.querySelector('#item-workflow').textContent === "workflow %d"`, res.Workflow.ID))
}
