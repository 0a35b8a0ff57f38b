package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/testutil"
)

// TestFlowCLI runs the real binary: `workq flow set`, `list`, `fair`,
// `pause-kind`, `resume-kind` and `remove` do what they say, read back
// with `flow list --json`; every bad input exits 1 with one line naming
// what is wrong and writes nothing.
func TestFlowCLI(t *testing.T) {
	isolateEnv(t)
	bin := testutil.BuildWorkq(t, "../..")
	dbURL := testdb.URL(t)
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	run := func(args ...string) string {
		t.Helper()
		out, stderr, code := runBinary(t, bin, dbURL, args...)
		if code != 0 {
			t.Fatalf("workq %s: exit %d: %s", strings.Join(args, " "), code, stderr)
		}
		return out
	}
	list := func() flowStatusJSON {
		t.Helper()
		var st flowStatusJSON
		if err := json.Unmarshal([]byte(run("flow", "list", "--json")), &st); err != nil {
			t.Fatal(err)
		}
		return st
	}

	if out := run("flow", "list"); out != "no queue is under flow control\n" {
		t.Fatalf("list of nothing: %q", out)
	}
	if st := list(); st.Queues == nil || st.Limits == nil || st.PausedKinds == nil || st.Throttles == nil || len(st.Limits) != 0 {
		t.Fatalf("list --json of nothing: %+v", st)
	}
	if out := run("flow", "set", "--table", "job_runs", "--queue", "mail", "--kind", "send", "--rate", "10", "--period", "1m", "--concurrency", "3"); out != "job_runs/mail[send]: at most 10 starts per 1m0s, at most 3 in progress\n" {
		t.Fatalf("set: %q", out)
	}
	var rule flowRuleJSON
	if err := json.Unmarshal([]byte(run("flow", "set", "--table", "job_runs", "--queue", "mail", "--per-key", "--concurrency", "2", "--json")), &rule); err != nil {
		t.Fatal(err)
	}
	if rule != (flowRuleJSON{Table: "job_runs", Queue: "mail", PerKey: true, Concurrency: 2}) {
		t.Fatalf("set --json: %+v", rule)
	}
	run("flow", "set", "--table", "inbox", "--queue", "hooks", "--rate", "5")
	if out := run("flow", "fair", "--queue", "mail", "on"); out != "job_runs/mail: fair claims on (limit keys taken in turn)\n" {
		t.Fatalf("fair: %q", out)
	}
	if out := run("flow", "pause-kind", "--table", "job_runs", "--queue", "mail", "--kind", "send", "--actor", "alice", "--reason", "provider down"); out != "job_runs/mail[send] paused\n" {
		t.Fatalf("pause-kind: %q", out)
	}
	if out := run("flow", "pause-kind", "--table", "job_runs", "--queue", "mail", "--kind", "send"); out != "job_runs/mail[send] was already paused\n" {
		t.Fatalf("pause-kind again: %q", out)
	}

	st := list()
	if len(st.Queues) != 2 || st.Queues[0].Table != "inbox" || st.Queues[1].Queue != "mail" || !st.Queues[1].Fair {
		t.Fatalf("queues: %+v", st.Queues)
	}
	if len(st.Limits) != 3 || st.Limits[0].Rate != 5 || st.Limits[0].Period != "1s" {
		t.Fatalf("limits: %+v", st.Limits)
	}
	var send *flowLimitJSON
	for i := range st.Limits {
		if st.Limits[i].Kind == "send" {
			send = &st.Limits[i]
		}
	}
	if send == nil || send.Rate != 10 || send.Period != "1m0s" || send.Concurrency != 3 || send.UpdatedAt.IsZero() {
		t.Fatalf("limits: %+v", st.Limits)
	}
	if len(st.PausedKinds) != 1 || st.PausedKinds[0].PausedBy != "alice" || st.PausedKinds[0].Reason != "provider down" {
		t.Fatalf("paused kinds: %+v", st.PausedKinds)
	}

	// The text list: one aligned table per part.
	text := run("flow", "list")
	t.Logf("workq flow list:\n%s", text)
	for _, want := range []string{
		"QUEUES\nTABLE     QUEUE  FAIR  AUTO\ninbox     hooks  no    no\njob_runs  mail   yes   no\n",
		"LIMITS\nTABLE     QUEUE  SCOPE      RATE     CONCURRENCY  STARTED IN WINDOW  IN PROGRESS  ACTIVE KEYS  THROTTLED UNTIL\n",
		"inbox     hooks  queue      5/1s     -            0                  0            -            -\n",
		"job_runs  mail   kind send  10/1m0s  3            0                  0            -            -\n",
		"job_runs  mail   per key    -        2            0                  0            0            -\n",
		"PAUSED KINDS\nTABLE     QUEUE  KIND  PAUSED BY  PAUSED AT",
		"job_runs  mail   send  alice      ",
		"provider down\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("flow list has no %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "THROTTLES") {
		t.Errorf("flow list prints an empty part:\n%s", text)
	}

	if out := run("flow", "resume-kind", "--table", "job_runs", "--queue", "mail", "--kind", "send"); out != "job_runs/mail[send] running\n" {
		t.Fatalf("resume-kind: %q", out)
	}
	run("flow", "fair", "--queue", "mail", "off")
	if out := run("flow", "remove", "--table", "job_runs", "--queue", "mail", "--kind", "send"); out != "job_runs/mail[send]: flow limit removed\n" {
		t.Fatalf("remove: %q", out)
	}
	if out := run("flow", "remove", "--table", "job_runs", "--queue", "mail", "--kind", "send"); out != "job_runs/mail[send]: no such flow limit (nothing changed)\n" {
		t.Fatalf("remove again: %q", out)
	}
	var removed map[string]any
	if err := json.Unmarshal([]byte(run("flow", "remove", "--table", "job_runs", "--queue", "mail", "--per-key", "--json")), &removed); err != nil || removed["removed"] != true {
		t.Fatalf("remove --per-key --json: %v %v", removed, err)
	}
	if st := list(); len(st.Limits) != 1 || st.Limits[0].Queue != "hooks" || len(st.PausedKinds) != 0 {
		t.Fatalf("after remove: %+v", st)
	}

	// A kind is free text: one of HTML and SQL is stored as it is (the
	// statements take it as a parameter) and read back the same.
	const evil = `<script>alert(1)</script>'; drop table workq.job_runs; --`
	run("flow", "pause-kind", "--table", "job_runs", "--queue", "mail", "--kind", evil)
	run("flow", "set", "--table", "job_runs", "--queue", "mail", "--kind", evil, "--rate", "1")
	if st := list(); len(st.PausedKinds) != 1 || st.PausedKinds[0].Kind != evil || len(st.Limits) != 2 {
		t.Fatalf("evil kind: %+v", st)
	}
	var jobs int
	if err := pool.QueryRow(context.Background(), `select count(*) from workq.job_runs_all`).Scan(&jobs); err != nil {
		t.Fatalf("job_runs after an evil kind: %v", err)
	}
	run("flow", "resume-kind", "--table", "job_runs", "--queue", "mail", "--kind", evil)
	run("flow", "remove", "--table", "job_runs", "--queue", "mail", "--kind", evil)

	// Bad input: exit 1, one line naming what is wrong, nothing written.
	before := testdb.Snapshot(t, pool)
	set := []string{"flow", "set", "--table", "job_runs", "--queue", "mail"}
	bad := []struct {
		args []string
		want string
	}{
		{[]string{"flow", "set", "--queue", "mail", "--rate", "1"}, "workq flow set: --table is required"},
		{[]string{"flow", "set", "--table", "jobs", "--queue", "mail", "--rate", "1"}, `--table: unknown work table "jobs"`},
		{[]string{"flow", "set", "--table", "job_runs", "--rate", "1"}, "workq flow set: --queue is required"},
		{[]string{"flow", "set", "--table", "job_runs", "--queue", "bad queue", "--rate", "1"}, `queue "bad queue" is not a valid name`},
		{set, "a limit needs a rate or a concurrency"},
		{append(set, "--rate", "-1"), "rate -1 is out of range 0 to 2147483647"},
		{append(set, "--concurrency", "3000000000"), "concurrency 3000000000 is out of range"},
		{append(set, "--rate", "ten"), `--rate "ten": want a whole number`},
		{append(set, "--rate", "1", "--period", "soon"), `--period "soon": want a duration`},
		{append(set, "--rate", "1", "--period", "1500us"), "want whole milliseconds from 1ms to 24h0m0s"},
		{append(set, "--rate", "1", "--period", "48h"), "want whole milliseconds"},
		{append(set, "--concurrency", "1", "--period", "1m"), "a period goes with a rate"},
		{append(set, "--kind", "send", "--per-key", "--concurrency", "1"), "a limit per key is the queue's"},
		{[]string{"flow", "set", "--table", "outbox", "--queue", "o", "--per-key", "--concurrency", "1"}, "limits per key are for job runs"},
		{[]string{"flow", "set", "--table", "outbox", "--queue", "o", "--kind", "t", "--rate", "1"}, "limit the outbox queue, not a topic"},
		{[]string{"flow", "set", "--table", "job_runs", "--queue", "mail", "--rate", "1", "extra"}, `unexpected argument "extra"`},
		{[]string{"flow", "remove", "--table", "timers", "--queue", "t", "--per-key"}, "limits per key are for job runs"},
		{[]string{"flow", "remove", "--table", "job_runs"}, "--queue is required"},
		{[]string{"flow", "fair", "--queue", "mail", "maybe"}, `"maybe": want on or off`},
		{[]string{"flow", "fair", "--queue", "mail"}, "missing argument (usage: workq flow fair on|off)"},
		{[]string{"flow", "fair", "on"}, "--queue is required"},
		{[]string{"flow", "pause-kind", "--table", "job_runs", "--queue", "mail"}, "--kind is required"},
		{[]string{"flow", "pause-kind", "--table", "job_runs", "--queue", "mail", "--kind", strings.Repeat("k", 257)}, "1 to 256 bytes"},
		{[]string{"flow", "pause-kind", "--table", "job_runs", "--queue", "mail", "--kind", "send", "--reason", strings.Repeat("r", 1025)}, "reason must be at most 1024 bytes"},
		{[]string{"flow", "pause-kind", "--table", "job_runs", "--queue", "mail", "--kind", "send", "--actor", " "}, "who pauses must be 1 to 256 characters"},
		{[]string{"flow", "resume-kind", "--table", "job_runs", "--queue", "mail", "--kind", "send", "--reason", "x"}, "unknown flag: --reason"},
		{[]string{"flow", "list", "--shard", "a=" + dbURL, "--database-url", dbURL}, "give --shard (several databases) or --database-url (one), not both"},
	}
	for _, c := range bad {
		out, stderr, code := runBinary(t, bin, dbURL, c.args...)
		if code != 1 || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || out != "" {
			t.Errorf("workq %s: exit %d, stdout %q, stderr %q; want exit 1 and %q", strings.Join(c.args, " "), code, out, stderr, c.want)
		}
	}
	if after := testdb.Snapshot(t, pool); after != before {
		t.Fatal("a refused flow command changed the database")
	}
}

