package maintain_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workq/workq/internal/jobq"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/maintain"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/testutil"
)

func TestMain(m *testing.M) { testdb.Main(m) }

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Two maintenance services: one leads; when it is cut off from the
// database the other takes over, and the fenced writes of leader-only
// tasks never go back to an older leader's token. A stop hands the
// leadership over at once.
func TestLeaderFailover(t *testing.T) {
	ctx := context.Background()
	url := testdb.URL(t)
	direct, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	if _, err := direct.Exec(ctx, `create table fenced (seq bigint generated always as identity, token bigint not null, owner text not null)`); err != nil {
		t.Fatal(err)
	}
	task := func(owner string, pool *pgxpool.Pool) maintain.Task {
		return maintain.Task{Name: "fenced", Every: 10 * time.Millisecond, Run: func(ctx context.Context, token int64) (int64, error) {
			tag, err := pool.Exec(ctx, `insert into fenced (token, owner)
				select $2, $3 where exists (select 1 from workq.workq_locks
				    where name = $1 and token = $2 and expires_at > clock_timestamp() for share)`,
				maintain.DefaultLockName, token, owner)
			return tag.RowsAffected(), err
		}}
	}
	const ttl = 3 * time.Second
	throughA, px := testutil.ProxiedPool(t, url)
	a := maintain.New(throughA, maintain.Options{Owner: "a", LockTTL: ttl, RetryInterval: 50 * time.Millisecond})
	b := maintain.New(direct, maintain.Options{Owner: "b", LockTTL: ttl, RetryInterval: 50 * time.Millisecond})
	c := maintain.New(direct, maintain.Options{Owner: "c", LockTTL: ttl, RetryInterval: 50 * time.Millisecond})
	for _, s := range []struct {
		svc   *maintain.Service
		owner string
		pool  *pgxpool.Pool
	}{{a, "a", throughA}, {b, "b", direct}, {c, "c", direct}} {
		if err := s.svc.Add(task(s.owner, s.pool)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer a.Stop(ctx)
	eventually(t, ttl, "a leads", func() bool { _, ok := a.Leader(); return ok })
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer b.Stop(ctx)
	eventually(t, ttl, "a writes fenced rows", func() bool { return a.Stats()[0].Rows > 3 })
	if _, ok := b.Leader(); ok {
		t.Fatal("b leads while a holds the lock")
	}

	px.Cut() // a can no longer reach the database: as good as dead
	cut := time.Now()
	eventually(t, 2*ttl, "b takes over after a is cut off", func() bool { _, ok := b.Leader(); return ok })
	t.Logf("b took over %s after a was cut off (lock TTL %s)", time.Since(cut).Round(time.Millisecond), ttl)
	eventually(t, ttl, "a notices it lost the leadership", func() bool { _, ok := a.Leader(); return !ok })
	eventually(t, ttl, "b writes fenced rows", func() bool { return b.Stats()[0].Rows > 3 })

	// A stopping leader releases at once: c takes over well within the TTL.
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(ctx)
	if err := b.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, ttl/2, "c takes over when b stops", func() bool { _, ok := c.Leader(); return ok })
	eventually(t, ttl, "c writes fenced rows", func() bool { return c.Stats()[0].Rows > 3 })

	t.Logf("c leads %s after the cut", time.Since(cut).Round(time.Millisecond))
	rows, err := direct.Query(ctx, `select token, owner from fenced order by seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var last int64
	owners := map[string]int64{}
	for rows.Next() {
		var tok int64
		var owner string
		if err := rows.Scan(&tok, &owner); err != nil {
			t.Fatal(err)
		}
		if tok < last {
			t.Fatalf("a fenced write under token %d (%s) after one under token %d", tok, owner, last)
		}
		if prev, ok := owners[owner]; ok && prev != tok {
			t.Fatalf("%s wrote under tokens %d and %d", owner, prev, tok)
		}
		owners[owner], last = tok, tok
	}
	if len(owners) != 3 {
		t.Fatalf("fenced writes by %v; want a, b and c", owners)
	}
}

// One failing task is counted and logged; the other tasks go on.
func TestFailingTaskIsolated(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	s := maintain.New(pool, maintain.Options{LockTTL: 2 * time.Second})
	var good atomic.Int64
	if err := s.Add(maintain.Task{Name: "broken", Every: 10 * time.Millisecond, Run: func(context.Context, int64) (int64, error) {
		return 0, errors.New("boom")
	}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(maintain.Task{Name: "good", Every: 10 * time.Millisecond, Run: func(context.Context, int64) (int64, error) {
		return good.Add(1), nil
	}}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []maintain.Task{
		{Name: "", Every: time.Second, Run: func(context.Context, int64) (int64, error) { return 0, nil }},
		{Name: "fast", Every: time.Millisecond, Run: func(context.Context, int64) (int64, error) { return 0, nil }},
		{Name: "nil", Every: time.Second},
		{Name: "good", Every: time.Second, Run: func(context.Context, int64) (int64, error) { return 0, nil }},
	} {
		if err := s.Add(bad); !errors.Is(err, maintain.ErrInvalid) {
			t.Errorf("Add(%q every %s): %v; want ErrInvalid", bad.Name, bad.Every, err)
		}
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(ctx)
	eventually(t, 5*time.Second, "both tasks run rounds", func() bool {
		st := s.Stats()
		return st[0].Errors >= 3 && st[1].Rounds >= 3
	})
	st := s.Stats()
	if st[0].LastError != "boom" || st[1].Errors != 0 || st[1].Rows == 0 {
		t.Fatalf("stats %+v; want broken failing with boom and good working", st)
	}
}

// Retention deletes finished items and archived runs older than their ages,
// in batches, and keeps everything younger and everything unfinished. Done
// job runs are in job_runs_done, partitioned by day: a day whose partition
// exists goes whole, and rows of the DEFAULT partition (days no partition
// covers: a new database has partitions from its migration's day on) go in
// batches; failed runs stay in job_runs and go in batches. The old runs
// here ended three days ago, in the archive's DEFAULT partition; dropping
// the archive's day partitions is TestRetentionRunPartitions.
func TestRetention(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	c := jobq.New(jobq.Options{})
	jobs := make([]jobq.Job, 25)
	for i := range jobs {
		jobs[i] = jobq.Job{Queue: "ret", Kind: "k"}
	}
	if _, err := c.EnqueueMany(ctx, pool, jobs); err != nil {
		t.Fatal(err)
	}
	eng := lease.New(pool, lease.JobRuns)
	cl, err := eng.Claim(ctx, lease.ClaimParams{Queue: "ret", Max: 20, Lease: time.Minute, WorkerID: "w"})
	if err != nil || len(cl.Items) != 20 {
		t.Fatalf("claim: %d, %v", len(cl.Items), err)
	}
	var cs []lease.Completion
	for i, it := range cl.Items {
		o := lease.Done
		if i >= 12 {
			o = lease.Failed
		}
		cs = append(cs, lease.Completion{ID: it.ID, Token: cl.Token, Outcome: o})
	}
	if _, err := eng.Complete(ctx, cs); err != nil {
		t.Fatal(err)
	}
	// 5 of the 8 failed ended an hour ago; of the 12 done, 5 ended five
	// days ago, in a day partition of their own, and 4 three days ago, in
	// the DEFAULT partition; the failed ones' runs three days ago. The rest
	// just now.
	for _, sql := range []string{
		`select workq.workq_day_partitions_add('job_runs_done', now() - interval '5 days', 0, null)`,
		`update workq.job_runs set finished_at = now() - interval '1 hour' where id in (select id from workq.job_runs where status = 3 order by id limit 5)`,
		`update workq.job_runs_done set finished_at = now() - interval '5 days' where id in (select id from workq.job_runs_done order by id limit 5)`,
		`update workq.job_runs_done set finished_at = now() - interval '3 days' where id in (select id from workq.job_runs_done where finished_at > now() - interval '1 day' order by id limit 4)`,
		`update workq.runs set finished_at = now() - interval '3 days' where item_id in (select id from workq.job_runs_all where finished_at < now() - interval '30 minutes')`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	task, err := maintain.RetentionTask(pool, time.Second, maintain.Retention{Finished: 30 * time.Minute, Runs: 2 * 24 * time.Hour, Batch: 4})
	if err != nil {
		t.Fatal(err)
	}
	n, err := task.Run(ctx, 0)
	// 5 failed items, 4 done ones and the 5 runs of the failed ones deleted,
	// counted exactly (a done row that moved is its own last attempt: no
	// run), and a dropped partition counted by its estimate (0 before an
	// ANALYZE).
	if err != nil || n < 14 {
		t.Fatalf("retention round deleted %d rows (%v); want 5 + 4 items + 5 runs and a dropped partition", n, err)
	}
	var items, ready, done, runs, parts int
	if err := pool.QueryRow(ctx, `select count(*), count(*) filter (where status = 0) from workq.job_runs`).Scan(&items, &ready); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `select (select count(*) from workq.job_runs_done), (select count(*) from workq.runs),
		(select count(*) from workq.workq_day_partitions('job_runs_done') p where p.upper_bound < now() - interval '1 day')`).Scan(&done, &runs, &parts); err != nil {
		t.Fatal(err)
	}
	if items != 8 || ready != 5 || done != 3 || runs != 3 || parts != 0 {
		t.Fatalf("after retention: %d items (%d ready), %d done, %d runs, %d old done partitions; want 8 (5 ready), 3, 3, 0",
			items, ready, done, runs, parts)
	}
	if _, err := maintain.RetentionTask(pool, time.Second, maintain.Retention{Finished: -time.Second}); !errors.Is(err, maintain.ErrInvalid) {
		t.Fatalf("negative age: %v; want ErrInvalid", err)
	}
}

// The stuck task counts and logs items in progress for more than twice the
// lease, per table and queue, and leaves them alone.
func TestStuckTask(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	if _, err := jobq.New(jobq.Options{}).EnqueueMany(ctx, pool, []jobq.Job{{Queue: "st", Kind: "k"}, {Queue: "st", Kind: "k"}}); err != nil {
		t.Fatal(err)
	}
	c, err := lease.New(pool, lease.JobRuns).Claim(ctx, lease.ClaimParams{Queue: "st", Max: 2, Lease: time.Hour, WorkerID: "hung"})
	if err != nil || len(c.Items) != 2 {
		t.Fatalf("claim: %d, %v", len(c.Items), err)
	}
	// One was claimed an hour ago and is still heartbeated (its lease runs).
	if _, err := pool.Exec(ctx, `update workq.job_runs set claimed_at = now() - interval '1 hour' where id = $1`, c.Items[0].ID); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	task, err := maintain.StuckTask(pool, time.Minute, 30*time.Second, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	n, err := task.Run(ctx, 0)
	if err != nil || n != 1 {
		t.Fatalf("stuck round: %d (%v); want the one item claimed an hour ago", n, err)
	}
	if !strings.Contains(logs.String(), "a worker may be stuck") || !strings.Contains(logs.String(), "queue=st") || !strings.Contains(logs.String(), "table=job_runs") {
		t.Fatalf("log %q lacks the stuck warning for job_runs/st", logs.String())
	}
	var inProgress int
	if err := pool.QueryRow(ctx, `select count(*) from workq.job_runs where status = 1`).Scan(&inProgress); err != nil || inProgress != 2 {
		t.Fatalf("%d in progress after the round (%v); the task must change nothing", inProgress, err)
	}
	if _, err := maintain.StuckTask(pool, time.Minute, 0, nil); !errors.Is(err, maintain.ErrInvalid) {
		t.Fatalf("zero lease: %v; want ErrInvalid", err)
	}
}
