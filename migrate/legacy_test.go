package migrate_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/dbschema"
	"github.com/workq/workq/lease"
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

func testUpgrade(t *testing.T, schema string) {
	ctx := context.Background()
	pool, url := emptyDB(t)
	fixture, err := os.ReadFile("testdata/legacy_public_v16.sql")
	if err != nil {
		t.Fatal(err)
	}
	load, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := load.Exec(ctx, string(fixture)); err != nil { // no arguments: the simple protocol runs the whole script
		t.Fatal(err)
	}
	load.Close(ctx)
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
