package test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
)

// A job-run claim with a resume point (lease.ClaimParams.Resume) reads the
// point's priority from its run_at on, and every higher and lower priority
// in full, in claim order; a row of that priority behind the point is left
// to a claim without one.
func TestJobRunsClaimResumePoint(t *testing.T) {
	pool := testdb.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var now time.Time
	if err := pool.QueryRow(ctx, "select now()").Scan(&now); err != nil {
		t.Fatal(err)
	}
	rows := []struct {
		name     string
		priority int16
		age      time.Duration // run_at = now - age
	}{
		{"high, old", 5, time.Hour},
		{"behind the point", 0, 10 * time.Minute},
		{"at the point", 0, 5 * time.Minute},
		{"after the point", 0, time.Minute},
		{"low, old", -1, 2 * time.Hour},
		{"not due", 0, -time.Hour},
	}
	ids := map[int64]string{}
	for _, r := range rows {
		var id int64
		if err := pool.QueryRow(ctx, `insert into workq.job_runs (queue, kind, priority, run_at) values ('resume', 'k', $1, $2) returning id`,
			r.priority, now.Add(-r.age)).Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids[id] = r.name
	}
	e := lease.New(pool, lease.JobRuns)
	claim := func(max int, resume *lease.ResumePoint) []string {
		t.Helper()
		c, got := claimNamed(t, ctx, e, max, resume, ids)
		// Give the rows back (released: ready, attempt not used) for the next case.
		var done []lease.Completion
		for _, it := range c.Items {
			done = append(done, lease.Completion{ID: it.ID, Token: it.OwnerToken, RunID: it.RunID, Outcome: lease.Released})
		}
		if len(done) > 0 {
			if _, err := e.Complete(ctx, done); err != nil {
				t.Fatal(err)
			}
			// A release makes a row due now; put each back where it was.
			for _, it := range c.Items {
				if _, err := pool.Exec(ctx, "update workq.job_runs set run_at = $2 where id = $1", it.ID, it.RunAt); err != nil {
					t.Fatal(err)
				}
			}
		}
		return got
	}
	point := &lease.ResumePoint{Priority: 0, RunAt: now.Add(-5 * time.Minute)}
	for _, tc := range []struct {
		name   string
		max    int
		resume *lease.ResumePoint
		want   []string
	}{
		{"full claim", 10, nil, []string{"after the point", "at the point", "behind the point", "high, old", "low, old"}},
		{"resumed claim", 10, point, []string{"after the point", "at the point", "high, old", "low, old"}},
		{"resumed, one row: the higher priority first", 1, point, []string{"high, old"}},
		{"resumed, two rows: then the point's priority from the point", 2, point, []string{"at the point", "high, old"}},
		{"resumed, four rows: lower priorities last", 4, point, []string{"after the point", "at the point", "high, old", "low, old"}},
		{"full claim, two rows: the row behind the point is next", 2, nil, []string{"behind the point", "high, old"}},
	} {
		if got := claim(tc.max, tc.resume); !slices.Equal(got, tc.want) {
			t.Errorf("%s: claimed %q, want %q", tc.name, got, tc.want)
		}
	}
}

