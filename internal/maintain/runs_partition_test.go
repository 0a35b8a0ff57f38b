package maintain_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/dbschema"
	"github.com/workq/workq/internal/maintain"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/migrate"
	"github.com/workq/workq/workqtype"
)

// runsPartition is one row of workq_runs_partition_list.
type runsPartition struct {
	name      string
	lower     pgtime
	upper     pgtime
	isDefault bool
}

// pgtime is a bound as text (UTC, ISO): infinite bounds and the DEFAULT
// partition's nulls read as text without special cases.
type pgtime = string

func runsPartitions(t *testing.T, db workqtype.DB) []runsPartition {
	t.Helper()
	rows, err := db.Query(context.Background(), `select partition_name,
			coalesce(to_char(lower_bound at time zone 'UTC', 'YYYY-MM-DD HH24:MI'), lower_bound::text, ''),
			coalesce(to_char(upper_bound at time zone 'UTC', 'YYYY-MM-DD HH24:MI'), upper_bound::text, ''), is_default
		from workq.workq_runs_partition_list()`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (runsPartition, error) {
		var p runsPartition
		err := r.Scan(&p.name, &p.lower, &p.upper, &p.isDefault)
		return p, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// day returns the UTC day d days from today as 'YYYY-MM-DD 00:00'.
func day(d int) string {
	return time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, d).Format("2006-01-02 15:04")
}

func partitionName(d int) string {
	return "runs_p" + time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, d).Format("20060102")
}

// insertRuns archives n attempts of distinct items (from first on) that
// ended at the SQL expression at.
func insertRuns(t *testing.T, db workqtype.DB, first, n int, at string) {
	t.Helper()
	if _, err := db.Exec(context.Background(), fmt.Sprintf(`insert into workq.runs
			(run_id, work_table, item_id, queue, attempt, lease_version, owner_token, worker_id, started_at, finished_at, outcome)
		select workq.workq_run_id('job_runs', i, 1), 'job_runs', i, 'q', 1, 1, gen_random_uuid(), 'w', %[1]s, %[1]s, 'done'
		from generate_series($1::bigint, $1::bigint + $2 - 1) i`, at), first, n); err != nil {
		t.Fatal(err)
	}
}

// The retention task on a partitioned archive, in the default schema and
// in another: it makes the partitions of today and the next RunsDaysAhead
// days, moves the rows the DEFAULT partition took into a partition of
// their own day, drops every partition whose whole day is older than the
// age (the archive's youngest droppable day included, its next one not),
// deletes the DEFAULT partition's old rows in batches, and keeps
// everything else.
func TestRetentionRunPartitions(t *testing.T) {
	for _, schema := range []string{"workq", "ret_other"} {
		t.Run(schema, func(t *testing.T) {
			ctx := context.Background()
			pool := testdb.Pool(t)
			var db workqtype.DB = pool
			if schema != "workq" {
				m, err := migrate.New(pool, migrate.Options{Schema: schema})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := m.Up(ctx); err != nil {
					t.Fatal(err)
				}
				r, err := dbschema.NewRewriter(schema)
				if err != nil {
					t.Fatal(err)
				}
				db = r.Wrap(pool)
			}
			// As if the archive had been partitioned for ten days: a
			// partition per day, one run at noon of each.
			if _, err := db.Exec(ctx, `select workq.workq_runs_add_partitions(now() - interval '10 days', 10, null)`); err != nil {
				t.Fatal(err)
			}
			for d := -10; d <= 0; d++ {
				insertRuns(t, db, 1000+d, 1, fmt.Sprintf("timestamptz '%s+00' + interval '12 hours'", day(d)))
			}
			// The DEFAULT partition: 5 runs of a day long gone (no
			// partition covers it), 2 of a day ten days ahead.
			insertRuns(t, db, 2000, 5, fmt.Sprintf("timestamptz '%s+00' + interval '1 hour'", day(-30)))
			insertRuns(t, db, 3000, 2, fmt.Sprintf("timestamptz '%s+00' + interval '1 hour'", day(10)))
			var inDefault int
			if err := db.QueryRow(ctx, `select count(*) from workq.runs_default`).Scan(&inDefault); err != nil || inDefault != 7 {
				t.Fatalf("%d rows in the DEFAULT partition (%v), want 7", inDefault, err)
			}

			task, err := maintain.RetentionTask(db, time.Second, maintain.Retention{Runs: 7 * 24 * time.Hour, Batch: 2})
			if err != nil {
				t.Fatal(err)
			}
			n, err := task.Run(ctx, 0)
			if err != nil || n < 5 {
				t.Fatalf("retention round: %d rows, %v; want at least the DEFAULT partition's 5 old runs", n, err)
			}

			// Days -10 to -8 ended more than 7 days ago: dropped. Day -7
			// ends 6 days ago from its midnight: kept.
			parts := runsPartitions(t, db)
			names := map[string]runsPartition{}
			for _, p := range parts {
				names[p.name] = p
				if !p.isDefault && p.upper <= day(-7) {
					t.Errorf("partition %s (to %s) outlived the retention of 7 days", p.name, p.upper)
				}
			}
			for d := -7; d <= maintain.RunsDaysAhead; d++ {
				p, ok := names[partitionName(d)]
				if !ok || p.lower != day(d) || p.upper != day(d+1) {
					t.Errorf("day %d: partition %+v, found %v; want %s from %s to %s", d, p, ok, partitionName(d), day(d), day(d+1))
				}
			}
			if p, ok := names[partitionName(10)]; !ok || p.lower != day(10) {
				t.Errorf("no partition for the DEFAULT partition's rows of day 10: %+v", parts)
			}
			if last := parts[len(parts)-1]; !last.isDefault || last.name != "runs_default" {
				t.Errorf("the DEFAULT partition is %+v, want runs_default, listed last", last)
			}

			// The runs: days -7 to 0 and the two ahead, each in its day's
			// partition; the DEFAULT partition empty.
			rows, err := db.Query(ctx, `select tableoid::regclass::text, count(*) from workq.runs group by 1 order by 1`)
			if err != nil {
				t.Fatal(err)
			}
			got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
				var part string
				var c int
				err := r.Scan(&part, &c)
				return fmt.Sprintf("%s:%d", part[strings.LastIndex(part, ".")+1:], c), err
			})
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for d := -7; d <= 0; d++ {
				want = append(want, partitionName(d)+":1")
			}
			want = append(want, partitionName(10)+":2")
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("runs by partition %v; want %v", got, want)
			}

			// Nothing left to do: a second round changes nothing.
			if n, err := task.Run(ctx, 0); err != nil || n != 0 {
				t.Errorf("second round: %d rows, %v; want 0, nil", n, err)
			}
			if again := runsPartitions(t, db); fmt.Sprint(again) != fmt.Sprint(parts) {
				t.Errorf("second round changed the partitions:\n%v\nwas\n%v", again, parts)
			}
		})
	}
}

