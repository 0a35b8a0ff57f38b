package maintain_test

import (
	"context"
	"testing"
	"time"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/dbschema"
	"github.com/workq/workq/internal/maintain"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/migrate"
)

// The vacuum task vacuums a work table whose dead tuples pile up (at least
// VacuumMinDead, and a fifth of its live rows), and leaves alone a table
// with few dead tuples and one whose dead tuples are few next to its live
// rows; a round after the vacuum has nothing to do.
func TestVacuumTask(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%v\n%s", err, sql)
		}
	}
	// job_runs: 3 x VacuumMinDead rows claimed and ended, as a queue's
	// work leaves them (two dead versions each); timers: a few dead; the
	// outbox: VacuumMinDead dead next to six times as many live rows.
	exec(`insert into workq.job_runs (queue, kind, payload) select 'q', 'k', '{}' from generate_series(1, $1)`, 3*maintain.VacuumMinDead)
	exec(`update workq.job_runs set status = 1, owner_token = gen_random_uuid(), locked_until = now() + interval '1 minute',
		attempts = 1, claimed_at = now(), claimed_by = 'w'`)
	exec(`delete from workq.job_runs`)
	exec(`insert into workq.timers (queue, topic, payload, due_time, run_at) select 'q', 't', '{}', now(), now() from generate_series(1, 100)`)
	exec(`delete from workq.timers`)
	exec(`insert into workq.outbox (queue, topic, payload) select 'q', 't', '{}' from generate_series(1, $1)`, 7*maintain.VacuumMinDead)
	exec(`delete from workq.outbox where id % 7 = 0`)
	// The same dead job runs in another schema's job_runs, which a task on
	// the default schema leaves alone.
	other, err := dbschema.NewRewriter("wq_vac")
	if err != nil {
		t.Fatal(err)
	}
	if m, err := migrate.New(pool, migrate.Options{Schema: "wq_vac"}); err != nil {
		t.Fatal(err)
	} else if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	exec(other.Rewrite(`insert into workq.job_runs (queue, kind, payload) select 'q', 'k', '{}' from generate_series(1, $1)`), 3*maintain.VacuumMinDead)
	exec(other.Rewrite(`delete from workq.job_runs`))
	// This session's statistics reach the others once it is idle after
	// this statement.
	exec(`select pg_stat_force_next_flush()`)
	awaitDead := func(want int64) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			var dead int64
			if err := pool.QueryRow(ctx, `select n_dead_tup from pg_stat_user_tables where relid = 'workq.job_runs'::regclass`).Scan(&dead); err != nil {
				t.Fatal(err)
			}
			if dead >= want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("job_runs shows %d dead tuples after 30 s; want the %d its rows left", dead, want)
			}
		}
	}
	awaitDead(6 * maintain.VacuumMinDead)

	vacuums := func() (jobRuns, outbox, timers, otherJobRuns int64) {
		t.Helper()
		if err := pool.QueryRow(ctx, `select
			(select vacuum_count from pg_stat_user_tables where relid = 'workq.job_runs'::regclass),
			(select vacuum_count from pg_stat_user_tables where relid = 'workq.outbox'::regclass),
			(select vacuum_count from pg_stat_user_tables where relid = 'workq.timers'::regclass),
			(select vacuum_count from pg_stat_user_tables where relid = 'wq_vac.job_runs'::regclass)`).Scan(&jobRuns, &outbox, &timers, &otherJobRuns); err != nil {
			t.Fatal(err)
		}
		return
	}
	j0, o0, t0, x0 := vacuums()
	task, err := maintain.VacuumTask(pool, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := task.Run(ctx, 0); err != nil || n != 1 {
		t.Fatalf("first round: %d tables vacuumed, %v; want job_runs alone", n, err)
	}
	if j, o, tm, x := vacuums(); j != j0+1 || o != o0 || tm != t0 || x != x0 {
		t.Fatalf("vacuums: job_runs %d→%d, outbox %d→%d, timers %d→%d, wq_vac.job_runs %d→%d; want job_runs' alone", j0, j, o0, o, t0, tm, x0, x)
	}
	var dead int64
	if err := pool.QueryRow(ctx, `select n_dead_tup from pg_stat_user_tables where relid = 'workq.job_runs'::regclass`).Scan(&dead); err != nil || dead != 0 {
		t.Fatalf("job_runs' dead tuples after the vacuum: %d, %v; want 0", dead, err)
	}
	if n, err := task.Run(ctx, 0); err != nil || n != 0 {
		t.Fatalf("second round: %d tables vacuumed, %v; want none", n, err)
	}
	// The other schema's task vacuums its own job_runs.
	otherTask, err := maintain.VacuumTask(other.Wrap(pool), time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := otherTask.Run(ctx, 0); err != nil || n != 1 {
		t.Fatalf("wq_vac's round: %d tables vacuumed, %v; want its job_runs", n, err)
	}
	if j, _, _, x := vacuums(); j != j0+1 || x != x0+1 {
		t.Fatalf("after wq_vac's round: job_runs vacuumed %d times, wq_vac.job_runs %d; want 1 each", j-j0, x-x0)
	}

	// A transaction that began before the last vacuum holds the cleanup
	// horizon back: the next rounds pass over the table instead of
	// vacuuming it in vain, until it ends.
	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(ctx) }()
	if _, err := holder.Exec(ctx, `select txid_current()`); err != nil {
		t.Fatal(err)
	}
	dirty := func() {
		t.Helper()
		exec(`insert into workq.job_runs (queue, kind, payload) select 'q', 'k', '{}' from generate_series(1, $1)`, 3*maintain.VacuumMinDead)
		exec(`delete from workq.job_runs`)
		exec(`select pg_stat_force_next_flush()`)
		awaitDead(3 * maintain.VacuumMinDead)
	}
	dirty()
	if n, err := task.Run(ctx, 0); err != nil || n != 1 {
		t.Fatalf("the first round the transaction is open: %d tables vacuumed, %v; want job_runs (it began after the last vacuum)", n, err)
	}
	dirty()
	if n, err := task.Run(ctx, 0); err != nil || n != 0 {
		t.Fatalf("a round while a transaction older than the last vacuum is open: %d tables vacuumed, %v; want none", n, err)
	}
	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := task.Run(ctx, 0); err != nil || n != 1 {
		t.Fatalf("the round after the transaction ended: %d tables vacuumed, %v; want job_runs", n, err)
	}
	if _, err := maintain.VacuumTask(pool, 0, nil); err == nil {
		t.Fatal("a vacuum task with no interval was accepted")
	}
}

