package migrate_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/dbschema"
	"github.com/workq/workq/migrate"
	"github.com/workq/workq/workqtype"
)

// runsDigest sums up the run archive: its rows and a digest of every
// column of every row, in run id order.
func runsDigest(t *testing.T, db workqtype.DB) string {
	t.Helper()
	var n int
	var digest string
	if err := db.QueryRow(context.Background(), `select count(*), coalesce(md5(string_agg(r::text, '|' order by r.run_id)), '')
		from workq.runs r`).Scan(&n, &digest); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d rows, %s", n, digest)
}

func relkind(t *testing.T, db workqtype.DB) string {
	t.Helper()
	var k string
	if err := db.QueryRow(context.Background(), `select relkind::text from pg_class where oid = 'workq.runs'::regclass`).Scan(&k); err != nil {
		t.Fatal(err)
	}
	return k
}

// keyOf returns the columns of a table's primary key.
func keyOf(t *testing.T, db workqtype.DB, table string) string {
	t.Helper()
	var def string
	if err := db.QueryRow(context.Background(), `select pg_get_constraintdef(oid) from pg_constraint
		where conrelid = ('workq.' || $1)::regclass and contype = 'p'`, table).Scan(&def); err != nil {
		t.Fatalf("primary key of %s: %v", table, err)
	}
	return def
}

