package ui_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/schedule"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/workqtype"
)

func pausedOn(t *testing.T, pool *pgxpool.Pool, queue string) bool {
	t.Helper()
	ps, err := lease.Paused(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.Table == lease.JobRuns && p.Queue == queue {
			return true
		}
	}
	return false
}

// On a sharded dashboard pause and resume of the overview apply to every
// shard, with each shard's outcome in the message; the overview says
// where a queue is paused; the limit is refused without a shard and
// nothing changes, and with one sets only that shard's budget.
func TestDashboardQueueActionsOnEveryShard(t *testing.T) {
	us := testdb.Pool(t)
	s := newShardedSite(t, us)
	jobs(t, s.pool, "eu", 1)
	jobs(t, us, "us", 1)
	b := s.browser()
	b.login(s.admin)
	b.awaitQueue("job_runs/q")

	if _, err := lease.Pause(context.Background(), us, lease.JobRuns, "q", "test", ""); err != nil {
		t.Fatal(err)
	}
	must(t, b.get("/ui/"), 200, `<strong class="paused">paused</strong> on us`, `aria-label="Pause job_runs/q"`, `aria-label="Resume job_runs/q"`)
	must(t, b.post("/ui/queues/job_runs/q/pause", url.Values{}), http.StatusSeeOther)
	if !pausedOn(t, s.pool, "q") || !pausedOn(t, us, "q") {
		t.Fatal("pause did not pause both shards")
	}
	p := b.get("/ui/")
	must(t, p, 200, "job_runs/q paused: no worker claims from it; items in flight finish, on every shard (shard us was already paused).",
		`<strong class="paused">paused</strong></td>`)
	must(t, b.post("/ui/queues/job_runs/q/resume", url.Values{}), http.StatusSeeOther)
	if pausedOn(t, s.pool, "q") || pausedOn(t, us, "q") {
		t.Fatal("resume did not resume both shards")
	}
	must(t, b.get("/ui/"), 200, "job_runs/q resumed, on every shard.")

	// The limit: refused without a shard; with one, that shard's budget.
	before := testdb.Snapshot(t, s.pool) + testdb.Snapshot(t, us)
	must(t, b.post("/ui/queues/job_runs/q/limit", url.Values{"limit": {"5"}}), 400, "workq shard-limit")
	must(t, b.post("/ui/queues/job_runs/q/limit", url.Values{"limit": {"5"}, "shard": {"mars"}}), 404)
	if after := testdb.Snapshot(t, s.pool) + testdb.Snapshot(t, us); after != before {
		t.Fatal("a refused limit wrote")
	}
	if p := b.get("/ui/"); p.status != 200 || strings.Contains(p.body, `/queues/job_runs/q/limit"`) {
		t.Fatalf("the sharded overview offers a limit form:\n%s", p.body)
	}
	must(t, b.post("/ui/queues/job_runs/q/limit", url.Values{"limit": {"5"}, "shard": {"us"}}), http.StatusSeeOther)
	must(t, b.get("/ui/"), 200, "job_runs/q: limit W set to 5 on shard us.", `data-f="limit">us 5</td>`)
}

// The schedules page lists every shard's schedules with their shard, and
// triggers one on its own shard.
func TestDashboardSchedulesOfEveryShard(t *testing.T) {
	ctx := context.Background()
	us := testdb.Pool(t)
	s := newShardedSite(t, us)
	st := schedule.NewStore(schedule.StoreOptions{})
	names := []string{"eu", "us"}
	pools := []*pgxpool.Pool{s.pool, us}
	var onUS string
	for i := 0; onUS == ""; i++ {
		n := "nightly-" + string(rune('a'+i))
		if workqtype.ShardIndex(names, workqtype.ShardKeySchedule(n)) == 1 {
			onUS = n
		}
	}
	for i, pool := range pools {
		if _, err := st.Create(ctx, pool, schedule.Spec{Name: "on-" + names[i], Cron: "@daily", Kind: "report"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Create(ctx, us, schedule.Spec{Name: onUS, Cron: "@daily", Kind: "report"}); err != nil {
		t.Fatal(err)
	}
	b := s.browser()
	b.login(s.admin)
	must(t, b.get("/ui/schedules"), 200, `<th scope="col">Shard</th>`, `<th scope="row">on-eu</th><td>eu</td>`,
		`<th scope="row">on-us</th><td>us</td>`, `<th scope="row">`+onUS+`</th><td>us</td>`, `<input type="hidden" name="shard" value="us">`)
	// The form's shard; without one, the shard of the name.
	must(t, b.post("/ui/schedules/on-us/trigger", url.Values{"shard": {"us"}}), http.StatusSeeOther)
	must(t, b.post("/ui/schedules/"+onUS+"/trigger", url.Values{}), http.StatusSeeOther)
	must(t, b.get("/ui/schedules"), 200, "Schedule "+onUS+" triggered: job run us:")
	must(t, b.post("/ui/schedules/on-us/trigger", url.Values{"shard": {"eu"}}), 404)
	var n int
	if err := us.QueryRow(ctx, "select count(*) from workq.job_runs_all where kind = 'report'").Scan(&n); err != nil || n != 2 {
		t.Fatalf("us has %d runs (%v), want 2", n, err)
	}
	if err := s.pool.QueryRow(ctx, "select count(*) from workq.job_runs_all where kind = 'report'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("eu has %d runs (%v), want 0", n, err)
	}
}
