package test

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/workq/workq/internal/inboxrt"
	"github.com/workq/workq/internal/jobq"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/inbox"
	"github.com/workq/workq/internal/testdb"
)

// docSQL is one ```sql block of a document: its name is the first line's
// "-- name: description" comment.
type docSQL struct {
	name, sql string
	line      int
}

var sqlFence = regexp.MustCompile("(?s)```sql\n(.*?)```")

// docSQLBlocks returns the ```sql blocks of a Markdown file in order. Every
// block must start with a "-- name:" comment and names must be unique.
func docSQLBlocks(t *testing.T, path string) []docSQL {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []docSQL
	seen := map[string]bool{}
	for _, m := range sqlFence.FindAllSubmatchIndex(b, -1) {
		body := string(b[m[2]:m[3]])
		line := 1 + strings.Count(string(b[:m[0]]), "\n")
		first, _, _ := strings.Cut(body, "\n")
		name, _, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(first), "--"), ":")
		name = strings.TrimSpace(name)
		if !strings.HasPrefix(strings.TrimSpace(first), "--") || !ok || name == "" || strings.Contains(name, " ") {
			t.Fatalf("%s:%d: a sql block must start with a \"-- name: what it does\" comment, got %q", path, line, first)
		}
		if seen[name] {
			t.Fatalf("%s:%d: sql block name %q used twice", path, line, name)
		}
		seen[name] = true
		out = append(out, docSQL{name: name, sql: body, line: line})
	}
	return out
}

// execDoc runs one block (it may hold several statements) through the
// simple protocol and returns the result of its last statement.
func execDoc(t *testing.T, pool *pgxpool.Pool, path string, q docSQL) *pgconn.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	res, err := conn.Conn().PgConn().Exec(ctx, q.sql).ReadAll()
	if err != nil {
		t.Fatalf("%s:%d (%s): %v\n%s", path, q.line, q.name, err, q.sql)
	}
	if len(res) == 0 {
		t.Fatalf("%s:%d (%s): no statement", path, q.line, q.name)
	}
	return res[len(res)-1]
}

// column returns the text values of one column of a result.
func column(t *testing.T, r *pgconn.Result, name string) []string {
	t.Helper()
	for i, f := range r.FieldDescriptions {
		if f.Name == name {
			var out []string
			for _, row := range r.Rows {
				out = append(out, string(row[i]))
			}
			return out
		}
	}
	t.Fatalf("no column %q in the result", name)
	return nil
}