// ResumeFrom is where the claim that returned items started reading, in
// its table's claim order, less the margin: for job runs the highest
// priority and that priority's earliest run_at; for timers and the inbox
// the earliest run_at; the outbox takes none.
func TestResumeFrom(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	item := func(p int16, s int) lease.Item {
		return lease.Item{Priority: p, RunAt: t0.Add(time.Duration(s) * time.Second)}
	}
	at := func(p int16, s int) *lease.ResumePoint {
		return &lease.ResumePoint{Priority: p, RunAt: t0.Add(time.Duration(s) * time.Second)}
	}
	mixed := []lease.Item{item(0, 1), item(3, 8), item(-2, 0), item(3, 6)}
	for _, tc := range []struct {
		name  string
		table lease.Table
		items []lease.Item
		want  *lease.ResumePoint
	}{
		{"no items", lease.JobRuns, nil, nil},
		{"one", lease.JobRuns, []lease.Item{item(0, 5)}, at(0, 4)},
		{"earliest of the priority, in any order", lease.JobRuns, []lease.Item{item(0, 9), item(0, 3), item(0, 7)}, at(0, 2)},
		{"job runs: highest priority wins over earlier run_at", lease.JobRuns, mixed, at(3, 5)},
		{"timers: earliest run_at, priority aside", lease.Timers, mixed, at(0, -1)},
		{"inbox: earliest run_at, priority aside", lease.Inbox, mixed, at(0, -1)},
		{"outbox: none", lease.Outbox, mixed, nil},
	} {
		got := lease.ResumeFrom(tc.table, tc.items, time.Second)
		if (got == nil) != (tc.want == nil) || got != nil && (got.Priority != tc.want.Priority || !got.RunAt.Equal(tc.want.RunAt)) {
			t.Errorf("%s: ResumeFrom = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// Timers and the inbox are claimed in (run_at, id) order: with a resume
// point a claim reads from its run_at on, and a row behind it is left to a
// claim without one.
func TestRunAtOrderedClaimResumePoint(t *testing.T) {
	pool := testdb.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var now time.Time
	if err := pool.QueryRow(ctx, "select now()").Scan(&now); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		table  lease.Table
		insert string
	}{
		{lease.Timers, `insert into workq.timers (queue, topic, due_time, run_at) values ('resume', 't', $1, $1) returning id`},
		{lease.Inbox, `insert into workq.inbox (queue, source, message_id, payload_hash, run_at)
			values ('resume', 's', gen_random_uuid()::text, '\x00'::bytea, $1) returning id`},
	} {
		table, insert := tc.table, tc.insert
		t.Run(string(table), func(t *testing.T) {
			names := map[int64]string{}
			for _, r := range []struct {
				name string
				age  time.Duration
			}{{"behind the point", 10 * time.Minute}, {"at the point", 5 * time.Minute}, {"after the point", time.Minute}, {"not due", -time.Hour}} {
				var id int64
				if err := pool.QueryRow(ctx, insert, now.Add(-r.age)).Scan(&id); err != nil {
					t.Fatal(err)
				}
				names[id] = r.name
			}
			e := lease.New(pool, table)
			claim := func(resume *lease.ResumePoint) []string {
				t.Helper()
				_, got := claimNamed(t, ctx, e, 10, resume, names)
				return got
			}
			// Priority is not part of these tables' claim order: a point of
			// another priority reads the same.
			if got, want := claim(&lease.ResumePoint{Priority: 7, RunAt: now.Add(-5 * time.Minute)}), []string{"after the point", "at the point"}; !slices.Equal(got, want) {
				t.Errorf("resumed claim: %q, want %q", got, want)
			}
			if got, want := claim(nil), []string{"behind the point"}; !slices.Equal(got, want) {
				t.Errorf("then a full claim: %q, want %q", got, want)
			}
		})
	}
}

// The point of a resume point: after many claims and completions (and no
// VACUUM, as between autovacuum runs), a claim without one steps over every
// index entry the earlier claims left dead; a resumed claim starts past
// them. Counted in buffers, not time.
func TestJobRunsClaimResumeSkipsDeadEntries(t *testing.T) {
	pool := testdb.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	exec := func(sql string) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	// 60,000 jobs, one a millisecond apart; the first 50,000 run (claimed,
	// then done), leaving their claim-index entries dead.
	exec(`insert into workq.job_runs (queue, kind, run_at)
		select 'dead', 'k', now() - interval '1 hour' + i * interval '1 millisecond' from generate_series(1, 60000) i`)
	exec(`analyze workq.job_runs`)
	exec(`update workq.job_runs set status = 1, owner_token = gen_random_uuid(), locked_until = now() + interval '1 hour'
		where queue = 'dead' and id in (select id from workq.job_runs_all where queue = 'dead' order by run_at limit 50000)`)
	exec(`update workq.job_runs set status = 2, owner_token = null, locked_until = null, finished_at = now() where queue = 'dead' and status = 1`)
	var head time.Time
	if err := pool.QueryRow(ctx, `select min(run_at) from workq.job_runs_all where queue = 'dead' and status = 0`).Scan(&head); err != nil {
		t.Fatal(err)
	}
	claimSQL, params := namedQuery(t, "job_runs", "JobRunsClaim")
	resumeAt := head.Add(-time.Second) // the runtime's margin
	prio := int16(0)
	buffers := func(resume bool) float64 {
		t.Helper()
		args := map[string]any{"queue": "dead", "max_rows": int32(100), "lease_ms": int64(30_000), "worker_id": "w",
			"owner_token": uuid.New(), "resume_priority": (*int16)(nil), "resume_run_at": (*time.Time)(nil)}
		if resume {
			args["resume_priority"], args["resume_run_at"] = &prio, &resumeAt
		}
		plan, _ := explainAnalyzeRolledBack(t, ctx, pool, "job_runs", claimSQL, argsFor(t, params, args)...)
		var read float64
		plan.walk(func(n planNode) {
			if n.Index == "job_runs_claim" {
				read += n.SharedHit + n.SharedRead
			}
		})
		return read
	}
	full, resumed := buffers(false), buffers(true)
	t.Logf("claim of 100 past 50,000 dead entries: job_runs_claim buffers %.0f without a resume point, %.0f with one", full, resumed)
	if full < 100 {
		t.Fatalf("a full claim read %.0f buffers of job_runs_claim: the fixture left no dead entries to skip", full)
	}
	if resumed > 20 {
		t.Errorf("a resumed claim read %.0f buffers of job_runs_claim (a full one %.0f); want a handful", resumed, full)
	}
}

// claimNamed claims up to max rows of queue resume and returns the claim and
// the sorted names of the rows it took.
func claimNamed(t *testing.T, ctx context.Context, e *lease.Engine, max int, resume *lease.ResumePoint, names map[int64]string) (lease.Claim, []string) {
	t.Helper()
	c, err := e.Claim(ctx, lease.ClaimParams{Queue: "resume", Max: max, Lease: time.Minute, WorkerID: "w", Resume: resume})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range c.Items {
		got = append(got, names[it.ID])
	}
	slices.Sort(got)
	return c, got
}
