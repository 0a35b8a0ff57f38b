package migrate_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/db"
	"github.com/workq/workq/internal/dbschema"
	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/migrate"
	"github.com/workq/workq/workqtype"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// emptyDB returns a pool and URL on a new database with nothing of workq in
// it (testdb's databases come migrated: the workq schema is dropped).
func emptyDB(t *testing.T) (*pgxpool.Pool, string) {
	t.Helper()
	url := testdb.URL(t)
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(context.Background(), `drop schema workq cascade`); err != nil {
		t.Fatal(err)
	}
	return pool, url
}

// objects lists the relations, functions and types (not the automatic
// array and row types) in schema, sorted.
func objects(t *testing.T, q migrate.DB, schema string) []string {
	t.Helper()
	rows, err := q.Query(context.Background(), `
		select 'rel ' || relname from pg_class where relnamespace::regnamespace::text = $1
		union all select 'fn ' || proname from pg_proc where pronamespace::regnamespace::text = $1
		union all select 'type ' || typname from pg_type t where typnamespace::regnamespace::text = $1
			and typtype = 'd'
		order by 1`, schema)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestUpDownOnPoolInAnotherSchema(t *testing.T) {
	ctx := context.Background()
	pool, _ := emptyDB(t)
	m, err := migrate.New(pool, migrate.Options{Schema: "app_jobs"})
	if err != nil {
		t.Fatal(err)
	}
	v, err := m.Up(ctx)
	if err != nil || v != migrate.Latest() {
		t.Fatalf("Up = %d, %v; want %d", v, err, migrate.Latest())
	}
	if got := objects(t, pool, "public"); len(got) != 0 {
		t.Fatalf("objects in public: %v", got)
	}
	if got := objects(t, pool, "workq"); len(got) != 0 {
		t.Fatalf("objects in workq: %v", got)
	}
	all := objects(t, pool, "app_jobs")
	for _, want := range []string{"rel job_runs", "rel outbox", "rel inbox", "rel timers", "rel schedules", "rel runs",
		"rel workq_migrations", "fn workq_run_id", "fn workq_lock_joins", "fn outbox_key_seq", "type workq_name"} {
		if !contains(all, want) {
			t.Errorf("app_jobs lacks %s", want)
		}
	}
	if v, err := m.Up(ctx); err != nil || v != migrate.Latest() {
		t.Fatalf("second Up = %d, %v", v, err)
	}
	st, err := m.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if !s.Applied {
			t.Errorf("migration %d not applied", s.Version)
		}
	}
	// CheckSchema through the schema's rewriter.
	r, _ := dbschema.NewRewriter("app_jobs")
	if err := db.CheckSchema(ctx, r.Wrap(pool)); err != nil {
		t.Fatal(err)
	}
	if err := db.CheckSchema(ctx, pool); !errors.Is(err, db.ErrSchemaBehind) {
		t.Fatalf("CheckSchema of the empty default schema = %v", err)
	}

	if v, err := m.DownTo(ctx, 0); err != nil || v != 0 {
		t.Fatalf("DownTo(0) = %d, %v", v, err)
	}
	if got := objects(t, pool, "app_jobs"); len(got) != 3 { // the version table, its key and its sequence
		t.Fatalf("after DownTo(0): %v", got)
	}
	if v, err := m.Up(ctx); err != nil || v != migrate.Latest() {
		t.Fatalf("Up after down = %d, %v", v, err)
	}
}