// TestMigrationDocSQL runs every SQL block of docs/migration.md, in order,
// on a migrated database seeded as a migration would leave it (a ledger of
// old job ids, imported jobs in each state, one imported twice, one never
// imported, an inbox import, shadow rows, a job in progress), and checks
// what the reconciliation and fallback queries report.
func TestMigrationDocSQL(t *testing.T) {
	const path = "../docs/migration.md"
	blocks := docSQLBlocks(t, path)
	pool := testdb.Pool(t)
	ctx := context.Background()
	client := jobq.New(jobq.Options{})
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	enqueue := func(queue, key string) int64 {
		t.Helper()
		res, err := client.EnqueueMany(ctx, pool, []jobq.Job{{Queue: queue, Kind: "email.send", DedupKey: key,
			Payload: map[string]any{"to": "ann@example.com"}}})
		if err != nil || res[0].Duplicate {
			t.Fatalf("enqueue %s: %+v %v", key, res, err)
		}
		return res[0].ID
	}
	finish := func(id int64, status int) {
		t.Helper()
		exec("update workq.job_runs set status = $2::smallint, attempts = 1, finished_at = now(), last_error = case when $2::smallint = 3 then 'boom' end where id = $1", id, status)
	}

	want := []string{"ledger", "shadow-counts", "shadow-delete", "missing", "duplicates", "outcomes",
		"failed-imports", "inbox-outcomes", "throughput", "backlog", "fallback-export", "fallback-delete", "cleanup"}
	var got []string
	for _, b := range blocks {
		got = append(got, b.name)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("sql blocks of %s: %v; this test checks %v: update both together", path, got, want)
	}

	var inProgress int64
	for _, q := range blocks {
		switch q.name {
		case "shadow-counts":
			for i := range 3 {
				enqueue("shadow.email", "shadow:redis:email:"+string(rune('a'+i)))
			}
		case "missing":
			// a1 ready, a2 done, a3 failed, a4 never imported, a5 imported
			// twice (the first copy finished before the re-run); f1 through
			// the inbox, f2 nowhere.
			exec(`insert into migration_ledger (source, old_id, queue, kind, payload, state) values
				('redis:email', 'a1', 'email', 'email.send', '{}', 'ready'),
				('redis:email', 'a2', 'email', 'email.send', '{}', 'ready'),
				('redis:email', 'a3', 'email', 'email.send', '{}', 'retry'),
				('redis:email', 'a4', 'email', 'email.send', '{}', 'processing'),
				('redis:email', 'a5', 'email', 'email.send', '{}', 'scheduled'),
				('spool:host-1', 'f1', 'default', 'email.send', '{}', 'ready'),
				('spool:host-1', 'f2', 'default', 'email.send', '{}', 'ready')`)
			enqueue("email", "redis:email:a1")
			finish(enqueue("email", "redis:email:a2"), 2)
			finish(enqueue("email", "redis:email:a3"), 3)
			finish(enqueue("email", "redis:email:a5"), 2)
			enqueue("email", "redis:email:a5")
			inProgress = enqueue("email", "live-elsewhere")
			exec("update workq.job_runs set status = 1, owner_token = gen_random_uuid(), locked_until = now() + interval '30 seconds', attempts = 1 where id = $1", inProgress)
			if _, err := inboxrt.NewClient(inboxrt.ClientOptions{}).Receive(ctx, pool, inbox.Message{
				Source: "spool:host-1", MessageID: "f1", Topic: "email.send", Payload: map[string]any{"to": "bob@example.com"},
			}); err != nil {
				t.Fatal(err)
			}
		}

		r := execDoc(t, pool, path, q)

		switch q.name {
		case "shadow-counts":
			if jobs := column(t, r, "jobs"); !slices.Equal(jobs, []string{"3"}) {
				t.Errorf("shadow-counts: jobs %v, want [3]", jobs)
			}
		case "shadow-delete":
			if r.CommandTag.RowsAffected() != 3 {
				t.Errorf("shadow-delete deleted %d rows, want 3", r.CommandTag.RowsAffected())
			}
		case "missing":
			if ids := column(t, r, "old_id"); !slices.Equal(ids, []string{"a4", "f2"}) {
				t.Errorf("missing: %v, want [a4 f2]", ids)
			}
		case "duplicates":
			if keys, copies := column(t, r, "dedup_key"), column(t, r, "copies"); !slices.Equal(keys, []string{"redis:email:a5"}) || !slices.Equal(copies, []string{"2"}) {
				t.Errorf("duplicates: %v %v, want [redis:email:a5] [2]", keys, copies)
			}
		case "outcomes":
			// per (source, state): processing has none (a4 missing); ready a1 (ready) + a2 (done);
			// retry a3 (failed); scheduled a5 twice (done, ready).
			st := column(t, r, "state")
			rows := map[string]string{}
			for i, s := range st {
				rows[s] = column(t, r, "ready")[i] + column(t, r, "in_progress")[i] + column(t, r, "done")[i] + column(t, r, "failed")[i]
			}
			wantRows := map[string]string{"ready": "1010", "retry": "0001", "scheduled": "1010"}
			if len(rows) != len(wantRows) {
				t.Errorf("outcomes: %v, want %v (ready/in progress/done/failed)", rows, wantRows)
			}
			for k, v := range wantRows {
				if rows[k] != v {
					t.Errorf("outcomes %s: %s, want %s (ready/in progress/done/failed)", k, rows[k], v)
				}
			}
		case "failed-imports":
			if ids := column(t, r, "old_id"); !slices.Equal(ids, []string{"a3"}) {
				t.Errorf("failed-imports: %v, want [a3]", ids)
			}
		case "inbox-outcomes":
			if src, rec := column(t, r, "source"), column(t, r, "received"); !slices.Equal(src, []string{"redis:email", "spool:host-1"}) || !slices.Equal(rec, []string{"0", "1"}) {
				t.Errorf("inbox-outcomes: %v %v, want [redis:email spool:host-1] [0 1]", src, rec)
			}
		case "backlog":
			if qs := column(t, r, "queue"); !slices.Contains(qs, "email") {
				t.Errorf("backlog: queues %v, want email among them", qs)
			}
		case "fallback-export":
			// a1 and the second a5 are ready on queue email.
			if keys := column(t, r, "dedup_key"); !slices.Equal(keys, []string{"redis:email:a1", "redis:email:a5"}) {
				t.Errorf("fallback-export: %v", keys)
			}
		case "fallback-delete":
			if r.CommandTag.RowsAffected() != 2 {
				t.Errorf("fallback-delete deleted %d rows, want the 2 exported", r.CommandTag.RowsAffected())
			}
			var status int
			if err := pool.QueryRow(ctx, "select status from workq.job_runs where id = $1", inProgress).Scan(&status); err != nil || status != 1 {
				t.Errorf("the in-progress job: status %d, %v; want it left in progress", status, err)
			}
		case "cleanup":
			var n int
			if err := pool.QueryRow(ctx, "select count(*) from pg_class where relname = 'migration_ledger'").Scan(&n); err != nil || n != 0 {
				t.Errorf("migration_ledger still exists (%d, %v)", n, err)
			}
		}
	}
}
