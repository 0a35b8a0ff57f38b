package ui_test

// The dashboard in a real browser: Debian's chromium, headless, driven by
// chromedp, against a `workq api` process the test starts on a loopback
// port over its own database, with an in-process worker doing the work.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/workq/workq/internal/jobq"

	"github.com/chromedp/cdproto/network"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/config"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/testutil"
	"github.com/workq/workq/internal/worker"
)

// chromium finds the browser, or fails the test saying how to install it.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("WORKQ_CHROMIUM"), "/usr/bin/chromium", "chromium", "chromium-browser"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("the dashboard's browser tests need Chromium: install Debian's package (`apt-get install -y chromium`, as .ci/run does), " +
		"or point WORKQ_CHROMIUM at a Chromium or Chrome binary")
	return ""
}

// newChrome starts headless Chromium (the binary chrome) for a browser
// test: its context, bounded by limit and ended with the test, and run,
// which runs actions in it and fails the test, saying what, on an error.
func newChrome(t *testing.T, chrome string, limit time.Duration) (context.Context, func(what string, actions ...chromedp.Action)) {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome),
		chromedp.Flag("headless", true), chromedp.Flag("no-sandbox", true), chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true), chromedp.Flag("no-first-run", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	bctx, cancelTimeout := context.WithTimeout(bctx, limit)
	t.Cleanup(func() { cancelTimeout(); cancelBrowser(); cancelAlloc() })
	run := func(what string, actions ...chromedp.Action) {
		t.Helper()
		if err := chromedp.Run(bctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	return bctx, run
}

// moduleRoot is the repository root (tests run in their package directory).
const moduleRoot = "../.."

// startAPI runs `workq api` on a free loopback port and returns its base URL.
func startAPI(t *testing.T, bin, dbURL, runsDir string, tokens ...string) string {
	t.Helper()
	cmd := exec.Command(bin, "api", "--api-addr", "127.0.0.1:0", "--api-tokens", strings.Join(tokens, ","),
		"--runs-dir", runsDir, "--ui-sample-interval", "300ms", "--log-level", "info")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	done := make(chan struct{})
	addr := make(chan string, 1)
	go func() {
		defer close(done)
		re := regexp.MustCompile(`msg="api listening" addr=(\S+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("workq api log:\n%s", log.String())
		}
	})
	select {
	case a := <-addr:
		return "http://" + a
	case <-done:
		t.Fatal("workq api exited before it listened")
	case <-time.After(60 * time.Second):
		t.Fatal("workq api did not listen within 60s")
	}
	return ""
}

// artifacts is the git-ignored folder of the browser tests' screenshots.
func artifacts(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(moduleRoot, "test-artifacts", "dashboard")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// screenshot saves the page as test-artifacts/dashboard/NAME.png, and as
// docs/img/dashboard-NAME.png when WORKQ_UPDATE_SCREENSHOTS=1.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	var png []byte
	if err := chromedp.Run(ctx, chromedp.FullScreenshot(&png, 100)); err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(artifacts(t), name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	if os.Getenv("WORKQ_UPDATE_SCREENSHOTS") == "1" {
		if err := os.WriteFile(filepath.Join(moduleRoot, "docs", "img", "dashboard-"+name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// awaitJS evaluates expr until it is true (a page updated by the script or
// after a navigation), failing after limit with what.
func awaitJS(t *testing.T, ctx context.Context, limit time.Duration, what, expr string) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		var ok bool
		err := chromedp.Run(ctx, chromedp.Evaluate(expr, &ok))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			var body string
			_ = chromedp.Run(ctx, chromedp.Evaluate(`document.body ? document.body.innerText : ""`, &body))
			t.Fatalf("%s: not within %s (%v); the page says:\n%s", what, limit, err, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cell is a JS expression for the text of an overview cell.
func cell(key, field string) string {
	return fmt.Sprintf(`(document.querySelector('tr[data-key="%s"] [data-f="%s"]')||{}).textContent`, key, field)
}

func TestDashboardInBrowser(t *testing.T) {
	chrome := chromium(t)
	bin := testutil.BuildWorkq(t, moduleRoot)
	dbURL := testdb.URL(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	runsDir := t.TempDir()
	adminSecret, adminEntry, readSecret, readEntry := newTokens(t)
	base := startAPI(t, bin, dbURL, runsDir, adminEntry, readEntry)

	// The worker: "ok" jobs log a line and succeed; "flaky" jobs fail for
	// good while broken is set.
	var broken atomic.Bool
	cfg := config.Default()
	cfg.Queues, cfg.RunsDir, cfg.Poll, cfg.WorkerID = []string{"web"}, runsDir, 100*time.Millisecond, "browser-test-worker"
	w, err := worker.New(pool, cfg.Worker(), worker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Register("ok", func(ctx context.Context, j *worker.Job) error {
		j.Logger().Info("sending the newsletter")
		time.Sleep(20 * time.Millisecond)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := w.Register("flaky", func(ctx context.Context, j *worker.Job) error {
		j.Logger().Info("calling the mail relay")
		if broken.Load() {
			return worker.Permanent(errors.New("smtp timeout: relay answered 421"))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	client := jobq.New(jobq.Options{})
	enqueueN := func(n int, kind string) {
		t.Helper()
		jobs := make([]jobq.Job, n)
		for i := range jobs {
			jobs[i] = jobq.Job{Queue: "web", Kind: kind, MaxAttempts: 1, Payload: map[string]any{"n": i, "to": "ann@example.com"}}
		}
		if _, err := client.EnqueueMany(ctx, pool, jobs); err != nil {
			t.Fatal(err)
		}
	}
	enqueueN(40, "ok")

	bctx, run := newChrome(t, chrome, 3*time.Minute)

	// Log in: the dashboard sends to the login page and back.
	run("open the dashboard", chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(`#token`, chromedp.ByID))
	screenshot(t, bctx, "login")
	run("log in", chromedp.SendKeys(`#token`, adminSecret, chromedp.ByID), chromedp.Submit(`#token`, chromedp.ByID),
		chromedp.WaitVisible(`#queues`, chromedp.ByID))

	// The queue's counts change as the worker runs, without a reload.
	awaitJS(t, bctx, 30*time.Second, "the overview lists job_runs/web with 40 ready", cell("job_runs/web", "ready")+` === "40"`)
	run("mark the page", chromedp.Evaluate(`window.__sameDocument = true`, nil))
	wctx, stopWorker := context.WithCancel(ctx)
	workerDone := make(chan error, 1)
	go func() { workerDone <- w.Run(wctx) }()
	t.Cleanup(func() { stopWorker(); <-workerDone })
	awaitJS(t, bctx, 30*time.Second, "the overview shows the queue drained and 40 done",
		cell("job_runs/web", "ready")+` === "0" && `+cell("job_runs/web", "done_window")+` === "40"`)
	awaitJS(t, bctx, 10*time.Second, "the page was updated in place and the charts drawn",
		`window.__sameDocument === true && document.querySelectorAll('#chart-rates polyline').length === 5 && document.querySelectorAll('#chart-depth polyline').length === 2`)
	screenshot(t, bctx, "overview")

	// A failed job: open it from the failed list, see its error, attempt and
	// log, and retry it.
	broken.Store(true)
	enqueueN(1, "flaky")
	var failedID int64
	awaitCond(t, 30*time.Second, "the flaky job fails", func() bool {
		return pool.QueryRow(ctx, `select id from workq.job_runs_all where kind = 'flaky' and status = 3`).Scan(&failedID) == nil
	})
	broken.Store(false)
	run("list the failed jobs", chromedp.Navigate(base+"/ui/items/job_runs?queue=web&status=failed"),
		chromedp.WaitVisible(fmt.Sprintf(`a[href$="items/job_runs/%d"]`, failedID), chromedp.ByQuery))
	screenshot(t, bctx, "items")
	run("open the failed job", chromedp.Click(fmt.Sprintf(`a[href$="items/job_runs/%d"]`, failedID), chromedp.ByQuery),
		chromedp.WaitVisible(`#attempts`, chromedp.ByID))
	awaitJS(t, bctx, 5*time.Second, "the item page shows the error, the failed attempt and its log",
		`document.body.innerText.includes("smtp timeout: relay answered 421") && document.querySelector('#attempts .o-failed') !== null `+
			`&& document.querySelector('#attempts tr.log pre').textContent.includes("calling the mail relay")`)
	run("open the attempt's log", chromedp.Click(`#attempts tr.log summary`, chromedp.ByQuery))
	screenshot(t, bctx, "item")
	run("retry it", chromedp.Click(`button[name="action"][value="retry"]`, chromedp.ByQuery), chromedp.WaitVisible(`.flash`, chromedp.ByQuery))
	awaitJS(t, bctx, 5*time.Second, "the retry is confirmed", `document.querySelector('.flash').textContent.includes("Retry: 1 applied")`)
	awaitCond(t, 30*time.Second, "the retried job runs again and is done", func() bool {
		var done bool
		return pool.QueryRow(ctx, `select status = 2 from workq.job_runs_all where id = $1`, failedID).Scan(&done) == nil && done
	})
	run("reload the item", chromedp.Reload(), chromedp.WaitVisible(`#attempts`, chromedp.ByID))
	awaitJS(t, bctx, 5*time.Second, "the item shows the revive by api:ops and the successful attempt",
		`document.querySelector('#attempts .o-revived') !== null && document.querySelector('#attempts .o-done') !== null && document.body.innerText.includes("api:ops")`)

	// Pause the queue: workers stop claiming from it; resume: they drain it.
	run("open the overview", chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(`#queues`, chromedp.ByID))
	run("pause job_runs/web", chromedp.Click(`button[aria-label="Pause job_runs/web"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`.flash`, chromedp.ByQuery))
	var pausedAt time.Time
	if err := pool.QueryRow(ctx, `select paused_at from workq.queue_pauses where work_table = 'job_runs' and queue = 'web'`).Scan(&pausedAt); err != nil {
		t.Fatalf("the pause is not in the database: %v", err)
	}
	enqueueN(10, "ok") // notifies the worker, which tries a claim at once
	awaitJS(t, bctx, 30*time.Second, "the overview shows the queue paused with 10 ready",
		cell("job_runs/web", "state")+` === "paused" && `+cell("job_runs/web", "ready")+` === "10"`)
	// Nothing must happen now, and no event says so: the worker polls every
	// 100ms and is notified of the enqueue, so 2s is twenty chances to claim.
	watchEnd := time.Now().Add(2 * time.Second)
	for time.Now().Before(watchEnd) {
		var claimed, ready int
		if err := pool.QueryRow(ctx, `select count(*) filter (where claimed_at >= $1), count(*) filter (where status = 0)
			from workq.job_runs_all where queue = 'web'`, pausedAt).Scan(&claimed, &ready); err != nil {
			t.Fatal(err)
		}
		if claimed != 0 || ready != 10 {
			t.Fatalf("while paused: %d claimed since the pause, %d ready (want 0 and 10)", claimed, ready)
		}
		time.Sleep(50 * time.Millisecond)
	}
	screenshot(t, bctx, "paused")
	run("resume job_runs/web", chromedp.Click(`button[aria-label="Resume job_runs/web"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`.flash`, chromedp.ByQuery))
	awaitJS(t, bctx, 30*time.Second, "the overview shows the queue running and drained",
		cell("job_runs/web", "state")+` === "running" && `+cell("job_runs/web", "ready")+` === "0"`)

	// The other pages render.
	run("keys and joins", chromedp.Navigate(base+"/ui/outbox"), chromedp.WaitVisible(`#joins`, chromedp.ByID))
	run("schedules", chromedp.Navigate(base+"/ui/schedules"), chromedp.WaitVisible(`#schedules`, chromedp.ByID))

	// An action without the session's CSRF token, from another site, or
	// without a session is refused, and changes nothing.
	var csrf string
	var cookies []*network.Cookie
	run("read the session", chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(`#queues`, chromedp.ByID),
		chromedp.Evaluate(`document.querySelector('input[name=csrf]').value`, &csrf),
		chromedp.ActionFunc(func(ctx context.Context) error {
			var err error
			cookies, err = network.GetCookies().Do(ctx)
			return err
		}))
	var session string
	for _, c := range cookies {
		if c.Name == "workq_session" {
			session = c.Value
			if !c.HTTPOnly || c.SameSite != network.CookieSameSiteStrict {
				t.Errorf("session cookie: HttpOnly %v SameSite %q", c.HTTPOnly, c.SameSite)
			}
		}
	}
	if session == "" || csrf == "" {
		t.Fatalf("no session cookie (%d cookies) or CSRF token (%q)", len(cookies), csrf)
	}
	post := func(cookie, token string, hdr ...string) int {
		t.Helper()
		req, err := http.NewRequest("POST", base+"/ui/queues/job_runs/web/pause", strings.NewReader(url.Values{"csrf": {token}}.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if cookie != "" {
			req.AddCookie(&http.Cookie{Name: "workq_session", Value: cookie})
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		res, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	forged := "x" + session[1:] // another id: its first character changed
	if session[0] == 'x' {
		forged = "y" + session[1:]
	}
	for name, status := range map[string]int{
		"no session":      post("", csrf),
		"no CSRF token":   post(session, ""),
		"wrong token":     post(session, csrf[:len(csrf)-2]+"xx"),
		"cross-site":      post(session, csrf, "Sec-Fetch-Site", "cross-site"),
		"another origin":  post(session, csrf, "Origin", "http://evil.example"),
		"forged session":  post(forged, csrf),
		"the token alone": post("", csrf, "Authorization", "Bearer "+adminSecret),
	} {
		if status != http.StatusForbidden {
			t.Errorf("%s: status %d, want 403", name, status)
		}
	}
	var paused int
	if err := pool.QueryRow(ctx, `select count(*) from workq.queue_pauses`).Scan(&paused); err != nil || paused != 0 {
		t.Fatalf("a refused action paused the queue (%d pauses, %v)", paused, err)
	}
	if status := post(session, csrf, "Origin", base); status != http.StatusSeeOther {
		t.Errorf("with the session's token from the dashboard's origin: status %d, want 303", status)
	}

	// A read-only session sees no action and is refused one.
	run("log out", chromedp.Click(`.who button`, chromedp.ByQuery), chromedp.WaitVisible(`#token`, chromedp.ByID))
	run("log in read-only", chromedp.SendKeys(`#token`, readSecret, chromedp.ByID), chromedp.Submit(`#token`, chromedp.ByID),
		chromedp.WaitVisible(`#queues`, chromedp.ByID))
	var buttons int
	run("count the action buttons", chromedp.Evaluate(`document.querySelectorAll('#queues button, form[action$="/act"]').length`, &buttons))
	if buttons != 0 {
		t.Errorf("a read-only session sees %d action buttons", buttons)
	}
	var status int
	run("post as read-only", chromedp.Evaluate(`(async () => {
		const r = await fetch('queues/job_runs/web/resume', {method: 'POST', body: new URLSearchParams({csrf: document.querySelector('input[name=csrf]').value})});
		return r.status;
	})()`, &status, func(p *cdpruntime.EvaluateParams) *cdpruntime.EvaluateParams { return p.WithAwaitPromise(true) }))
	if status != http.StatusForbidden {
		t.Errorf("a read-only session's action: status %d, want 403", status)
	}
	if err := pool.QueryRow(ctx, `select count(*) from workq.queue_pauses`).Scan(&paused); err != nil || paused != 1 {
		t.Errorf("the read-only resume changed the pause (%d pauses, %v)", paused, err)
	}

	// Something that can write in the runs directory replaces the failed
	// job's attempt logs with links: one to a file outside, one to the API
	// process's own environment (its DATABASE_URL). The read-only session
	// sees the attempts, and neither.
	const secret = "TOP-SECRET-outside-the-runs-dir"
	secretFile := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, `select run_id::text, outcome from workq.runs_all where work_table = 'job_runs' and item_id = $1 and outcome in ('failed', 'done')`, failedID)
	if err != nil {
		t.Fatal(err)
	}
	linked := 0
	for rows.Next() {
		var runID, outcome string
		if err := rows.Scan(&runID, &outcome); err != nil {
			t.Fatal(err)
		}
		target := map[string]string{"failed": secretFile, "done": "/proc/self/environ"}[outcome]
		log := filepath.Join(runsDir, "job_runs", fmt.Sprint(failedID), runID, "attempt.log")
		if err := os.Remove(log); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, log); err != nil {
			t.Fatal(err)
		}
		linked++
	}
	if err := rows.Err(); err != nil || linked != 2 {
		t.Fatalf("linked %d attempt logs (%v), want 2", linked, err)
	}
	run("open the item with linked logs", chromedp.Navigate(fmt.Sprintf("%s/ui/items/job_runs/%d", base, failedID)),
		chromedp.WaitVisible(`#attempts`, chromedp.ByID))
	awaitJS(t, bctx, 5*time.Second, "the item page lists the failed and the done attempt",
		`document.querySelector('#attempts .o-failed') !== null && document.querySelector('#attempts .o-done') !== null`)
	var shown string
	run("read the item page", chromedp.Evaluate(`document.documentElement.outerHTML`, &shown))
	for _, bad := range []string{secret, "DATABASE_URL", dbURL, "attempt.log of run"} {
		if strings.Contains(shown, bad) {
			t.Errorf("the read-only session's item page shows %q (a log read through a link)", bad)
		}
	}
}

func awaitCond(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
