package admin_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
)

// fill inserts n job runs of queue q with generate_series: every item whose
// position i (1-based) is in failedAt is failed with last_error
// "smtp timeout <i>", the others done with no error. It returns the ids in
// insertion order.
func fill(t *testing.T, pool *pgxpool.Pool, q string, n int, failedAt ...int) []int64 {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `insert into workq.job_runs (queue, kind, payload, status, finished_at, last_error)
		select $1, 'k', '{}', case when i = any($3::int[]) then 3 else 2 end, now(),
		       case when i = any($3::int[]) then 'SMTP timeout ' || i end
		from generate_series(1, $2::int) i order by i returning id`, q, n, failedAt)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

func pageIDs(p admin.Page) []int64 {
	out := make([]int64, len(p.Items))
	for i, it := range p.Items {
		out[i] = it.ID
	}
	return out
}

// An error-text page reads at most TextScanWindows windows of
// TextScanWindow ids below its cursor: a match further down is reached by
// following Next, never skipped, and the search ends with Next 0.
func TestListErrorTextWindows(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	span := admin.TextScanWindow * admin.TextScanWindows
	n := span + span/2
	// Newest first: position n is the newest. One match near the top, one
	// just past the first page's windows, one at the very bottom.
	ids := fill(t, pool, "q", n, n-3, n-span-10, 1)
	_ = insert(t, pool, lease.JobRuns, "other", "k") // another queue, newer: the windows start below it

	f := admin.Filter{Queue: "q", ErrorText: "smtp TIMEOUT", Limit: 10}
	var found []int64
	pages := 0
	for {
		p, err := admin.List(ctx, pool, lease.JobRuns, f)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		found = append(found, pageIDs(p)...)
		if p.Next == 0 {
			break
		}
		if pages > 10 {
			t.Fatalf("still paging after %d pages (next %d)", pages, p.Next)
		}
		f.Before = p.Next
	}
	want := []int64{ids[n-4], ids[n-span-11], ids[0]}
	if len(found) != len(want) || found[0] != want[0] || found[1] != want[1] || found[2] != want[2] {
		t.Fatalf("found %v, want %v", found, want)
	}
	if pages < 2 {
		t.Errorf("%d pages: the first page read more than its %d ids", pages, span)
	}

	// The first page alone has only the top match, and a cursor.
	p, err := admin.List(ctx, pool, lease.JobRuns, admin.Filter{Queue: "q", ErrorText: "timeout", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != 1 || p.Items[0].ID != ids[n-4] || p.Next == 0 {
		t.Errorf("first page: %v next %d, want [%d] and a cursor", pageIDs(p), p.Next, ids[n-4])
	}

	// A text that matches nothing in a small table: an empty last page.
	p, err = admin.List(ctx, pool, lease.JobRuns, admin.Filter{Queue: "other", ErrorText: "timeout"})
	if err != nil || len(p.Items) != 0 || p.Next != 0 {
		t.Errorf("no match: %v next %d err %v", pageIDs(p), p.Next, err)
	}
}

func TestMatchingActions(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	failedAt := make([]int, 0, 2500)
	for i := 1; i <= 2500; i++ {
		failedAt = append(failedAt, i)
	}
	fill(t, pool, "bulk", 3000, failedAt...) // 2500 failed, then 500 done
	by := admin.Actor{Name: "test:ops", Reason: "bulk"}
	f := admin.Filter{Queue: "bulk", Status: "failed"}

	// A cap below the matches: it stops there, in batches of at most 1000,
	// and says where to go on.
	r, err := admin.RetryMatching(ctx, pool, lease.JobRuns, by, f, 1500)
	if err != nil {
		t.Fatal(err)
	}
	if r.Applied != 1500 || r.Skipped != 0 || r.Batches != 2 || r.Next == 0 {
		t.Fatalf("capped retry: %+v, want 1500 applied in 2 batches and a cursor", r)
	}
	f.Before = r.Next
	r, err = admin.RetryMatching(ctx, pool, lease.JobRuns, by, f, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r.Applied != 1000 || r.Next != 0 {
		t.Fatalf("rest of the retry: %+v, want 1000 applied and no cursor", r)
	}
	var ready, archived int
	if err := pool.QueryRow(ctx, `select count(*) filter (where status = 0), (select count(*) from workq.runs where outcome = 'revived' and worker_id = 'test:ops')
		from workq.job_runs_all where queue = 'bulk'`).Scan(&ready, &archived); err != nil {
		t.Fatal(err)
	}
	if ready != 2500 || archived != 2500 {
		t.Errorf("%d ready, %d revives archived; want 2500 each", ready, archived)
	}

	// Cancel every ready item, then delete what the filter matches: only
	// the finished ones go.
	r, err = admin.CancelMatching(ctx, pool, lease.JobRuns, by, admin.Filter{Queue: "bulk"}, 0)
	if err != nil || r.Applied != 2500 || r.Skipped != 500 {
		t.Fatalf("cancel matching: %+v %v, want 2500 applied, 500 skipped", r, err)
	}
	r, err = admin.DeleteMatching(ctx, pool, lease.JobRuns, admin.Filter{Queue: "bulk", ErrorText: "cancelled by test:ops"}, 0)
	if err != nil || r.Applied != 2500 {
		t.Fatalf("delete matching: %+v %v, want 2500 applied", r, err)
	}
	var left int
	if err := pool.QueryRow(ctx, `select count(*) from workq.job_runs_all where queue = 'bulk'`).Scan(&left); err != nil || left != 500 {
		t.Errorf("%d left (err %v), want the 500 done", left, err)
	}

	// Bad requests are refused before anything is read.
	for name, call := range map[string]func() error{
		"cap": func() error {
			_, err := admin.RetryMatching(ctx, pool, lease.JobRuns, by, f, admin.MaxBulk+1)
			return err
		},
		"filter": func() error {
			_, err := admin.DeleteMatching(ctx, pool, lease.JobRuns, admin.Filter{Status: "gone"}, 0)
			return err
		},
		"actor": func() error {
			_, err := admin.CancelMatching(ctx, pool, lease.JobRuns, admin.Actor{}, f, 0)
			return err
		},
		"table": func() error { _, err := admin.DeleteMatching(ctx, pool, "jobs", f, 0); return err },
		"text": func() error {
			_, err := admin.DeleteMatching(ctx, pool, lease.JobRuns, admin.Filter{ErrorText: string(make([]byte, admin.MaxErrorText+1))}, 0)
			return err
		},
	} {
		if err := call(); !errors.Is(err, admin.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

func TestDepthsAndEnded(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	for range 3 {
		insert(t, pool, lease.JobRuns, "d", "k")
	}
	f := insert(t, pool, lease.Outbox, "o", "topic")
	setStatus(t, pool, lease.Outbox, f, lease.StatusFailed)
	fill(t, pool, "d", 5) // done: not read, not counted
	before, err := admin.Clock(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := admin.Depths(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	want := []admin.Depth{{Table: lease.JobRuns, Queue: "d", Ready: 3}, {Table: lease.Outbox, Queue: "o", Failed: 1}}
	if len(ds) != 2 {
		t.Fatalf("depths %+v, want %+v", ds, want)
	}
	for i := range want {
		got := ds[i]
		got.OldestDue = 0
		if got != want[i] {
			t.Errorf("depth %d: %+v, want %+v", i, got, want[i])
		}
	}

	// Two attempts end (one done, one retried) after before.
	e := lease.New(pool, lease.JobRuns)
	c, err := e.Claim(ctx, lease.ClaimParams{Queue: "d", Max: 2, Lease: time.Minute, WorkerID: "w"})
	if err != nil || len(c.Items) != 2 {
		t.Fatalf("claim: %v %v", c, err)
	}
	if _, err := e.Complete(ctx, []lease.Completion{
		{ID: c.Items[0].ID, Token: c.Token, Outcome: lease.Done},
		{ID: c.Items[1].ID, Token: c.Token, Outcome: lease.Retry, Error: "x"},
	}); err != nil {
		t.Fatal(err)
	}
	until, err := admin.Clock(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	ended, err := admin.EndedBetween(ctx, pool, before, until)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, x := range ended {
		got[string(x.Table)+"/"+x.Queue+"/"+x.Outcome] = x.Count
	}
	if len(got) != 2 || got["job_runs/d/done"] != 1 || got["job_runs/d/retry"] != 1 {
		t.Errorf("ended %v, want one done and one retry in job_runs/d", got)
	}
	if again, err := admin.EndedBetween(ctx, pool, until, until.Add(time.Second)); err != nil || len(again) != 0 {
		t.Errorf("the next interval: %v %v, want nothing", again, err)
	}
}