// The upgrade to the partitioned run archive (migrations 00019 and 00020)
// keeps every archived run, on a pool and in a caller's transaction, in the
// default schema and in another: the archive becomes the partition
// runs_legacy up to the end of the migration's day or the next one, with
// the DEFAULT partition and day partitions after it; reads and new runs
// work; down to 18 brings the plain table back with every row (those
// written since included) and its (run_id) key; up again converts it again.
func TestRunsPartitionUpgradeKeepsRuns(t *testing.T) {
	for _, c := range []struct {
		name, schema string
		tx           bool
	}{
		{"pool", "workq", false},
		{"pool, another schema", "app_runs", false},
		{"caller's transaction, another schema", "tx_runs", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			pool, _ := emptyDB(t)
			r, err := dbschema.NewRewriter(c.schema)
			if err != nil {
				t.Fatal(err)
			}
			db := r.Wrap(pool)
			m, err := migrate.New(pool, migrate.Options{Schema: c.schema})
			if err != nil {
				t.Fatal(err)
			}
			if v, err := m.UpTo(ctx, 18); err != nil || v != 18 {
				t.Fatalf("UpTo(18) = %d, %v", v, err)
			}
			up := func() {
				t.Helper()
				if !c.tx {
					if v, err := m.Up(ctx); err != nil || v != migrate.Latest() {
						t.Fatalf("Up = %d, %v", v, err)
					}
					return
				}
				tx, err := pool.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback(ctx)
				mt, err := migrate.New(tx, migrate.Options{Schema: c.schema})
				if err != nil {
					t.Fatal(err)
				}
				if v, err := mt.Up(ctx); err != nil || v != migrate.Latest() {
					t.Fatalf("Up in a transaction = %d, %v", v, err)
				}
				if err := tx.Commit(ctx); err != nil {
					t.Fatal(err)
				}
			}

			// An archive of three days, every outcome, and runs of now.
			if _, err := db.Exec(ctx, `insert into workq.runs (run_id, work_table, item_id, queue, attempt, lease_version,
					owner_token, worker_id, started_at, finished_at, outcome, error)
				select workq.workq_run_id(tb, i, v), tb, i, 'q', v, v, gen_random_uuid(), 'w-' || i % 7,
				       now() - interval '3 days' + i * interval '1 minute', now() - interval '3 days' + i * interval '1 minute' + interval '2 seconds',
				       (array['done', 'retry', 'failed', 'released', 'snoozed', 'expired', 'revived', 'cancelled'])[1 + (i + v) % 8],
				       case when i % 3 = 0 then 'error ' || i end
				from generate_series(1, 4320) i, generate_series(1, 2) v, unnest(array['job_runs', 'timers']) tb`); err != nil {
				t.Fatal(err)
			}
			before := runsDigest(t, db)

			up()
			if k := relkind(t, db); k != "p" {
				t.Fatalf("runs has relkind %q after the upgrade, want p (partitioned)", k)
			}
			if got := runsDigest(t, db); got != before {
				t.Fatalf("after the upgrade the archive is %s; was %s", got, before)
			}
			var parts []struct {
				name, lower, upper string
				isDefault          bool
			}
			rows, err := db.Query(ctx, `select partition_name, coalesce(lower_bound::text, ''), coalesce(upper_bound::text, ''), is_default
				from workq.workq_runs_partition_list()`)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var p struct {
					name, lower, upper string
					isDefault          bool
				}
				if err := rows.Scan(&p.name, &p.lower, &p.upper, &p.isDefault); err != nil {
					t.Fatal(err)
				}
				parts = append(parts, p)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			tomorrow := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, 1)
			var legacyEnd time.Time
			if len(parts) < 3 || parts[0].name != "runs_legacy" || parts[0].lower != "-infinity" {
				t.Fatalf("partitions %+v; want runs_legacy from -infinity first", parts)
			}
			if err := db.QueryRow(ctx, `select upper_bound from workq.workq_runs_partition_list() where partition_name = 'runs_legacy'`).Scan(&legacyEnd); err != nil {
				t.Fatal(err)
			}
			if legacyEnd.Before(tomorrow) || legacyEnd.After(tomorrow.AddDate(0, 0, 1)) || !legacyEnd.Equal(legacyEnd.Truncate(24*time.Hour)) {
				t.Errorf("runs_legacy ends at %s; want the end of today or of tomorrow (UTC)", legacyEnd)
			}
			if last := parts[len(parts)-1]; last.name != "runs_default" || !last.isDefault {
				t.Errorf("the last partition is %+v; want runs_default", last)
			}
			if want := "runs_p" + legacyEnd.Format("20060102"); parts[1].name != want {
				t.Errorf("the first day partition is %s; want %s, from the end of runs_legacy", parts[1].name, want)
			}
			if k := keyOf(t, db, "runs"); k != "PRIMARY KEY (run_id, finished_at)" {
				t.Errorf("runs' key is %s", k)
			}
			if k := keyOf(t, db, "runs_legacy"); k != "PRIMARY KEY (run_id, finished_at)" {
				t.Errorf("runs_legacy's key is %s", k)
			}
			var check int
			if err := db.QueryRow(ctx, `select count(*) from pg_constraint where conrelid = 'workq.runs_legacy'::regclass and conname = 'runs_legacy_range'`).Scan(&check); err != nil || check != 0 {
				t.Errorf("runs_legacy keeps its migration CHECK (%d, %v)", check, err)
			}

			// Reads by run id and by item, and new runs of now (in
			// runs_legacy, whose range holds today) and of the first day
			// partition's day.
			got, err := gen.New(db).RunsListByItem(ctx, "timers", 77)
			if err != nil || len(got) != 2 || got[0].LeaseVersion != 1 || got[1].LeaseVersion != 2 {
				t.Fatalf("RunsListByItem(timers, 77) = %+v, %v", got, err)
			}
			one, err := gen.New(db).RunsGet(ctx, got[1].RunID)
			if err != nil || one.ItemID != 77 {
				t.Fatalf("RunsGet = %+v, %v", one, err)
			}
			if _, err := db.Exec(ctx, `insert into workq.runs (run_id, work_table, item_id, queue, attempt, lease_version,
					owner_token, worker_id, started_at, finished_at, outcome)
				values (workq.workq_run_id('job_runs', 9001, 1), 'job_runs', 9001, 'q', 1, 1, gen_random_uuid(), 'w', now(), now(), 'done'),
				       (workq.workq_run_id('job_runs', 9002, 1), 'job_runs', 9002, 'q', 1, 1, gen_random_uuid(), 'w', $1, $1, 'done')`,
				legacyEnd.Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			var where []string
			rows, err = db.Query(ctx, `select tableoid::regclass::text from workq.runs where item_id in (9001, 9002) and work_table = 'job_runs' order by item_id`)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var s string
				if err := rows.Scan(&s); err != nil {
					t.Fatal(err)
				}
				where = append(where, s)
			}
			if want := fmt.Sprintf("[%[1]s.runs_legacy %[1]s.%[2]s]", c.schema, parts[1].name); fmt.Sprint(where) != want {
				t.Errorf("new runs went to %v; want %s", where, want)
			}
			after := runsDigest(t, db)

			// Down to 18: the plain table, every row, the (run_id) key.
			if v, err := m.DownTo(ctx, 18); err != nil || v != 18 {
				t.Fatalf("DownTo(18) = %d, %v", v, err)
			}
			if k := relkind(t, db); k != "r" {
				t.Fatalf("runs has relkind %q after the migration down, want r", k)
			}
			if got := runsDigest(t, db); got != after {
				t.Fatalf("after the migration down the archive is %s; was %s", got, after)
			}
			if k := keyOf(t, db, "runs"); k != "PRIMARY KEY (run_id)" {
				t.Errorf("runs' key after the migration down is %s", k)
			}
			var fns int
			if err := db.QueryRow(ctx, `select count(*) from pg_proc where pronamespace = $1::regnamespace and proname like 'workq_runs_%'`, c.schema).Scan(&fns); err != nil || fns != 0 {
				t.Errorf("%d partition functions left after the migration down (%v)", fns, err)
			}

			// And up again.
			up()
			if k := relkind(t, db); k != "p" {
				t.Fatalf("runs has relkind %q after the second upgrade", k)
			}
			if got := runsDigest(t, db); got != after {
				t.Fatalf("after the second upgrade the archive is %s; was %s", got, after)
			}
		})
	}
}

// A new installation has no legacy partition: day partitions from the
// migration's day (UTC) to three days on, and the DEFAULT partition.
func TestRunsPartitionNewInstall(t *testing.T) {
	ctx := context.Background()
	pool, _ := emptyDB(t)
	m, err := migrate.New(pool, migrate.Options{Schema: "fresh_runs"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	r, _ := dbschema.NewRewriter("fresh_runs")
	rows, err := r.Wrap(pool).Query(ctx, `select partition_name from workq.workq_runs_partition_list()`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		got = append(got, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	today := time.Now().UTC()
	var want []string
	for d := range 4 {
		want = append(want, "runs_p"+today.AddDate(0, 0, d).Format("20060102"))
	}
	want = append(want, "runs_default")
	// The test may straddle midnight UTC: then the migration's day was
	// yesterday.
	if fmt.Sprint(got) != fmt.Sprint(want) && got[0] != "runs_p"+today.AddDate(0, 0, -1).Format("20060102") {
		t.Errorf("partitions of a new install %v; want %v", got, want)
	}
}