// The vacuum task summarizes the block ranges that done rows filled since
// the done partition's last vacuum: an unsummarized BRIN range matches
// every search, so before the round the dashboard's last-minute count
// reads every page of today's done rows, and after it a range or two.
func TestVacuumTaskSummarizesDoneRanges(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	// 200,000 done job runs that ended, in insert order, between ten and
	// two minutes ago: none in the last minute.
	if _, err := pool.Exec(ctx, `insert into workq.job_runs_done (id, queue, kind, payload, status, lease_version, attempts, max_attempts,
			claimed_at, claimed_by, created_at, updated_at, finished_at, run_at)
		select i, 'q', 'k', '{}', 2, 1, 1, 25, f, 'w', f, f, f, f
		from generate_series(1, 200000) i,
		     lateral (select now() - interval '10 minutes' + i * (interval '8 minutes' / 200000) as f) t`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `analyze workq.job_runs_done`); err != nil {
		t.Fatal(err)
	}
	// fetched is how many heap blocks of the done partitions RunsLastMinute
	// fetched (this transaction's counts), and how many they have.
	fetched := func() (blocks, pages int64) {
		t.Helper()
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		// The session's counts not yet flushed to the statistics, before
		// and after: a difference.
		count := func() (blocks, pages int64) {
			t.Helper()
			if err := tx.QueryRow(ctx, `select coalesce(sum(pg_stat_get_xact_blocks_fetched(c.oid)), 0)::bigint,
					coalesce(sum(pg_relation_size(c.oid) / current_setting('block_size')::bigint), 0)::bigint
				from pg_inherits h join pg_class c on c.oid = h.inhrelid
				where h.inhparent = 'workq.job_runs_done'::regclass and c.relkind = 'r'`).Scan(&blocks, &pages); err != nil {
				t.Fatal(err)
			}
			return blocks, pages
		}
		b0, _ := count()
		if _, err := gen.New(tx).RunsLastMinute(ctx); err != nil {
			t.Fatal(err)
		}
		b1, pages := count()
		return b1 - b0, pages
	}
	before, pages := fetched()
	if pages < 1000 || before < pages/2 {
		t.Fatalf("before the round RunsLastMinute fetched %d of the done rows' %d pages; want most of them (their ranges not summarized)", before, pages)
	}
	task, err := maintain.VacuumTask(pool, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := task.Run(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if after, _ := fetched(); after > pages/10 {
		t.Fatalf("after the round RunsLastMinute fetched %d of the done rows' %d pages (%d before); want a range or two", after, pages, before)
	} else {
		t.Logf("RunsLastMinute fetched %d of %d pages before the round, %d after", before, pages, after)
	}
}