// TestFlowCLIShards: with --shard the commands act on every shard given:
// a rule without --per-key is split over them, and list has each shard's.
func TestFlowCLIShards(t *testing.T) {
	isolateEnv(t)
	bin := testutil.BuildWorkq(t, "../..")
	a, b := testdb.URL(t), testdb.URL(t)
	shards := []string{"--shard", "a=" + a, "--shard", "b=" + b}
	run := func(args ...string) string {
		t.Helper()
		out, stderr, code := runBinary(t, bin, "", append(args, shards...)...)
		if code != 0 {
			t.Fatalf("workq %s: exit %d: %s", strings.Join(args, " "), code, stderr)
		}
		return out
	}
	run("flow", "set", "--table", "job_runs", "--queue", "q", "--rate", "10", "--concurrency", "4")
	run("flow", "pause-kind", "--table", "job_runs", "--queue", "q", "--kind", "k")
	var st flowStatusJSON
	if err := json.Unmarshal([]byte(run("flow", "list", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Limits) != 2 || st.Limits[0].Shard != "a" || st.Limits[1].Shard != "b" || st.Limits[0].Rate != 5 || st.Limits[1].Concurrency != 2 {
		t.Fatalf("limits over two shards: %+v", st.Limits)
	}
	if len(st.PausedKinds) != 2 {
		t.Fatalf("paused kinds over two shards: %+v", st.PausedKinds)
	}
	if text := run("flow", "list"); !strings.Contains(text, "TABLE     QUEUE  SHARD  SCOPE  RATE") || !strings.Contains(text, "job_runs  q      b      queue  5/1s") {
		t.Fatalf("sharded list:\n%s", text)
	}

	// A shard that cannot be reached fails the command before anything
	// is done on the others.
	pool, err := pgxpool.New(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	before := testdb.Snapshot(t, pool)
	out, stderr, code := runBinary(t, bin, "", "flow", "set", "--table", "job_runs", "--queue", "q", "--rate", "7",
		"--shard", "a="+a, "--shard", "down=postgres://postgres@127.0.0.1:1/none?connect_timeout=2")
	if code != 1 || out != "" || !strings.Contains(stderr, "shard down: ") || !strings.Contains(stderr, "nothing done on any shard") {
		t.Fatalf("set with a shard down: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	if testdb.Snapshot(t, pool) != before {
		t.Fatal("set with a shard down changed the shard that was up")
	}
}