// With no age the archive is kept whole, and its partitions are still made
// ahead (a default Client keeps runs 7 days; RetainRuns < 0 keeps them).
func TestRetentionRunPartitionsKeepForever(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	if _, err := pool.Exec(ctx, `select workq.workq_runs_add_partitions(now() - interval '10 days', 0, null)`); err != nil {
		t.Fatal(err)
	}
	insertRuns(t, pool, 1, 3, fmt.Sprintf("timestamptz '%s+00'", day(-10)))
	task, err := maintain.RetentionTask(pool, time.Second, maintain.Retention{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := task.Run(ctx, 0); err != nil {
		t.Fatal(err)
	}
	var runs int
	if err := pool.QueryRow(ctx, `select count(*) from workq.runs`).Scan(&runs); err != nil || runs != 3 {
		t.Fatalf("%d runs (%v), want the 3 kept", runs, err)
	}
	names := map[string]bool{}
	for _, p := range runsPartitions(t, pool) {
		names[p.name] = true
	}
	for d := 0; d <= maintain.RunsDaysAhead; d++ {
		if !names[partitionName(d)] {
			t.Errorf("no partition for day %d: %v", d, names)
		}
	}
}

// A drop that has to wait for a transaction holding the archive (here one
// that archived an attempt and stays open) gives up after the functions'
// lock_timeout, so completions queued behind it wait at most that long; the
// next round drops the partition.
func TestRetentionRunPartitionDropWaitsAtMostLockTimeout(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	if _, err := pool.Exec(ctx, `select workq.workq_runs_add_partitions(now() - interval '10 days', 0, null)`); err != nil {
		t.Fatal(err)
	}
	insertRuns(t, pool, 1, 1, fmt.Sprintf("timestamptz '%s+00'", day(-10)))
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	insertRuns(t, tx, 100, 1, "now()")
	task, err := maintain.RetentionTask(pool, time.Second, maintain.Retention{Runs: 7 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = task.Run(ctx, 0)
	if took := time.Since(start); err == nil || !strings.Contains(err.Error(), "lock timeout") || took > 5*time.Second {
		t.Fatalf("round with the archive held: %v after %s; want a lock timeout within about 1s", err, took)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := task.Run(ctx, 0); err != nil {
		t.Fatal(err)
	}
	for _, p := range runsPartitions(t, pool) {
		if p.name == partitionName(-10) {
			t.Fatalf("partition %s not dropped once the transaction ended", p.name)
		}
	}
}

// Two processes making the same partitions at once (two leaders for a
// moment, or a migration and the retention task) take turns on the
// function's lock on runs: both succeed, and each partition is made once.
func TestRunsAddPartitionsConcurrently(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	insertRuns(t, pool, 1, 4, fmt.Sprintf("timestamptz '%s+00' + interval '1 hour'", day(45)))
	const callers = 4
	made := make(chan int, callers)
	errs := make(chan error, callers)
	for range callers {
		go func() {
			var n int
			err := pool.QueryRow(ctx, `select workq.workq_runs_add_partitions(now() + interval '40 days', 6, null)`).Scan(&n)
			made <- n
			errs <- err
		}()
	}
	total := 0
	for range callers {
		total += <-made
		if err := <-errs; err != nil {
			t.Fatalf("concurrent add: %v", err)
		}
	}
	if total != 7 {
		t.Errorf("the callers made %d partitions in all; want the 7 days from day 40 to 46 once", total)
	}
	var where string
	if err := pool.QueryRow(ctx, `select string_agg(distinct tableoid::regclass::text, ',') from workq.runs`).Scan(&where); err != nil {
		t.Fatal(err)
	}
	if want := "workq." + partitionName(45); where != want {
		t.Errorf("the DEFAULT partition's runs of day 45 are in %s; want %s", where, want)
	}
}
