package migrate_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/dbschema"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/migrate"
)

// A database of the layout before schema isolation (testdata: workq 1-16 in
// public, versions in public.goose_db_version), with live work of every
// kind, is moved into the schema by Up; the work is still claimable there,
// the functions and triggers work without public on the search path, and
// goose_db_version is left as it was.
func TestUpgradeFromPublicLayout(t *testing.T) {
	for _, schema := range []string{"workq", "moved"} {
		t.Run(schema, func(t *testing.T) { testUpgrade(t, schema) })
	}
}

// loadLegacy loads the dump of the layout before schema isolation into the
// database at url.
func loadLegacy(t *testing.T, url string) {
	t.Helper()
	ctx := context.Background()
	fixture, err := os.ReadFile("testdata/legacy_public_v16.sql")
	if err != nil {
		t.Fatal(err)
	}
	load, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer load.Close(ctx)
	if _, err := load.Exec(ctx, string(fixture)); err != nil { // no arguments: the simple protocol runs the whole script
		t.Fatal(err)
	}
}

func testUpgrade(t *testing.T, schema string) {
	ctx := context.Background()
	pool, url := emptyDB(t)
	loadLegacy(t, url)
	// Live rows of every kind, written as the old binaries did (unqualified
	// names on the default search path), including a keyed outbox message
	// (the per-key sequence trigger) and a join with one member.
	if _, err := pool.Exec(ctx, `
		insert into job_runs (queue, kind) values ('q', 'k');
		insert into inbox (queue, source, message_id, payload_hash) values ('q', 'src', 'm1', '\x00');
		insert into timers (queue, topic, due_time, run_at) values ('q', 't', now(), now());
		insert into schedules (name, kind, cron) values ('nightly', 'k', '0 3 * * *');
		insert into outbox (queue, topic, partition_key) values ('q', 't', 'key1');
		insert into outbox_joins (expected_steps, on_complete_topic, on_complete_queue) values (1, 'joined', 'after');
		insert into outbox (queue, topic, join_id) select 'q', 'member', max(id) from outbox_joins;
	`); err != nil {
		t.Fatal(err)
	}
	goose := func() string {
		var s string
		if err := pool.QueryRow(ctx, `select string_agg(version_id || ':' || is_applied, ',' order by id) from public.goose_db_version`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	gooseBefore := goose()

	m, err := migrate.New(pool, migrate.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := m.Up(ctx); err != nil || v != migrate.Latest() {
		t.Fatalf("Up = %d, %v", v, err)
	}
	if got := objects(t, pool, "public"); strings.Join(got, ",") != "rel goose_db_version,rel goose_db_version_id_seq,rel goose_db_version_pkey" {
		t.Fatalf("left in public: %v", got)
	}
	if got := goose(); got != gooseBefore {
		t.Fatalf("goose_db_version changed:\n%s\n%s", gooseBefore, got)
	}
	st, err := m.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if !s.Applied {
			t.Errorf("version %d not recorded", s.Version)
		}
	}

	// Work on a connection whose search path does not reach the schema.
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = "pg_catalog"
	bare, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	r, _ := dbschema.NewRewriter(schema)
	q := r.Wrap(bare)
	claimed := map[lease.Table][]lease.Item{}
	for _, table := range []lease.Table{lease.JobRuns, lease.Outbox, lease.Inbox, lease.Timers} {
		e := lease.New(q, table)
		c, err := e.Claim(ctx, lease.ClaimParams{Queue: "q", Max: 10, Lease: time.Minute, WorkerID: "t"})
		if err != nil {
			t.Fatalf("claim %s: %v", table, err)
		}
		if len(c.Items) == 0 {
			t.Fatalf("claim %s: nothing", table)
		}
		claimed[table] = c.Items
		ids := make([]int64, len(c.Items))
		for i, it := range c.Items {
			ids[i] = it.ID
		}
		if err := e.Ack(ctx, c.Token, ids...); err != nil {
			t.Fatalf("ack %s: %v", table, err)
		}
	}
	if n := len(claimed[lease.Outbox]); n != 2 {
		t.Fatalf("claimed %d outbox messages, want the keyed one and the member", n)
	}
	// The member's ack ended the join (the redefined trigger functions),
	// which wrote its outcome message.
	var status int
	if err := q.QueryRow(ctx, `select status from workq.outbox_joins`).Scan(&status); err != nil || status != 2 {
		t.Fatalf("join status %d, %v; want 2", status, err)
	}
	var outcome int
	if err := q.QueryRow(ctx, `select count(*) from workq.outbox where topic = 'joined' and queue = 'after'`).Scan(&outcome); err != nil || outcome != 1 {
		t.Fatalf("outcome messages %d, %v", outcome, err)
	}
	// The per-key sequence continues after the old rows.
	var seq int64
	if err := q.QueryRow(ctx, `insert into workq.outbox (queue, topic, partition_key) values ('q', 't', 'key1') returning key_seq`).Scan(&seq); err != nil || seq != 2 {
		t.Fatalf("key_seq %d, %v; want 2", seq, err)
	}
}

// snapshot describes every schema but the system ones: its objects, and the
// rows of each of its tables. Equal snapshots before and after an Up mean
// that it changed nothing.
func snapshot(t *testing.T, q migrate.DB) string {
	t.Helper()
	ctx := context.Background()
	rows, err := q.Query(ctx, `select nspname from pg_namespace
		where nspname !~ '^pg_' and nspname <> 'information_schema' order by 1`)
	if err != nil {
		t.Fatal(err)
	}
	schemas, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, s := range schemas {
		fmt.Fprintf(&b, "schema %s: %s\n", s, strings.Join(objects(t, q, s), ", "))
		rows, err := q.Query(ctx, `select format('select %L || '': '' || count(*) || '' '' || coalesce(md5(string_agg(t::text, '','' order by t::text)), '''') from %I.%I t',
				c.relname, n.nspname, c.relname)
			from pg_class c join pg_namespace n on n.oid = c.relnamespace
			where n.nspname = $1 and c.relkind in ('r', 'p') order by c.relname`, s)
		if err != nil {
			t.Fatal(err)
		}
		digests, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range digests {
			var line string
			if err := q.QueryRow(ctx, d).Scan(&line); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "  %s\n", line)
		}
	}
	return b.String()
}

// gooseApp creates, in public, what an application migrated by goose with
// sequential versions has: goose_db_version with versions 0 to 3 and the
// given tables, each with a row.
func gooseApp(t *testing.T, q migrate.DB, tables ...string) {
	t.Helper()
	ctx := context.Background()
	if _, err := q.Exec(ctx, `create table public.goose_db_version (id integer primary key generated by default as identity,
			version_id bigint not null, is_applied boolean not null, tstamp timestamp not null default now());
		insert into public.goose_db_version (version_id, is_applied) values (0, true), (1, true), (2, true), (3, true)`); err != nil {
		t.Fatal(err)
	}
	for _, tbl := range tables {
		if _, err := q.Exec(ctx, tbl); err != nil {
			t.Fatal(err)
		}
	}
}

// appTables are an application's own tables that have the names of workq
// tables (issue 28): the first Up must leave them where they are.
var appTables = []struct {
	name   string
	tables []string
}{
	{"job_runs and outbox", []string{
		`create table public.job_runs (id bigserial primary key, customer text)`,
		`insert into public.job_runs (customer) values ('acme')`,
		`create table public.outbox (id bigserial primary key, body text)`,
		`insert into public.outbox (body) values ('hello')`,
	}},
	{"schedules", []string{
		`create table public.schedules (id bigserial primary key, cron text, what text)`,
		`insert into public.schedules (cron, what) values ('0 3 * * *', 'the app''s backup')`,
	}},
}

// An application on goose with sequential versions and tables named like
// workq's: the first Up installs workq in its schema and leaves public
// (tables, rows and goose_db_version) exactly as it was.
func TestUpBesideAppTablesWithWorkqNames(t *testing.T) {
	for _, tc := range appTables {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			pool, _ := emptyDB(t)
			gooseApp(t, pool, tc.tables...)
			before := snapshot(t, pool)
			m, err := migrate.New(pool, migrate.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if v, err := m.Up(ctx); err != nil || v != migrate.Latest() {
				t.Fatalf("Up = %d, %v; want %d", v, err, migrate.Latest())
			}
			after := snapshot(t, pool)
			if pub := strings.SplitN(after, "schema workq:", 2)[0]; pub != strings.SplitN(before, "schema workq:", 2)[0] {
				t.Fatalf("public changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			var fresh bool
			if err := pool.QueryRow(ctx, `select count(*) = 0 from workq.job_runs`).Scan(&fresh); err != nil || !fresh {
				t.Fatalf("workq.job_runs is not a fresh workq table: %v, %v", fresh, err)
			}
		})
	}
}

// A failure in any migration of the first Up changes nothing: not the
// application's public, not the old layout (nothing moved out of public),
// and no schema or version table is left behind.
func TestFirstUpIsAllOrNothing(t *testing.T) {
	cases := []struct {
		name    string
		schema  string
		prepare func(t *testing.T, pool *pgxpool.Pool, url string)
		errHas  string
	}{
		{name: "old layout, a later migration fails", prepare: func(t *testing.T, pool *pgxpool.Pool, url string) {
			loadLegacy(t, url)
			// A timer whose status 00017's check refuses.
			if _, err := pool.Exec(context.Background(), `alter table public.timers drop constraint timers_status_check;
				insert into public.timers (queue, topic, due_time, run_at, status) values ('q', 't', now(), now(), 7)`); err != nil {
				t.Fatal(err)
			}
		}, errHas: "00017"},
		{name: "old layout in another schema, a later migration fails", schema: "moved", prepare: func(t *testing.T, pool *pgxpool.Pool, url string) {
			loadLegacy(t, url)
			if _, err := pool.Exec(context.Background(), `alter table public.timers drop constraint timers_status_check;
				insert into public.timers (queue, topic, due_time, run_at, status) values ('q', 't', now(), now(), 7)`); err != nil {
				t.Fatal(err)
			}
		}, errHas: "00017"},
		{name: "old layout beside an app table of a workq name", prepare: func(t *testing.T, pool *pgxpool.Pool, url string) {
			loadLegacy(t, url)
			// outbox_key_seqs is the app's, not workq's.
			if _, err := pool.Exec(context.Background(), `drop table public.outbox_key_seqs;
				create table public.outbox_key_seqs (id int primary key, note text);
				insert into public.outbox_key_seqs values (1, 'the app''s')`); err != nil {
				t.Fatal(err)
			}
		}, errHas: "public.outbox_key_seqs"},
		{name: "old layout with a table missing", prepare: func(t *testing.T, pool *pgxpool.Pool, url string) {
			loadLegacy(t, url)
			if _, err := pool.Exec(context.Background(), `drop table public.outbox_key_seqs`); err != nil {
				t.Fatal(err)
			}
		}, errHas: "public.outbox_key_seqs is missing"},
		{name: "old layout without its versions", prepare: func(t *testing.T, pool *pgxpool.Pool, url string) {
			loadLegacy(t, url)
			if _, err := pool.Exec(context.Background(), `delete from public.goose_db_version where version_id > 0`); err != nil {
				t.Fatal(err)
			}
		}, errHas: "does not record workq's migration 1"},
		{name: "empty database, the last migration fails", prepare: failOnCreate("workq_epoch"), errHas: "00021"},
		{name: "app on goose, the first migration fails", prepare: func(t *testing.T, pool *pgxpool.Pool, url string) {
			gooseApp(t, pool, appTables[0].tables...)
			failOnCreate("workq_table_code")(t, pool, url)
		}, errHas: "00001"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			pool, url := emptyDB(t)
			tc.prepare(t, pool, url)
			before := snapshot(t, pool)
			m, err := migrate.New(pool, migrate.Options{Schema: tc.schema})
			if err != nil {
				t.Fatal(err)
			}
			v, err := m.Up(ctx)
			if err == nil || !strings.Contains(err.Error(), tc.errHas) {
				t.Fatalf("Up = %d, %v; want an error naming %s", v, err, tc.errHas)
			}
			t.Logf("Up: %.300s", err)
			if after := snapshot(t, pool); after != before {
				t.Fatalf("the failed Up changed the database:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			if v, err := m.Version(ctx); err != nil || v != 0 {
				t.Fatalf("Version after the failed Up = %d, %v", v, err)
			}
		})
	}
}

// failOnCreate installs an event trigger that fails the creation of a
// function called name: a migration that will fail, in a database
// otherwise fit for it.
func failOnCreate(name string) func(t *testing.T, pool *pgxpool.Pool, url string) {
	return func(t *testing.T, pool *pgxpool.Pool, url string) {
		t.Helper()
		if _, err := pool.Exec(context.Background(), `
			create function public.test_fail_on_create() returns event_trigger language plpgsql as $$
			begin
				if exists (select 1 from pg_event_trigger_ddl_commands() c
					where c.object_type = 'function' and c.object_identity like '%.`+name+`(%') then
					raise exception 'test: refusing to create `+name+`';
				end if;
			end $$;
			create event trigger test_fail_on_create on ddl_command_end execute function public.test_fail_on_create()`); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_, _ = pool.Exec(context.Background(), `drop event trigger if exists test_fail_on_create`)
		})
	}
}
