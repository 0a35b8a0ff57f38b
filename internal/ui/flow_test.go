package ui_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
)

// flowFixture puts queue fq under flow control (a rule of the queue, one
// per key with a concurrency of 1, kind mail paused by ops:ann) and
// throttles queue tq for an hour. Jobs: mail (held by the pause), an sms
// of key acme in progress and one ready (held by the key's concurrency).
type flowFixture struct {
	c                       *workq.Client
	mail, acmeRunning, acme int64
}

func newFlowFixture(t *testing.T, pool *pgxpool.Pool) flowFixture {
	t.Helper()
	ctx := context.Background()
	c := siteClient(t, siteSetup{pool: pool})
	ids := enqueue(t, pool, jobq.Job{Queue: "fq", Kind: "mail"}, jobq.Job{Queue: "fq", Kind: "sms"}, jobq.Job{Queue: "fq", Kind: "sms"})
	if _, err := pool.Exec(ctx, `update workq.job_runs set limit_key = 'acme' where id = any($1)`, ids[1:]); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `update workq.job_runs set status = 1, owner_token = gen_random_uuid(), locked_until = now() + interval '1 hour',
		claimed_at = now(), claimed_by = 'test', attempts = 1 where id = $1`, ids[1]); err != nil {
		t.Fatal(err)
	}
	for _, l := range []workq.FlowLimit{
		{Table: workq.TableJobRuns, Queue: "fq", Rate: 100, Period: time.Minute, Concurrency: 5},
		{Table: workq.TableJobRuns, Queue: "fq", PerKey: true, Concurrency: 1},
	} {
		if err := c.SetFlowLimit(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.PauseKind(ctx, workq.KindRef{Table: workq.TableJobRuns, Queue: "fq", Kind: "mail"},
		&workq.ActionOpts{Actor: "ops:ann", Reason: "relay down"}); err != nil {
		t.Fatal(err)
	}
	if _, err := lease.Throttle(ctx, pool, lease.JobRuns, "tq", "", "", time.Hour); err != nil {
		t.Fatal(err)
	}
	return flowFixture{c: c, mail: ids[0], acmeRunning: ids[1], acme: ids[2]}
}

func (f flowFixture) pausedKinds(t *testing.T) int {
	t.Helper()
	st, err := f.c.FlowStatus(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return len(st.PausedKinds)
}

// TestFlowPage: the flow-control page lists the queues, the rules with
// their use, the paused kind with a Resume button and the throttle; Resume
// needs the session's CSRF token, the dashboard's origin and an admin
// session, and works with them; the item pages say what a ready job waits
// for.
func TestFlowPage(t *testing.T) {
	s := newSite(t)
	f := newFlowFixture(t, s.pool)
	b := s.browser()
	b.login(s.admin)

	p := b.get("/ui/flow")
	must(t, p, 200, "<h1>Flow control</h1>", `href="./flow" aria-current="page"`,
		`<tr data-key="job_runs/fq">`, `<tr data-key="job_runs/tq">`, "a throttle alone",
		`<tr data-key="job_runs/fq/queue">`, `<td data-f="rate">100 per 1m0s</td>`, `<td class="n" data-f="concurrency">5</td>`,
		`<tr data-key="job_runs/fq/each key">`, "(busiest key)",
		`<tr data-key="job_runs/fq[mail]">`, "ops:ann", "relay down", `aria-label="Resume job_runs/fq[mail]"`,
		`<tr data-key="job_runs/tq/queue">`)
	// The throttle ends an hour after it was set: tomorrow's date between
	// 23:00 and midnight UTC, so the date is the one an hour from now.
	if !strings.Contains(p.body, `<td data-f="until">`+time.Now().UTC().Add(time.Hour).Format("2006-01-02")) {
		t.Errorf("the throttle's until is not shown:\n%s", p.body)
	}
	must(t, b.get("/ui/"), 200, `href="./flow"`) // the nav entry

	// What a ready job waits for; nothing for a job in progress.
	must(t, b.get("/ui/items/job_runs/"+itoa(f.mail)), 200, "<dt>Waits for</dt>", "<li>kind mail paused by ops:ann</li>")
	must(t, b.get("/ui/items/job_runs/"+itoa(f.acme)), 200, "<li>key acme at its concurrency (1 of 1 in progress)</li>")
	if p := b.get("/ui/items/job_runs/" + itoa(f.acmeRunning)); strings.Contains(p.body, "Waits for") {
		t.Errorf("a job in progress waits for something:\n%s", p.body)
	}

	// Refused: no CSRF token, another origin, a read-only session.
	resume := func() url.Values {
		return url.Values{"table": {"job_runs"}, "queue": {"fq"}, "kind": {"mail"}}
	}
	must(t, b.post("/ui/flow/resume-kind", url.Values{"csrf": {""}, "table": {"job_runs"}, "queue": {"fq"}, "kind": {"mail"}}), http.StatusForbidden)
	must(t, b.post("/ui/flow/resume-kind", resume(), "Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site"), http.StatusForbidden)
	ro := s.browser()
	ro.login(s.read)
	if p := ro.get("/ui/flow"); p.status != 200 || strings.Contains(p.body, "Resume job_runs") {
		t.Errorf("a read-only session: %d, or it sees a Resume button", p.status)
	}
	must(t, ro.post("/ui/flow/resume-kind", resume()), http.StatusForbidden)
	if n := f.pausedKinds(t); n != 1 {
		t.Fatalf("a refused resume changed the pause: %d paused kinds", n)
	}

	// Resume from the page's form.
	b.get("/ui/flow")
	p = b.post("/ui/flow/resume-kind", resume())
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "../flow" {
		t.Fatalf("resume: %d Location %q\n%s", p.status, p.header.Get("Location"), p.body)
	}
	if n := f.pausedKinds(t); n != 0 {
		t.Fatalf("after Resume: %d paused kinds", n)
	}
	must(t, b.get("/ui/flow"), 200, "job_runs/fq: kind mail resumed", "No kind is paused.")
	if p := b.get("/ui/items/job_runs/" + itoa(f.mail)); strings.Contains(p.body, "Waits for") {
		t.Errorf("the resumed kind's job still waits:\n%s", p.body)
	}
}

// TestFlowPageOverTwoShards: a sharded dashboard lists each shard's flow
// control with its shard, and Resume resumes the kind on its shard only.
func TestFlowPageOverTwoShards(t *testing.T) {
	us := testdb.Pool(t)
	s := newShardedSite(t, us)
	ctx := context.Background()
	for _, pool := range []*pgxpool.Pool{s.pool, us} {
		c := siteClient(t, siteSetup{pool: pool})
		if _, err := c.PauseKind(ctx, workq.KindRef{Table: workq.TableJobRuns, Queue: "fq", Kind: "mail"}, &workq.ActionOpts{Actor: "ops:ann"}); err != nil {
			t.Fatal(err)
		}
	}
	b := s.browser()
	b.login(s.admin)
	must(t, b.get("/ui/flow"), 200, `aria-label="Resume job_runs/fq[mail] (shard eu)"`, `aria-label="Resume job_runs/fq[mail] (shard us)"`)
	must(t, b.post("/ui/flow/resume-kind", url.Values{"table": {"job_runs"}, "queue": {"fq"}, "kind": {"mail"}}), http.StatusBadRequest, "Name the shard whose kind to resume")
	p := b.post("/ui/flow/resume-kind", url.Values{"table": {"job_runs"}, "queue": {"fq"}, "kind": {"mail"}, "shard": {"us"}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("resume on us: %d\n%s", p.status, p.body)
	}
	p = b.get("/ui/flow")
	must(t, p, 200, "kind mail resumed on shard us", `aria-label="Resume job_runs/fq[mail] (shard eu)"`)
	if strings.Contains(p.body, "(shard us)") {
		t.Errorf("the kind is still paused on us:\n%s", p.body)
	}
}
