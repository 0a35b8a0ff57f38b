package main

import (
	"context"
	"errors"
	"io"
	neturl "net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/workqtype"
)

// emptyDatabase creates a database without workq's schema on the test
// server (dropped when the test ends) and returns its URL.
func emptyDatabase(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	u, err := neturl.Parse(testdb.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(u.Path, "/") + "_empty"
	u.Path = "/postgres"
	admin, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatalf("connect to the server's postgres database: %v", err)
	}
	if _, err := admin.Exec(ctx, "create database "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec(ctx, "drop database "+pgx.Identifier{name}.Sanitize()+" with (force)"); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
		admin.Close(ctx)
	})
	u.Path = "/" + name
	return u.String()
}

// commandsWithoutSchemaCheck use the database but do not need a current
// schema when they start: migrate changes it, run and bench migrate it
// themselves, api serves and answers /readyz with 503 until it is current.
var commandsWithoutSchemaCheck = map[string]bool{
	"workq migrate": true, "workq run": true, "workq bench": true, "workq api": true,
	"workq doctor": true, // reports the schema version as one of its checks
}

// TestCommandsOnAnEmptyDatabaseSayToMigrate: every command that uses the
// database, run against one that was never migrated, exits with the one
// message that says which version it is at, which this workq needs, and to
// run `workq migrate up`: not a raw "relation ... does not exist", and not a
// worker or maintenance loop that retries forever. It writes nothing there.
func TestCommandsOnAnEmptyDatabaseSayToMigrate(t *testing.T) {
	isolateEnv(t)
	url := emptyDatabase(t)
	t.Setenv("DATABASE_URL", url)
	cases := map[string][]string{
		"workq worker":            {"worker"},
		"workq maintain":          {"maintain"},
		"workq reaper":            {"reaper"},
		"workq stats":             {"stats"},
		"workq enqueue":           {"enqueue", "--kind", "k"},
		"workq jobs list":         {"jobs", "list"},
		"workq jobs show":         {"jobs", "show", "1"},
		"workq jobs retry":        {"jobs", "retry", "1"},
		"workq jobs cancel":       {"jobs", "cancel", "1"},
		"workq jobs delete":       {"jobs", "delete", "1"},
		"workq outbox send":       {"outbox", "send", "--topic", "t"},
		"workq outbox list":       {"outbox", "list"},
		"workq outbox show":       {"outbox", "show", "1"},
		"workq outbox retry":      {"outbox", "retry", "1"},
		"workq outbox cancel":     {"outbox", "cancel", "1"},
		"workq outbox delete":     {"outbox", "delete", "1"},
		"workq outbox blocked":    {"outbox", "blocked"},
		"workq inbox receive":     {"inbox", "receive", "--source", "s", "--message-id", "m"},
		"workq inbox list":        {"inbox", "list"},
		"workq inbox show":        {"inbox", "show", "1"},
		"workq inbox revive":      {"inbox", "revive", "1"},
		"workq inbox cancel":      {"inbox", "cancel", "1"},
		"workq inbox delete":      {"inbox", "delete", "1"},
		"workq timers schedule":   {"timers", "schedule", "--topic", "t", "--in", "1m"},
		"workq timers list":       {"timers", "list"},
		"workq timers show":       {"timers", "show", "1"},
		"workq timers cancel":     {"timers", "cancel", "1"},
		"workq timers retry":      {"timers", "retry", "1"},
		"workq timers delete":     {"timers", "delete", "1"},
		"workq schedules add":     {"schedules", "add", "nightly", "--cron", "0 3 * * *", "--kind", "k"},
		"workq schedules update":  {"schedules", "update", "nightly", "--kind", "k2"},
		"workq schedules enable":  {"schedules", "enable", "nightly"},
		"workq schedules disable": {"schedules", "disable", "nightly"},
		"workq schedules remove":  {"schedules", "remove", "nightly"},
		"workq schedules list":    {"schedules", "list"},
		"workq schedules trigger": {"schedules", "trigger", "nightly"},
		"workq lock list":         {"lock", "list"},
		"workq limit":             {"limit", "list"},
		"workq limit set":         {"limit", "set", "job_runs", "q", "3"},
		"workq limit remove":      {"limit", "remove", "job_runs", "q"},
		"workq queue list":        {"queue", "list"},
		"workq queue pause":       {"queue", "pause", "job_runs", "q"},
		"workq queue resume":      {"queue", "resume", "job_runs", "q"},
		"workq flow list":         {"flow", "list"},
		"workq flow set":          {"flow", "set", "--table", "job_runs", "--queue", "q", "--rate", "5"},
		"workq flow remove":       {"flow", "remove", "--table", "job_runs", "--queue", "q"},
		"workq flow fair":         {"flow", "fair", "--queue", "q", "on"},
		"workq flow pause-kind":   {"flow", "pause-kind", "--table", "job_runs", "--queue", "q", "--kind", "k"},
		"workq flow resume-kind":  {"flow", "resume-kind", "--table", "job_runs", "--queue", "q", "--kind", "k"},
		"workq workflows list":    {"workflows", "list"},
		"workq workflows show":    {"workflows", "show", "1"},
		"workq workflows cancel":  {"workflows", "cancel", "1"},
		"workq workflows retry":   {"workflows", "retry", "1"},
		"workq workflows create":  {"workflows", "create", "--file", "testdata/workflow.json"},
		"workq workflows add":     {"workflows", "add", "1", "--file", "testdata/workflow_add.json"},
	}
	// Every command that takes --database-url is in the table or exempt.
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		path := c.CommandPath()
		if c.Runnable() && c.Flags().Lookup("database-url") != nil && cases[path] == nil && !commandsWithoutSchemaCheck[path] {
			t.Errorf("%s uses the database and is not in this test's table", path)
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(newRoot(nil, nil))

	// The Client's calls and its Start give the same message (ErrNotMigrated).
	want := workqtype.NotMigratedErr("workq", nil).Error()
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := runCLI(t, args...)
			if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, workqtype.ErrNotMigrated) {
				t.Fatalf("workq %q on an empty database: %v (stdout %q); want an error saying %q", args, err, out, want)
			}
			if strings.Contains(err.Error(), "does not exist") {
				t.Errorf("error %q shows the raw SQL error", err)
			}
		})
	}
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), `select count(*) from pg_class c join pg_namespace s on s.oid = c.relnamespace
		where s.nspname = 'public'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d relations in the empty database afterwards (%v), want 0", n, err)
	}
}

// TestCLIOnAnotherSchema: `migrate up --schema S`, then `enqueue`, `jobs
// list` and `worker` with --schema (or WORKQ_SCHEMA) work S only: the
// worker runs S's job and leaves the default schema's alone.
func TestCLIOnAnotherSchema(t *testing.T) {
	isolateEnv(t)
	url := testdb.URL(t)
	t.Setenv("DATABASE_URL", url)
	ctx := context.Background()
	run := func(args ...string) string {
		t.Helper()
		out, err := runCLI(t, args...)
		if err != nil {
			t.Fatalf("workq %s: %v", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(out)
	}
	run("migrate", "up", "--schema", "cli_two")
	two := run("enqueue", "--schema", "cli_two", "--kind", "noop")
	run("enqueue", "--kind", "noop")
	def := run("enqueue", "--kind", "noop") // ids count per schema: this one is 2, cli_two's 1
	t.Setenv("WORKQ_SCHEMA", "cli_two")
	if out := run("jobs", "list", "--json"); strings.Count(out, `"id": `) != 1 || !strings.Contains(out, `"id": `+two+",") {
		t.Fatalf("jobs list in cli_two (WORKQ_SCHEMA) shows:\n%s\nwant job %s only", out, two)
	}
	t.Setenv("WORKQ_SCHEMA", "")

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	status := func(schema, id string) (s int16) {
		if err := conn.QueryRow(ctx, "select status from "+schema+".job_runs_all where id = $1", id).Scan(&s); err != nil {
			t.Fatalf("job %s in %s: %v", id, schema, err)
		}
		return s
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		root := newRoot(io.Discard, io.Discard)
		root.SetArgs([]string{"worker", "--schema", "cli_two", "--jobs", "--poll", "50ms"})
		done <- root.ExecuteContext(wctx)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for status("cli_two", two) != 2 { // done
		if time.Now().After(deadline) {
			t.Fatalf("workq worker --schema cli_two did not run job %s within 30s", two)
		}
		select {
		case err := <-done:
			t.Fatalf("workq worker stopped early: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	time.Sleep(200 * time.Millisecond) // four polls: time to take the default schema's job too, were it seen
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("workq worker: %v", err)
	}
	if s := status("workq", def); s != 0 {
		t.Fatalf("the default schema's job %s has status %d: the worker on cli_two touched it", def, s)
	}
	if _, err := runCLI(t, "stats", "--schema", "Bad"); err == nil || !strings.Contains(err.Error(), "invalid schema name") {
		t.Fatalf("stats --schema Bad: %v", err)
	}
}