func contains(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

func TestUpInCallersTransaction(t *testing.T) {
	ctx := context.Background()
	pool, _ := emptyDB(t)
	for _, commit := range []bool{false, true} {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `create table app_orders (id int)`); err != nil {
			t.Fatal(err)
		}
		m, err := migrate.New(tx, migrate.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if v, err := m.Up(ctx); err != nil || v != migrate.Latest() {
			t.Fatalf("Up in tx = %d, %v", v, err)
		}
		if commit {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		var have bool
		if err := pool.QueryRow(ctx, `select to_regclass('workq.job_runs') is not null and to_regclass('app_orders') is not null`).Scan(&have); err != nil {
			t.Fatal(err)
		}
		if have != commit {
			t.Fatalf("commit %v: workq and the app's table there: %v", commit, have)
		}
		if !commit {
			var schemas int
			if err := pool.QueryRow(ctx, `select count(*) from pg_namespace where nspname = 'workq'`).Scan(&schemas); err != nil || schemas != 0 {
				t.Fatalf("rolled back: workq schema count %d, %v", schemas, err)
			}
		}
	}
	if err := db.CheckSchema(ctx, pool); err != nil {
		t.Fatal(err)
	}
}

func TestPrintedSQLAppliesWithPsql(t *testing.T) {
	if _, err := exec.LookPath("psql"); err != nil {
		t.Fatal("psql is needed (Debian: apt-get install postgresql-client)")
	}
	ctx := context.Background()
	pool, url := emptyDB(t)
	m, err := migrate.New(pool, migrate.Options{Schema: "printed"})
	if err != nil {
		t.Fatal(err)
	}
	psql := func(script string) {
		t.Helper()
		f := filepath.Join(t.TempDir(), "m.sql")
		if err := os.WriteFile(f, []byte(script), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-f", f).CombinedOutput()
		if err != nil {
			t.Fatalf("psql: %v\n%s", err, out)
		}
	}
	up, err := m.SQL(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(up, "workq.") {
		t.Fatal("the script for schema printed names workq.")
	}
	psql(up)
	if v, err := m.Version(ctx); err != nil || v != migrate.Latest() {
		t.Fatalf("version after the script = %d, %v", v, err)
	}
	// The Go migrator agrees that nothing is left to do.
	if v, err := m.Up(ctx); err != nil || v != migrate.Latest() {
		t.Fatalf("Up after the script = %d, %v", v, err)
	}
	down, err := m.SQL(migrate.Latest(), 0)
	if err != nil {
		t.Fatal(err)
	}
	psql(down)
	if v, err := m.Version(ctx); err != nil || v != 0 {
		t.Fatalf("version after the down script = %d, %v", v, err)
	}
	if _, err := m.SQL(0, migrate.Latest()+1); err == nil {
		t.Fatal("SQL past the latest version: no error")
	}
}

// An application on goose, with its own goose_db_version rows and its own
// schedules and runs tables in public: workq migrates beside it and leaves
// them alone.
func TestBesideAGooseApplication(t *testing.T) {
	ctx := context.Background()
	pool, _ := emptyDB(t)
	if _, err := pool.Exec(ctx, `
		create table goose_db_version (id integer primary key generated by default as identity,
			version_id bigint not null, is_applied boolean not null, tstamp timestamp not null default now());
		insert into goose_db_version (version_id, is_applied) values (0, true), (1, true), (2, true), (20240101, true);
		create table schedules (id int primary key, what text);
		create table runs (id int primary key);
		insert into schedules values (1, 'the app''s');`); err != nil {
		t.Fatal(err)
	}
	before := objects(t, pool, "public")
	if _, err := db.MigrateUp(ctx, pool.Config().ConnString()); err != nil {
		t.Fatal(err)
	}
	if after := objects(t, pool, "public"); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Fatalf("public changed:\nbefore %v\nafter  %v", before, after)
	}
	var rows int
	if err := pool.QueryRow(ctx, `select count(*) from goose_db_version`).Scan(&rows); err != nil || rows != 4 {
		t.Fatalf("goose_db_version has %d rows, %v", rows, err)
	}
	if err := db.CheckSchema(ctx, pool); err != nil {
		t.Fatal(err)
	}
}

func TestInvalidSchemaChangesNothing(t *testing.T) {
	pool, _ := emptyDB(t)
	before := snapshot(t, pool)
	for _, s := range []string{"Jobs", "my-jobs", "pg_jobs", strings.Repeat("a", 60), "x;drop",
		"information_schema", "pg_catalog", "pg_toast", "pg_temp", "pg_temp_1", "public"} {
		m, err := migrate.New(pool, migrate.Options{Schema: s})
		if !errors.Is(err, migrate.ErrInvalidSchema) {
			t.Errorf("New(schema %q) = %v, want ErrInvalidSchema", s, err)
		}
		if err != nil && !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not name the schema", err)
		}
		if err == nil {
			if _, err := m.Up(context.Background()); err != nil {
				t.Errorf("Up in schema %q: %v", s, err)
			}
		}
	}
	if after := snapshot(t, pool); after != before {
		t.Fatalf("the database changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	var n int
	if err := pool.QueryRow(context.Background(), `select count(*) from pg_class where relnamespace = 'information_schema'::regnamespace
		and relname ~ '^(job_runs|outbox|inbox|timers|schedules|runs|workq_migrations)$'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d workq tables in information_schema, %v", n, err)
	}
}

func TestConcurrentMigrators(t *testing.T) {
	ctx := context.Background()
	pool, _ := emptyDB(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			schema := []string{"", "other"}[i%2]
			m, err := migrate.New(pool, migrate.Options{Schema: schema})
			if err == nil {
				var v int64
				if v, err = m.Up(ctx); err == nil && v != migrate.Latest() {
					err = errors.New("not at the latest version")
				}
			}
			errs <- err
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	var n, distinct int
	if err := pool.QueryRow(ctx, `select count(*), count(distinct version_id) from workq.workq_migrations`).Scan(&n, &distinct); err != nil || n != distinct {
		t.Fatalf("version rows %d for %d versions, %v: a migration was recorded twice", n, distinct, err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// Two workq schemas in one database: work enqueued in one is neither
// claimed nor announced in the other.
func TestTwoSchemasDoNotSeeEachOther(t *testing.T) {
	ctx := context.Background()
	pool, _ := emptyDB(t)
	wrap := map[string]dbschema.DBTX{}
	for _, s := range []string{"alpha", "beta"} {
		if _, err := must(migrate.New(pool, migrate.Options{Schema: s})).Up(ctx); err != nil {
			t.Fatal(err)
		}
		r, _ := dbschema.NewRewriter(s)
		wrap[s] = r.Wrap(pool)
	}
	listen := func(schema string) *pgx.Conn {
		c, err := pgx.Connect(ctx, pool.Config().ConnString())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(ctx) })
		if _, err := c.Exec(ctx, "listen "+pgx.Identifier{workqtype.NotifyChannel(schema, "job_runs")}.Sanitize()); err != nil {
			t.Fatal(err)
		}
		return c
	}
	la, lb := listen("alpha"), listen("beta")
	client := jobq.New(jobq.Options{})
	if _, err := client.Enqueue(ctx, wrap["alpha"], jobq.Job{Kind: "a.job", Queue: "q"}); err != nil {
		t.Fatal(err)
	}
	wait := func(c *pgx.Conn, d time.Duration) error {
		wctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		_, err := c.WaitForNotification(wctx)
		return err
	}
	if err := wait(la, 5*time.Second); err != nil {
		t.Fatalf("alpha's listener: %v", err)
	}
	if err := wait(lb, 300*time.Millisecond); err == nil {
		t.Fatal("beta's listener woke for alpha's job")
	}
	claim := func(schema string) []lease.Item {
		c, err := lease.New(wrap[schema], lease.JobRuns).Claim(ctx, lease.ClaimParams{Queue: "q", Max: 10, Lease: time.Minute, WorkerID: "t"})
		if err != nil {
			t.Fatal(err)
		}
		return c.Items
	}
	if got := claim("beta"); len(got) != 0 {
		t.Fatalf("beta claimed %d of alpha's jobs", len(got))
	}
	if got := claim("alpha"); len(got) != 1 || got[0].Kind != "a.job" {
		t.Fatalf("alpha claimed %+v", got)
	}
}
