package ui_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/workq/workq/internal/jobq"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/api"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// site is an API server with the dashboard, over its own database, with an
// admin and a read token.
type site struct {
	t           *testing.T
	pool        *pgxpool.Pool
	srv         *api.Server
	http        *httptest.Server
	admin, read string
}

// siteSetup is what a test may change of its site before it is made: the
// API's HTTP options and the databases of the Client the API serves.
type siteSetup struct {
	api.Options
	pool *pgxpool.Pool // the site's database
	// shards, when set, make the Client a sharded one of these
	// (workq.NewShardedClient).
	shards []workq.Shard
}

// siteClient is the producer Client (maintenance off) of st.
func siteClient(t testing.TB, st siteSetup) *workq.Client {
	t.Helper()
	cfg := workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}}
	var c *workq.Client
	var err error
	if len(st.shards) > 0 {
		c, err = workq.NewShardedClient(st.shards, cfg)
	} else {
		c, err = workq.NewClient(st.pool, cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newSite(t *testing.T, mod ...func(*siteSetup)) *site {
	t.Helper()
	adminSecret, adminEntry, readSecret, readEntry := newTokens(t)
	tokens, err := api.ParseTokens([]string{adminEntry, readEntry})
	if err != nil {
		t.Fatal(err)
	}
	st := siteSetup{Options: api.Options{Tokens: tokens, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		SampleInterval: 50 * time.Millisecond}}
	for _, f := range mod {
		f(&st)
	}
	if st.pool == nil {
		st.pool = testdb.Pool(t)
	}
	srv, err := api.New(siteClient(t, st), st.Options)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); srv.RunSampler(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return &site{t: t, pool: st.pool, srv: srv, http: hs, admin: adminSecret, read: readSecret}
}

// newTokens makes an admin token "ops" and a read token "viewer": their
// secrets and config entries.
func newTokens(t *testing.T) (adminSecret, adminEntry, readSecret, readEntry string) {
	t.Helper()
	adminSecret, adminEntry, err := api.NewToken("ops", api.ScopeAdmin)
	if err != nil {
		t.Fatal(err)
	}
	readSecret, readEntry, err = api.NewToken("viewer", api.ScopeRead)
	if err != nil {
		t.Fatal(err)
	}
	return adminSecret, adminEntry, readSecret, readEntry
}

// browser is an HTTP client with a cookie jar that does not follow
// redirects, acting like a same-origin browser (Sec-Fetch-Site, Origin).
type browser struct {
	t    *testing.T
	s    *site
	c    *http.Client
	csrf string
}

func (s *site) browser() *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		s.t.Fatal(err)
	}
	return &browser{t: s.t, s: s, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type page struct {
	status int
	header http.Header
	body   string
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (b *browser) do(method, path string, form url.Values, hdr ...string) page {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.s.http.URL+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", b.s.http.URL)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	res, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	rb, err := io.ReadAll(res.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	p := page{status: res.StatusCode, header: res.Header, body: string(rb)}
	if m := csrfField.FindStringSubmatch(p.body); m != nil {
		b.csrf = m[1]
	}
	return p
}

// awaitQueue waits until the overview's data lists a (table/queue): the
// sampler has read it.
func (b *browser) awaitQueue(key string) {
	b.t.Helper()
	table, queue, _ := strings.Cut(key, "/")
	want := `"table":"` + table + `","queue":"` + queue + `"`
	deadline := time.Now().Add(30 * time.Second)
	for {
		p := b.get("/ui/api/overview")
		if p.status == 200 && strings.Contains(p.body, want) {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("the overview never listed %s: %d %s", key, p.status, p.body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (b *browser) get(path string) page { b.t.Helper(); return b.do("GET", path, nil) }

func (b *browser) post(path string, form url.Values, hdr ...string) page {
	b.t.Helper()
	if _, ok := form["csrf"]; !ok {
		form.Set("csrf", b.csrf)
	}
	return b.do("POST", path, form, hdr...)
}

func (b *browser) login(token string) {
	b.t.Helper()
	p := b.post("/ui/login", url.Values{"token": {token}, "csrf": {""}})
	if p.status != http.StatusSeeOther {
		b.t.Fatalf("login: %d %s", p.status, p.body)
	}
	b.get("/ui/") // picks up the CSRF token
}

func must(t *testing.T, p page, status int, contains ...string) {
	t.Helper()
	if p.status != status {
		t.Fatalf("status %d, want %d:\n%s", p.status, status, p.body)
	}
	for _, c := range contains {
		if !strings.Contains(p.body, c) {
			t.Errorf("page does not contain %q:\n%s", c, p.body)
		}
	}
}

func enqueue(t *testing.T, pool *pgxpool.Pool, jobs ...jobq.Job) []int64 {
	t.Helper()
	c := jobq.New(jobq.Options{})
	res, err := c.EnqueueMany(context.Background(), pool, jobs)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, len(res))
	for i, r := range res {
		ids[i] = r.ID
	}
	return ids
}

func TestLoginAndPages(t *testing.T) {
	s := newSite(t)
	b := s.browser()
	// Without a session every page sends to the login page, and back.
	p := b.get("/ui/items/job_runs?status=failed")
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "../login?next=items%2Fjob_runs%3Fstatus%3Dfailed" {
		t.Fatalf("no session: %d Location %q", p.status, p.header.Get("Location"))
	}
	must(t, b.get("/ui/login"), 200, `<label for="token">API token</label>`)
	must(t, b.post("/ui/login", url.Values{"token": {"wq_nope"}}), 401, "That token is not valid")
	p = b.post("/ui/login", url.Values{"token": {s.admin}, "next": {"items/job_runs?status=failed"}})
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "./items/job_runs?status=failed" {
		t.Fatalf("login: %d Location %q", p.status, p.header.Get("Location"))
	}
	cookie := p.header.Get("Set-Cookie")
	for _, attr := range []string{"workq_session=", "HttpOnly", "SameSite=Strict"} {
		if !strings.Contains(cookie, attr) {
			t.Errorf("cookie %q has no %s", cookie, attr)
		}
	}
	if strings.Contains(cookie, "Secure") {
		t.Errorf("cookie %q is Secure over plain HTTP", cookie)
	}
	// A next that leaves the dashboard is ignored.
	p = s.browser().post("/ui/login", url.Values{"token": {s.admin}, "next": {"//evil.example/x"}})
	if p.header.Get("Location") != "././" {
		t.Errorf("login with an outside next: Location %q, want ././", p.header.Get("Location"))
	}

	ids := enqueue(t, s.pool, jobq.Job{Queue: "mail", Kind: "email.send", Payload: map[string]any{"to": "<script>alert(1)</script>"}},
		jobq.Job{Queue: "mail", Kind: "email.send"})
	b.awaitQueue("job_runs/mail")
	must(t, b.get("/ui/"), 200, "<h1>Overview</h1>", `aria-label="Pause job_runs/mail"`, `<th scope="col">Queue</th>`)
	p = b.get("/ui/items/job_runs?queue=mail")
	must(t, p, 200, `href="../items/job_runs/`, `name="action" value="retry"`, "Act on every item matching this filter")
	p = b.get("/ui/items/job_runs/" + itoa(ids[0]))
	must(t, p, 200, "&lt;script&gt;alert(1)&lt;/script&gt;", "Cancel…")
	if strings.Contains(p.body, "<script>alert") {
		t.Error("the payload is not escaped")
	}
	for _, path := range []string{"/ui/items/outbox", "/ui/items/inbox?status=dead", "/ui/items/timers", "/ui/outbox", "/ui/outbox?joins=all",
		"/ui/schedules", "/ui/counts", "/ui/api/overview", "/ui/api/history?table=job_runs&queue=mail"} {
		if p := b.get(path); p.status != 200 {
			t.Errorf("%s: %d %s", path, p.status, p.body)
		}
	}
	must(t, b.get("/ui/items/jobs"), 404, "There is no work table")
	must(t, b.get("/ui/items/job_runs/999999"), 404, "item not found")
	must(t, b.get("/ui/items/job_runs?status=sleeping"), 400, `status &#34;sleeping&#34;`)
	must(t, b.get("/ui/nowhere"), 404, "no such page")
	if p := b.get("/ui/static/app.js?v=x"); p.status != 200 || !strings.Contains(p.header.Get("Content-Type"), "javascript") {
		t.Errorf("app.js: %d %s", p.status, p.header.Get("Content-Type"))
	}
	if csp := p.header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("CSP %q", csp)
	}
	// The API's root sends to the dashboard.
	if p := b.get("/"); p.status != http.StatusFound || p.header.Get("Location") != "ui/" {
		t.Errorf("GET /: %d %q", p.status, p.header.Get("Location"))
	}

	// Logout ends the session.
	must(t, b.post("/ui/logout", url.Values{}), http.StatusSeeOther)
	if p := b.get("/ui/"); p.status != http.StatusSeeOther {
		t.Errorf("after logout: %d", p.status)
	}
	if p := b.get("/ui/api/overview"); p.status != http.StatusUnauthorized {
		t.Errorf("overview data after logout: %d", p.status)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestActionsNeedSessionCSRFOriginAndAdmin: every refused action changes
// nothing.
func TestActionsNeedSessionCSRFOriginAndAdmin(t *testing.T) {
	s := newSite(t)
	ids := enqueue(t, s.pool, jobq.Job{Queue: "q", Kind: "k"})
	cancel := url.Values{"action": {"cancel"}, "id": {itoa(ids[0])}, "confirm": {"yes"}}
	b := s.browser()
	b.login(s.admin)
	good := b.csrf

	ro := s.browser()
	ro.login(s.read)
	must(t, ro.get("/ui/items/job_runs"), 200)
	if p := ro.get("/ui/"); strings.Contains(p.body, "Pause") || strings.Contains(p.body, `name="action"`) {
		t.Error("a read-only session sees action buttons")
	}
	if p := ro.get("/ui/items/job_runs/" + itoa(ids[0])); strings.Contains(p.body, `value="cancel"`) {
		t.Error("a read-only session sees item actions")
	}

	cases := []struct {
		name string
		b    *browser
		form url.Values
		hdr  []string
		want string
	}{
		{"no session", s.browser(), url.Values{"csrf": {good}}, nil, "session has ended"},
		{"no CSRF token", b, url.Values{"csrf": {""}}, nil, "security token"},
		{"wrong CSRF token", b, url.Values{"csrf": {good + "x"}}, nil, "security token"},
		{"another session's token", b, url.Values{"csrf": {ro.csrf}}, nil, "security token"},
		{"cross-site", b, url.Values{"csrf": {good}}, []string{"Sec-Fetch-Site", "cross-site"}, "another site"},
		{"other origin", b, url.Values{"csrf": {good}}, []string{"Sec-Fetch-Site", "", "Origin", "https://evil.example"}, "another site"},
		{"read-only session", ro, url.Values{"csrf": {ro.csrf}}, nil, "read scope"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			form := url.Values{}
			for k, v := range cancel {
				form[k] = v
			}
			for k, v := range c.form {
				form[k] = v
			}
			must(t, c.b.post("/ui/items/job_runs/act", form, c.hdr...), http.StatusForbidden, c.want)
			for _, path := range []string{"/ui/queues/job_runs/q/pause", "/ui/schedules/x/trigger"} {
				must(t, c.b.post(path, form, c.hdr...), http.StatusForbidden)
			}
			var status int16
			var paused int
			if err := s.pool.QueryRow(context.Background(), `select status, (select count(*) from workq.queue_pauses) from workq.job_runs_all where id = $1`, ids[0]).
				Scan(&status, &paused); err != nil || status != 0 || paused != 0 {
				t.Fatalf("a refused action changed the database: status %d, %d pauses (%v)", status, paused, err)
			}
		})
	}
	// The same request with the session's token goes through.
	b.csrf = good
	p := b.post("/ui/items/job_runs/act", cancel)
	if p.status != http.StatusSeeOther {
		t.Fatalf("cancel: %d %s", p.status, p.body)
	}
	must(t, b.get("/ui/items/job_runs"), 200, "Cancel: 1 applied.")
}

func TestActionsConfirmAndApply(t *testing.T) {
	s := newSite(t)
	ctx := context.Background()
	if _, err := s.pool.Exec(ctx, `insert into workq.job_runs (queue, kind, payload, status, finished_at, last_error)
		select 'bulk', 'k', '{}', 3, now(), case when i <= 1200 then 'smtp timeout' else 'other' end from generate_series(1, 1500) i`); err != nil {
		t.Fatal(err)
	}
	b := s.browser()
	b.login(s.admin)
	// A matching action asks first, with the filter in the form again.
	form := url.Values{"scope": {"matching"}, "action": {"retry"}, "queue": {"bulk"}, "error": {"SMTP"}, "back": {"items/job_runs?queue=bulk"}}
	p := b.post("/ui/items/job_runs/act", form)
	must(t, p, 200, "Retry every item matching queue &#34;bulk&#34;, error &#34;SMTP&#34;", `name="confirm" value="yes"`, `name="error" value="SMTP"`)
	form.Set("confirm", "yes")
	p = b.post("/ui/items/job_runs/act", form)
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "../../items/job_runs?queue=bulk" {
		t.Fatalf("retry matching: %d %q %s", p.status, p.header.Get("Location"), p.body)
	}
	must(t, b.get("/ui/items/job_runs?queue=bulk"), 200, "Retry: 1200 applied, 0 skipped (not in the state retry needs), in 2 batches.")
	var ready int
	if err := s.pool.QueryRow(ctx, `select count(*) from workq.job_runs_all where status = 0`).Scan(&ready); err != nil || ready != 1200 {
		t.Fatalf("%d ready (%v), want 1200", ready, err)
	}

	// Queue actions: pause, limit, resume.
	must(t, b.post("/ui/queues/job_runs/bulk/pause", url.Values{}), http.StatusSeeOther)
	must(t, b.get("/ui/"), 200, "job_runs/bulk paused", `<strong class="paused">paused</strong>`, "Resume job_runs/bulk")
	must(t, b.post("/ui/queues/job_runs/bulk/limit", url.Values{"limit": {"7"}}), http.StatusSeeOther)
	must(t, b.get("/ui/"), 200, "limit W set to 7", `data-f="limit">7</td>`)
	must(t, b.post("/ui/queues/job_runs/bulk/limit", url.Values{"limit": {"-3"}}), 400, "from 0 to")
	must(t, b.post("/ui/queues/job_runs/bulk/limit", url.Values{"remove": {"yes"}}), http.StatusSeeOther)
	must(t, b.post("/ui/queues/job_runs/bulk/resume", url.Values{}), http.StatusSeeOther)
	must(t, b.get("/ui/"), 200, "job_runs/bulk resumed.")
	var pauses, limits int
	if err := s.pool.QueryRow(ctx, `select (select count(*) from workq.queue_pauses), (select count(*) from workq.queue_limits)`).Scan(&pauses, &limits); err != nil ||
		pauses != 0 || limits != 0 {
		t.Fatalf("%d pauses, %d limits left (%v)", pauses, limits, err)
	}
	must(t, b.post("/ui/queues/job_runs/a%20b/pause", url.Values{}), 400, "queue")

	// Delete of selected items asks, then deletes what is finished.
	var failed []string
	rows, err := s.pool.Query(ctx, `select id from workq.job_runs_all where status = 3 order by id limit 2`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		failed = append(failed, itoa(id))
	}
	del := url.Values{"action": {"delete"}, "id": failed}
	must(t, b.post("/ui/items/job_runs/act", del), 200, "Delete 2 item(s) of job_runs")
	del.Set("confirm", "yes")
	must(t, b.post("/ui/items/job_runs/act", del), http.StatusSeeOther)
	must(t, b.get("/ui/items/job_runs"), 200, "Delete: 2 applied.")
	must(t, b.post("/ui/items/job_runs/act", url.Values{"action": {"retry"}}), 400, "Select at least one item")
	must(t, b.post("/ui/items/job_runs/act", url.Values{"action": {"explode"}, "id": {"1"}}), 400, "want retry, cancel or delete")

	// A schedule triggered now.
	if _, err := s.pool.Exec(ctx, `insert into workq.schedules (name, cron, kind, next_run_at) values ('nightly', '@daily', 'report', now() + interval '1 day')`); err != nil {
		t.Fatal(err)
	}
	must(t, b.get("/ui/schedules"), 200, "<th scope=\"row\">nightly</th>", "Trigger now")
	must(t, b.post("/ui/schedules/nightly/trigger", url.Values{}), http.StatusSeeOther)
	must(t, b.get("/ui/schedules"), 200, "Schedule nightly triggered: job run")
	must(t, b.post("/ui/schedules/nope/trigger", url.Values{}), 404)
}

// A job's metadata is on its page, escaped, sorted by key.
func TestItemPageShowsMetadata(t *testing.T) {
	s := newSite(t)
	b := s.browser()
	b.login(s.read)
	ids := enqueue(t, s.pool, jobq.Job{Kind: "email.send", Metadata: map[string]string{"tenant": "acme", "note": "<b>hi</b>"}},
		jobq.Job{Kind: "email.send"})
	p := b.get("/ui/items/job_runs/" + itoa(ids[0]))
	must(t, p, 200, `<h3 id="metadata-h">Metadata</h3>`, `<dt>note</dt><dd><pre class="inline">&lt;b&gt;hi&lt;/b&gt;</pre></dd><dt>tenant</dt><dd><pre class="inline">acme</pre></dd>`)
	if p := b.get("/ui/items/job_runs/" + itoa(ids[1])); strings.Contains(p.body, "metadata-h") {
		t.Error("a job without metadata has a Metadata section")
	}
}

// A done job's page shows the error of its earlier attempt among the
// attempts only, not as its last error; a failed job's page shows when it
// ended and no run_at after that (the list too).
func TestItemPageOfFinishedJobs(t *testing.T) {
	s := newSite(t)
	b := s.browser()
	b.login(s.read)
	ctx := context.Background()
	ids := enqueue(t, s.pool, jobq.Job{Kind: "email.send", MaxAttempts: 3}, jobq.Job{Kind: "email.send", MaxAttempts: 1})
	done, failed := ids[0], ids[1]
	e := lease.New(s.pool, lease.JobRuns)
	for _, a := range []struct {
		id  int64
		out lease.Outcome
	}{{done, lease.Retry}, {done, lease.Done}, {failed, lease.Failed}} {
		it, ok, err := e.ClaimByID(ctx, a.id, time.Minute, "w1")
		if err != nil || !ok {
			t.Fatalf("claim: %v %v", ok, err)
		}
		if _, err := e.Complete(ctx, []lease.Completion{{ID: a.id, Token: it.OwnerToken, Outcome: a.out, Error: "smtp timeout"}}); err != nil {
			t.Fatal(err)
		}
	}
	// A failed row written before LeaseComplete kept run_at has one ahead.
	if _, err := s.pool.Exec(ctx, `update workq.job_runs set run_at = now() + interval '1 hour' where id = $1`, failed); err != nil {
		t.Fatal(err)
	}
	p := b.get("/ui/items/job_runs/" + itoa(done))
	must(t, p, 200, `<td class="err">smtp timeout</td>`)
	if strings.Contains(p.body, "<h3>Last error</h3>") {
		t.Error("a done job's page shows its earlier attempt's error as its last error")
	}
	p = b.get("/ui/items/job_runs/" + itoa(failed))
	must(t, p, 200, "<h3>Last error</h3>", "<dt>Finished</dt>")
	if strings.Contains(p.body, "<dt>Run at</dt>") {
		t.Error("a failed job's page shows a run at")
	}
	p = b.get("/ui/items/job_runs?status=failed")
	must(t, p, 200, ">ended ")
	if strings.Contains(p.body, ">in ") {
		t.Error("the list shows a failed job due in the future")
	}
	// A retry of the done job and of a missing one says which is which.
	ad := s.browser()
	ad.login(s.admin)
	must(t, ad.post("/ui/items/job_runs/act", url.Values{"action": {"retry"}, "id": {itoa(done), "999999"}}), http.StatusSeeOther)
	must(t, ad.get("/ui/items/job_runs"), 200, "Retry: 0 applied, 2 skipped ("+itoa(done)+" is done, 999999 not found: not in the state retry needs, or gone).")
}
