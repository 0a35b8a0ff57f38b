package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/testutil"
)

// TestFlowInBrowser: the Flow control page in Chromium against a `workq
// api` process: the rules, the paused kind and the throttle are listed;
// the item pages say what a job held by the paused kind and one whose key
// is at its concurrency wait for; a resume without the CSRF token is
// refused and changes nothing; the Resume button resumes the kind.
func TestFlowInBrowser(t *testing.T) {
	chrome := chromium(t)
	bin := testutil.BuildWorkq(t, moduleRoot)
	dbURL := testdb.URL(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	f := newFlowFixture(t, pool)
	adminSecret, adminEntry, _, readEntry := newTokens(t)
	base := startAPI(t, bin, dbURL, t.TempDir(), adminEntry, readEntry)

	bctx, run := newChrome(t, chrome, 2*time.Minute)

	run("open the flow page", chromedp.Navigate(base+"/ui/flow"), chromedp.WaitVisible(`#token`, chromedp.ByID))
	run("log in", chromedp.SendKeys(`#token`, adminSecret, chromedp.ByID), chromedp.Submit(`#token`, chromedp.ByID),
		chromedp.WaitVisible(`#flow-limits`, chromedp.ByID))
	row := func(key, field string) string {
		return fmt.Sprintf(`(document.querySelector('tr[data-key="%s"] [data-f="%s"]')||{}).textContent`, key, field)
	}
	awaitJS(t, bctx, 5*time.Second, "the page lists the rules, the paused kind and the throttle",
		row("job_runs/fq/queue", "rate")+` === "100 per 1m0s" && `+row("job_runs/fq/each key", "concurrency")+` === "1" && `+
			`document.querySelector('button[aria-label="Resume job_runs/fq[mail]"]') !== null && `+
			`document.querySelector('#flow-paused').textContent.includes("relay down") && `+
			row("job_runs/tq/queue", "until")+`.includes("in ") && `+
			`document.querySelector('nav a[aria-current="page"]').textContent === "Flow control"`)
	screenshot(t, bctx, "flow")

	run("open the job of the paused kind", chromedp.Navigate(fmt.Sprintf("%s/ui/items/job_runs/%d", base, f.mail)),
		chromedp.WaitVisible(`#waits-for`, chromedp.ByID))
	awaitJS(t, bctx, 5*time.Second, "it waits for the paused kind",
		`document.querySelector('#waits-for').textContent.includes("kind mail paused by ops:ann")`)
	run("open the job whose key is at its concurrency", chromedp.Navigate(fmt.Sprintf("%s/ui/items/job_runs/%d", base, f.acme)),
		chromedp.WaitVisible(`#waits-for`, chromedp.ByID))
	awaitJS(t, bctx, 5*time.Second, "it waits for its key",
		`document.querySelector('#waits-for').textContent.includes("key acme at its concurrency (1 of 1 in progress)")`)

	// A resume without the CSRF token, from the page's own origin, is refused.
	run("back to the flow page", chromedp.Navigate(base+"/ui/flow"), chromedp.WaitVisible(`#flow-paused`, chromedp.ByID))
	var status int
	run("post without the CSRF token", chromedp.Evaluate(`(async () => {
		const r = await fetch('flow/resume-kind', {method: 'POST', body: new URLSearchParams({table: 'job_runs', queue: 'fq', kind: 'mail'})});
		return r.status;
	})()`, &status, func(p *cdpruntime.EvaluateParams) *cdpruntime.EvaluateParams { return p.WithAwaitPromise(true) }))
	if status != http.StatusForbidden {
		t.Errorf("a resume without the CSRF token: status %d, want 403", status)
	}
	if n := f.pausedKinds(t); n != 1 {
		t.Fatalf("the refused resume changed the pause: %d paused kinds", n)
	}

	run("resume the kind", chromedp.Click(`button[aria-label="Resume job_runs/fq[mail]"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`.flash`, chromedp.ByQuery))
	awaitJS(t, bctx, 5*time.Second, "the resume is confirmed and the kind is gone from the page",
		`document.querySelector('.flash').textContent.includes("kind mail resumed") && `+
			`document.querySelector('button[aria-label="Resume job_runs/fq[mail]"]') === null`)
	if n := f.pausedKinds(t); n != 0 {
		t.Errorf("after Resume: %d paused kinds", n)
	}
}
