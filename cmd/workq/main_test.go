package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/lock"
	"github.com/workq/workq/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// isolateEnv hides DATABASE_URL and every WORKQ_* variable for the test, so
// the developer's environment cannot change what the CLI sees.
func isolateEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if k == "DATABASE_URL" || strings.HasPrefix(k, "WORKQ_") {
			t.Setenv(k, v) // restored when the test ends
			os.Unsetenv(k)
		}
	}
}

// runCLI runs one workq command line in-process. The root is built here, after
// the test set its environment, because flags take their defaults from the
// environment when they are bound.
func runCLI(t *testing.T, args ...string) (stdout string, err error) {
	t.Helper()
	return runCLIInput(t, nil, args...)
}

// runCLIInput is runCLI with stdin as standard input (nil: empty).
func runCLIInput(t *testing.T, stdin io.Reader, args ...string) (stdout string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRoot(&out, &errOut)
	root.SetArgs(args)
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	root.SetIn(stdin)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = root.ExecuteContext(ctx)
	if errOut.Len() > 0 {
		t.Logf("stderr of %q:\n%s", args, errOut.String())
	}
	return out.String(), err
}

// TestCLIRejectsInvalidInput: every invalid input is an error that says what
// is wrong, and one that reaches a database writes nothing there.
func TestCLIRejectsInvalidInput(t *testing.T) {
	isolateEnv(t)
	dbURL := testdb.URL(t)
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	long := strings.Repeat("k", 600)
	dir := t.TempDir()
	file := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	overLimit := `{"s":"` + strings.Repeat("x", 1<<20) + `"}` // 1048584 bytes
	bigFile := file("big.json", `{"s":"`+strings.Repeat("x", 2<<20)+`"}`)
	arrayFile := file("array.json", "[1]\n")
	cases := []struct {
		name  string
		args  []string
		env   map[string]string
		stdin string
		db    bool     // DATABASE_URL points at a migrated database
		want  []string // substrings of the error
	}{
		// worker kinds
		{name: "worker --inbox", db: true, args: []string{"worker", "--inbox"}, want: []string{"--inbox and --timers need handlers", "embed a workq.Client"}},
		{name: "worker --timers", db: true, args: []string{"worker", "--timers"}, want: []string{"--inbox and --timers need handlers"}},
		{name: "worker --outbox without publishers", db: true, args: []string{"worker", "--outbox"}, want: []string{"no outbox publisher is configured"}},
		{name: "worker outbox webhook host not allowed", db: true, args: []string{"worker", "--outbox-webhook", "orders=http://example.com/x", "--outbox-webhook-secret", "s"},
			want: []string{`host "example.com" is not in --webhook-allow`}},
		// A negative retention is none (workq.Config's convention, docs/design.md §28, "One configuration"): TestNoneSpellings.
		{name: "maintain retention not a duration", args: []string{"maintain", "--retain-finished", "forever"}, want: []string{`--retain-finished "forever": want a duration`}},
		{name: "maintain short leader ttl", args: []string{"maintain", "--leader-ttl", "100ms"}, want: []string{"--leader-ttl: leader TTL must be at least 1s, got 100ms"}},
		// enqueue
		{name: "metadata without =", db: true, args: []string{"enqueue", "--kind", "k", "--metadata", "tenant"}, want: []string{`--metadata "tenant": want KEY=VALUE`}},
		{name: "metadata key twice", db: true, args: []string{"enqueue", "--kind", "k", "--metadata", "a=1", "--metadata", "a=2"}, want: []string{`key "a" given twice`}},
		{name: "unique period too short", db: true, args: []string{"enqueue", "--kind", "k", "--unique-period", "10ms"}, want: []string{"unique period 10ms is shorter than 1s"}},
		{name: "unique states unknown", db: true, args: []string{"enqueue", "--kind", "k", "--unique-states", "ready,in_progress,gone"}, want: []string{`unknown state "gone"`}},
		{name: "payload not JSON", db: true, args: []string{"enqueue", "--kind", "k", "--payload", "{bad"}, want: []string{"--payload: invalid request: payload is not valid JSON"}},
		{name: "payload empty", db: true, args: []string{"enqueue", "--kind", "k", "--payload", ""}, want: []string{"--payload: invalid request: payload is not valid JSON"}},
		{name: "payload with NUL", db: true, args: []string{"enqueue", "--kind", "k", "--payload", `{"a":"x\u0000"}`}, want: []string{`--payload: invalid request: payload contains \u0000 (NUL), which PostgreSQL's jsonb cannot store`}},
		{name: "payload a number", db: true, args: []string{"enqueue", "--kind", "k", "--payload", "42"}, want: []string{"payload must be a JSON object ({...}), got a number"}},
		{name: "payload a string", db: true, args: []string{"enqueue", "--kind", "k", "--payload", `"x"`}, want: []string{"got a string"}},
		{name: "payload an array", db: true, args: []string{"enqueue", "--kind", "k", "--payload", "[1]"}, want: []string{"got an array"}},
		{name: "payload null", db: true, args: []string{"enqueue", "--kind", "k", "--payload", "null"}, want: []string{"got null"}},
		{name: "payload over the default limit", db: true, args: []string{"enqueue", "--kind", "k", "--payload", overLimit},
			want: []string{"payload is 1048584 bytes, more than the limit of 1048576 bytes", "--max-payload or WORKQ_MAX_PAYLOAD"}},
		{name: "payload over --max-payload", db: true, args: []string{"enqueue", "--kind", "k", "--max-payload", "10", "--payload", `{"a":"bcd"}`},
			want: []string{"payload is 11 bytes, more than the limit of 10 bytes"}},
		{name: "payload over WORKQ_MAX_PAYLOAD", db: true, env: map[string]string{"WORKQ_MAX_PAYLOAD": "10"}, args: []string{"enqueue", "--kind", "k", "--payload", `{"a":"bcd"}`},
			want: []string{"payload is 11 bytes, more than the limit of 10 bytes"}},
		{name: "max-payload 0", db: true, args: []string{"enqueue", "--kind", "k", "--max-payload", "0"}, want: []string{"--max-payload must be between 1 and 268435456 bytes, got 0"}},
		{name: "max-payload above the ceiling", db: true, args: []string{"enqueue", "--kind", "k", "--max-payload", "268435457"}, want: []string{"got 268435457"}},
		{name: "WORKQ_MAX_PAYLOAD not a number", db: true, env: map[string]string{"WORKQ_MAX_PAYLOAD": "1MiB"}, args: []string{"enqueue", "--kind", "k"}, want: []string{`WORKQ_MAX_PAYLOAD="1MiB"`, "not an integer"}},
		{name: "payload file missing", db: true, args: []string{"enqueue", "--kind", "k", "--payload", "@" + filepath.Join(dir, "missing.json")},
			want: []string{"--payload @" + filepath.Join(dir, "missing.json") + ": open ", "no such file or directory"}},
		{name: "payload file a directory", db: true, args: []string{"enqueue", "--kind", "k", "--payload", "@" + dir}, want: []string{"--payload @" + dir + ": read ", "is a directory"}},
		{name: "payload file name missing", db: true, args: []string{"enqueue", "--kind", "k", "--payload", "@"}, want: []string{"--payload @: no file name after @"}},
		{name: "payload file too large", db: true, args: []string{"enqueue", "--kind", "k", "--payload", "@" + bigFile},
			want: []string{"--payload @" + bigFile + ": invalid request: payload is 2097160 bytes, more than the limit of 1048576 bytes"}},
		{name: "payload file an array", db: true, args: []string{"enqueue", "--kind", "k", "--payload", "@" + arrayFile}, want: []string{"--payload @" + arrayFile + ": ", "got an array"}},
		{name: "payload stdin too large", db: true, stdin: overLimit + "\n", args: []string{"enqueue", "--kind", "k", "--payload", "-"},
			want: []string{"--payload -: invalid request: payload is 1048585 bytes, more than the limit of 1048576 bytes"}},
		{name: "payload stdin with NUL", db: true, stdin: `{"\u0000":1}`, args: []string{"enqueue", "--kind", "k", "--payload", "-"}, want: []string{`--payload -: invalid request: payload contains \u0000 (NUL)`}},
		{name: "payload stdin empty", db: true, args: []string{"enqueue", "--kind", "k", "--payload", "-"}, want: []string{"--payload -: invalid request: payload is not valid JSON"}},
		{name: "queue empty", db: true, args: []string{"enqueue", "--kind", "k", "--queue", ""}, want: []string{"--queue must not be empty", "1-128"}},
		// issue 11 scenario 6: non-printable and invalid UTF-8 text, SQL
		// metacharacters, bad durations, in the other writing commands
		{name: "pause reason invalid UTF-8", db: true, args: []string{"queue", "pause", "job_runs", "q", "--reason", "\xff"}, want: []string{"reason must be at most 1024 bytes of UTF-8 without NUL"}},
		{name: "pause actor invalid UTF-8", db: true, args: []string{"queue", "pause", "job_runs", "q", "--actor", "\xff"}, want: []string{"who pauses"}},
		{name: "pause SQL in the queue", db: true, args: []string{"queue", "pause", "job_runs", "x'); delete from job_runs; --"}, want: []string{"not a valid name"}},
		{name: "pause unknown table", db: true, args: []string{"queue", "pause", "jobs", "q"}, want: []string{"jobs"}},
		{name: "cancel reason invalid UTF-8", db: true, args: []string{"jobs", "cancel", "1", "--reason", "\xff"}, want: []string{"UTF-8 without NUL"}},
		{name: "outbox send SQL in the topic key", db: true, args: []string{"outbox", "send", "--topic", "t\x01"}, want: []string{"topic"}},
		{name: "outbox send key invalid UTF-8", db: true, args: []string{"outbox", "send", "--topic", "t", "--key", "\xff"}, want: []string{"partition key"}},
		{name: "outbox send negative delay", db: true, args: []string{"outbox", "send", "--topic", "t", "--delay", "-1s"}, want: []string{"negative"}},
		{name: "inbox receive source invalid UTF-8", db: true, args: []string{"inbox", "receive", "--source", "\xff", "--message-id", "m"}, want: []string{"source"}},
		{name: "inbox receive SQL in the queue", db: true, args: []string{"inbox", "receive", "--source", "s", "--message-id", "m", "--queue", "x'); delete from job_runs; --"}, want: []string{"not a valid name"}},
		{name: "timers schedule zero delay", db: true, args: []string{"timers", "schedule", "--topic", "t", "--in", "0s"}, want: []string{"positive"}},
		{name: "timers schedule negative delay", db: true, args: []string{"timers", "schedule", "--topic", "t", "--in", "-5m"}, want: []string{"positive"}},
		{name: "limit set negative", db: true, args: []string{"limit", "set", "job_runs", "q", "-1"}, want: []string{"W"}},
		{name: "run-at zero", db: true, args: []string{"enqueue", "--kind", "k", "--run-at", "0001-01-01T00:00:00Z"}, want: []string{`--run-at "0001-01-01T00:00:00Z" is the zero time`}},
		{name: "run-at zero with an offset", db: true, args: []string{"enqueue", "--kind", "k", "--run-at", "0001-01-01T02:00:00.000+02:00"}, want: []string{"is the zero time"}},
		{name: "run-at empty", db: true, args: []string{"enqueue", "--kind", "k", "--run-at", ""}, want: []string{`--run-at "" is not an RFC 3339 time`}},
		{name: "kind missing", db: true, args: []string{"enqueue"}, want: []string{"--kind is required"}},
		{name: "kind empty", db: true, args: []string{"enqueue", "--kind", ""}, want: []string{"--kind is required"}},
		{name: "kind invalid", db: true, args: []string{"enqueue", "--kind", "send mail!"}, want: []string{`kind "send mail!" is not a valid name`}},
		{name: "queue invalid", db: true, args: []string{"enqueue", "--kind", "k", "--queue", "bad queue!"}, want: []string{`queue "bad queue!" is not a valid name`}},
		{name: "queue too long", db: true, args: []string{"enqueue", "--kind", "k", "--queue", strings.Repeat("q", 129)}, want: []string{"is not a valid name (1-128"}},
		{name: "delay and run-at", db: true, args: []string{"enqueue", "--kind", "k", "--delay", "5s", "--run-at", "2030-01-02T15:04:05Z"}, want: []string{"not both"}},
		{name: "run-at not RFC 3339", db: true, args: []string{"enqueue", "--kind", "k", "--run-at", "2030-01-02 15:04"}, want: []string{`--run-at "2030-01-02 15:04" is not an RFC 3339 time`}},
		// issue 28, item 4: times outside UTC years 1 to 9999
		{name: "run-at in year 0", db: true, args: []string{"enqueue", "--kind", "k", "--run-at", "0000-06-01T00:00:00Z"}, want: []string{"run at 0000-06-01T00:00:00Z is out of range"}},
		{name: "run-at in year 10000 in UTC", db: true, args: []string{"enqueue", "--kind", "k", "--run-at", "9999-12-31T23:00:00-10:00"}, want: []string{"run at 10000-01-01T09:00:00Z is out of range"}},
		{name: "outbox send run-at out of range", db: true, args: []string{"outbox", "send", "--topic", "t", "--run-at", "0000-01-01T00:00:00Z"}, want: []string{"is out of range"}},
		{name: "delay negative", db: true, args: []string{"enqueue", "--kind", "k", "--delay", "-5s"}, want: []string{"delay -5s is negative"}},
		{name: "delay not a duration", db: true, args: []string{"enqueue", "--kind", "k", "--delay", "soon"}, want: []string{`"soon"`, "--delay"}},
		{name: "max-attempts negative", db: true, args: []string{"enqueue", "--kind", "k", "--max-attempts", "-1"}, want: []string{"--max-attempts must be between 1 and 1000, got -1"}},
		{name: "max-attempts too large", db: true, args: []string{"enqueue", "--kind", "k", "--max-attempts", "5000"}, want: []string{"--max-attempts must be between 1 and 1000, got 5000"}},
		{name: "priority out of range", db: true, args: []string{"enqueue", "--kind", "k", "--priority", "40000"}, want: []string{`"40000"`, "--priority"}},
		{name: "dedup key too long", db: true, args: []string{"enqueue", "--kind", "k", "--dedup-key", long}, want: []string{"dedup key longer than 512 bytes"}},
		{name: "enqueue without a database", args: []string{"enqueue", "--kind", "k"}, want: []string{"DATABASE_URL is not set"}},

		// worker settings, from flags and from the environment
		// A 0 is not passed on (the library would read it as "the default").
		{name: "worker concurrency 0", args: []string{"worker", "--concurrency", "0"}, want: []string{"--concurrency must not be 0 (leave it and WORKQ_CONCURRENCY unset for the default, "}},
		{name: "worker concurrency 20000", args: []string{"worker", "--concurrency", "20000"}, want: []string{"--concurrency: concurrency must be between 1 and 10000, got 20000"}},
		{name: "worker lease 10ms", args: []string{"worker", "--lease", "10ms"}, want: []string{"lease must be at least 1s, got 10ms"}},
		{name: "worker batch 0", args: []string{"worker", "--batch", "0"}, want: []string{"--batch must not be 0 (leave it and WORKQ_BATCH unset for the default, "}},
		{name: "worker batch 20000", args: []string{"worker", "--batch", "20000"}, want: []string{"--batch: batch must be between 1 and 10000, got 20000"}},
		{name: "worker queues empty", args: []string{"worker", "--queues", ""}, want: []string{"--queues must not be empty"}},
		{name: "worker worker-id empty", args: []string{"worker", "--worker-id", ""}, want: []string{"--worker-id must not be empty"}},
		{name: "worker log level", args: []string{"worker", "--log-level", "loud"}, want: []string{`log-level must be debug, info, warn or error, got "loud"`}},
		{name: "worker queue invalid", args: []string{"worker", "--queues", "ok,bad queue!"}, want: []string{`queue "bad queue!" is not a valid name`}},
		{name: "worker webhook-allow URL", args: []string{"worker", "--webhook-allow", "http://x/y"}, want: []string{`webhook-allow entry "http://x/y" must be a host name or host:port`}},
		{name: "worker webhook-allow port name", args: []string{"worker", "--webhook-allow", "example.com:http"}, want: []string{`webhook-allow entry "example.com:http"`, "port from 1 to 65535"}},
		{name: "worker webhook-allow empty port", args: []string{"worker", "--webhook-allow", "example.com:"}, want: []string{`webhook-allow entry "example.com:"`}},
		{name: "worker webhook-allow port 0", args: []string{"worker", "--webhook-allow", "example.com:0"}, want: []string{`webhook-allow entry "example.com:0"`}},
		{name: "worker several problems at once", args: []string{"worker", "--batch", "0", "--lease", "10ms"}, want: []string{"--batch must not be 0", "--lease: lease must be at least 1s, got 10ms"}},
		{name: "worker several library problems at once", args: []string{"worker", "--batch", "20000", "--lease", "10ms", "--backoff-base", "2m"},
			want: []string{"--batch: batch must be between", "--lease: lease must be at least", "--backoff-cap: backoff cap (30s) must be at least backoff base (2m0s)"}},
		{name: "WORKQ_BATCH not a number", env: map[string]string{"WORKQ_BATCH": "abc"}, args: []string{"worker"}, want: []string{`WORKQ_BATCH="abc"`, "not an integer"}},
		{name: "WORKQ_LEASE not a duration", env: map[string]string{"WORKQ_LEASE": "forever"}, args: []string{"worker"}, want: []string{`WORKQ_LEASE="forever"`, "not a duration"}},
		{name: "WORKQ_CONCURRENCY 0", env: map[string]string{"WORKQ_CONCURRENCY": "0"}, args: []string{"worker"}, want: []string{"--concurrency must not be 0"}},
		{name: "WORKQ_CONCURRENCY out of range", env: map[string]string{"WORKQ_CONCURRENCY": "10001"}, args: []string{"worker"}, want: []string{"--concurrency: concurrency must be between 1 and 10000, got 10001"}},
		{name: "WORKQ_EXEC_TIMEOUT not a duration", env: map[string]string{"WORKQ_EXEC_TIMEOUT": "forever"}, args: []string{"worker"}, want: []string{`WORKQ_EXEC_TIMEOUT="forever"`, "not a duration", "or none"}},
		{name: "api max-payload over the ceiling", args: []string{"api", "--max-payload", "300000000", "--insecure"}, want: []string{"--max-payload: the payload limit must be between 1 and 268435456 bytes"}},
		{name: "api max-attempts too large", args: []string{"api", "--max-attempts", "5000", "--insecure"}, want: []string{"--max-attempts: max attempts must be between 1 and 1000, got 5000"}},
		{name: "maintain schedule-interval too short", args: []string{"maintain", "--schedule-interval", "1ms"}, want: []string{"--schedule-interval: schedule interval must be at least 10ms, got 1ms"}},
		{name: "worker schema public", args: []string{"worker", "--schema", "public"}, want: []string{`--schema: invalid schema name "public"`}},
		// Valid settings pass validation and fail only for want of a
		// database: the checks above reject what is wrong, nothing more.
		{name: "worker valid webhook-allow entries", args: []string{"worker", "--webhook-allow", "example.com,example.com:443,[::1]:8080,::1"}, want: []string{"DATABASE_URL is not set"}},
		{name: "worker flag beats environment", env: map[string]string{"WORKQ_BATCH": "0"}, args: []string{"worker", "--batch", "10"}, want: []string{"DATABASE_URL is not set"}},
		{name: "worker exec-allow unknown command", db: true, args: []string{"worker", "--exec-allow", "workq-no-such-command"}, want: []string{`exec-allow "workq-no-such-command"`}},
		{name: "reaper interval", args: []string{"reaper", "--reap-interval", "5ms"}, want: []string{"--reap-interval: reap interval must be at least 10ms, got 5ms"}},
		{name: "run demo-jobs negative", args: []string{"run", "--demo-jobs", "-1"}, want: []string{"--demo-jobs must not be negative"}},
		{name: "run for negative", args: []string{"run", "--for", "-1s"}, want: []string{"--for must not be negative"}},

		// limit
		{name: "limit queue invalid", db: true, args: []string{"limit", "set", "job_runs", "bad q", "3"}, want: []string{`queue "bad q" is not a valid name`}},
		{name: "limit table unknown", db: true, args: []string{"limit", "set", "nosuchtable", "q", "3"}, want: []string{`unknown work table "nosuchtable"`}},
		{name: "limit W negative", db: true, args: []string{"limit", "set", "job_runs", "q", "--", "-1"}, want: []string{`set limit of job_runs/q: W must be a whole number from 0 to 2147483647, got "-1"`}},
		// Without "--" the flag parser takes -1 for a flag.
		{name: "limit W negative unquoted", db: true, args: []string{"limit", "set", "job_runs", "q", "-1"}, want: []string{"-1", "W must be a whole number"}},
		{name: "limit W not a number", db: true, args: []string{"limit", "set", "job_runs", "q", "three"}, want: []string{`got "three"`}},
		{name: "limit W too large", db: true, args: []string{"limit", "set", "job_runs", "q", "3000000000"}, want: []string{"W must be a whole number from 0 to 2147483647, got 3000000000"}},
		{name: "limit remove queue invalid", db: true, args: []string{"limit", "remove", "job_runs", "bad q"}, want: []string{`queue "bad q" is not a valid name`}},
		{name: "limit unknown action", db: true, args: []string{"limit", "frob", "job_runs", "q"}, want: []string{"usage: workq limit"}},
		{name: "limit set missing W", db: true, args: []string{"limit", "set", "job_runs", "q"}, want: []string{"usage: workq limit"}},

		// migrate
		{name: "migrate sideways", args: []string{"migrate", "sideways"}, want: []string{`unknown migrate action "sideways"`}},
		{name: "migrate sideways with a database", db: true, args: []string{"migrate", "sideways"}, want: []string{`unknown migrate action "sideways"`}},
		{name: "migrate no action", args: []string{"migrate"}, want: []string{"missing argument (usage: workq migrate up|down|status|version|sql)"}},
		{name: "migrate without a database", args: []string{"migrate", "up"}, want: []string{"DATABASE_URL is not set"}},
		{name: "stats without a database", args: []string{"stats"}, want: []string{"DATABASE_URL is not set"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.db {
				t.Setenv("DATABASE_URL", dbURL)
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var before string
			if tc.db {
				before = testdb.Snapshot(t, pool)
			}
			out, err := runCLIInput(t, strings.NewReader(tc.stdin), tc.args...)
			if err == nil {
				t.Fatalf("workq %q succeeded (stdout %q), want an error mentioning %q", tc.args, out, tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %.300q does not mention %q", err, w)
				}
			}
			if len(err.Error()) > 400 {
				t.Errorf("error is %d bytes long, want a short line: %.300q...", len(err.Error()), err)
			}
			if tc.db {
				if testdb.Snapshot(t, pool) != before {
					t.Errorf("a rejected command changed the database")
				}
			}
		})
	}
}

// TestCLISuccess runs the happy path of each data command against a real
// database and checks what it printed against what it wrote.
func TestCLISuccess(t *testing.T) {
	isolateEnv(t)
	dbURL := testdb.URL(t)
	t.Setenv("DATABASE_URL", dbURL)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	mustRun := func(t *testing.T, args ...string) string {
		t.Helper()
		out, err := runCLI(t, args...)
		if err != nil {
			t.Fatalf("workq %q: %v", args, err)
		}
		return out
	}

	t.Run("enqueue prints the id", func(t *testing.T) {
		out := mustRun(t, "enqueue", "--kind", "email.send", "--payload", `{"to":"a@example.com"}`, "--priority", "5", "--max-attempts", "7")
		id, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
		if err != nil {
			t.Fatalf("stdout %q is not an id", out)
		}
		var queue, kind, to string
		var priority int16
		var maxAttempts, status int
		err = conn.QueryRow(ctx, "select queue, kind, payload->>'to', priority, max_attempts, status from workq.job_runs_all where id = $1", id).
			Scan(&queue, &kind, &to, &priority, &maxAttempts, &status)
		if err != nil {
			t.Fatal(err)
		}
		if queue != "default" || kind != "email.send" || to != "a@example.com" || priority != 5 || maxAttempts != 7 || status != 0 {
			t.Errorf("row = %s %s %s priority %d max_attempts %d status %d", queue, kind, to, priority, maxAttempts, status)
		}
	})

	type enqueued struct {
		ID        int64 `json:"id"`
		Duplicate bool  `json:"duplicate"`
	}
	decode := func(t *testing.T, out string) enqueued {
		t.Helper()
		var raw map[string]json.RawMessage
		if err := json.Unmarshal([]byte(out), &raw); err != nil || len(raw) != 2 {
			t.Fatalf("stdout %q is not {\"id\":..,\"duplicate\":..}", out)
		}
		var e enqueued
		if err := json.Unmarshal([]byte(out), &e); err != nil {
			t.Fatal(err)
		}
		return e
	}
	t.Run("dedup key returns the live job", func(t *testing.T) {
		args := []string{"enqueue", "--json", "--kind", "report.build", "--queue", "reports", "--dedup-key", "report-2030-01"}
		first := decode(t, mustRun(t, args...))
		if first.ID == 0 || first.Duplicate {
			t.Fatalf("first enqueue = %+v, want a new id", first)
		}
		second := decode(t, mustRun(t, args...))
		if second != (enqueued{ID: first.ID, Duplicate: true}) {
			t.Fatalf("second enqueue = %+v, want {ID:%d Duplicate:true}", second, first.ID)
		}
		var n int
		if err := conn.QueryRow(ctx, "select count(*) from workq.job_runs_all where dedup_key = 'report-2030-01'").Scan(&n); err != nil || n != 1 {
			t.Fatalf("%d rows with the dedup key (%v), want 1", n, err)
		}
	})

	t.Run("lock list shows holder and token", func(t *testing.T) {
		if _, err := conn.Exec(ctx, `insert into workq.workq_locks (name, owner, token, expires_at, acquired_at, renewed_at)
			values ('cli-test', 'proc-7', 3, now() + interval '1 hour', now(), now())`); err != nil {
			t.Fatal(err)
		}
		var locks []lock.Info
		if err := json.Unmarshal([]byte(mustRun(t, "lock", "list", "--json")), &locks); err != nil {
			t.Fatal(err)
		}
		if len(locks) != 1 || locks[0].Name != "cli-test" || locks[0].Owner != "proc-7" || locks[0].Token != 3 || !locks[0].Held {
			t.Fatalf("lock list = %+v; want cli-test held by proc-7 with token 3", locks)
		}
		if out := mustRun(t, "lock", "list"); !strings.Contains(out, "cli-test") || !strings.Contains(out, "proc-7") {
			t.Fatalf("lock list table %q lacks the lock", out)
		}
	})

	t.Run("queue pause, list and resume", func(t *testing.T) {
		if out := mustRun(t, "queue", "pause", "job_runs", "reports", "--actor", "op:ada", "--reason", "deploy"); !strings.Contains(out, "job_runs/reports paused") {
			t.Fatalf("pause printed %q", out)
		}
		if out := mustRun(t, "queue", "pause", "job_runs", "reports"); !strings.Contains(out, "already paused") {
			t.Fatalf("second pause printed %q", out)
		}
		var rows []struct {
			Table    string `json:"table"`
			Queue    string `json:"queue"`
			Ready    int64  `json:"ready"`
			Paused   bool   `json:"paused"`
			PausedBy string `json:"paused_by"`
			Reason   string `json:"pause_reason"`
		}
		if err := json.Unmarshal([]byte(mustRun(t, "queue", "list", "--json")), &rows); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, r := range rows {
			if r.Table == "job_runs" && r.Queue == "reports" {
				found = r.Paused && r.PausedBy == "op:ada" && r.Reason == "deploy" && r.Ready == 1
			}
		}
		if !found {
			t.Fatalf("queue list %+v lacks job_runs/reports paused by op:ada with 1 ready", rows)
		}
		if out := mustRun(t, "queue", "list"); !strings.Contains(out, "paused by op:ada") {
			t.Fatalf("queue list table %q lacks the pause", out)
		}
		if out := mustRun(t, "queue", "resume", "job_runs", "reports"); !strings.Contains(out, "job_runs/reports running") {
			t.Fatalf("resume printed %q", out)
		}
		if _, err := runCLI(t, "queue", "pause", "nope", "q"); err == nil || !strings.Contains(err.Error(), "unknown work table") {
			t.Fatalf("pause of an unknown table: %v", err)
		}
		var n int
		if err := conn.QueryRow(ctx, "select count(*) from workq.queue_pauses").Scan(&n); err != nil || n != 0 {
			t.Fatalf("%d pauses left (%v), want 0", n, err)
		}
	})

	t.Run("stats counts the jobs as ready", func(t *testing.T) {
		var st []admin.Queue
		if err := json.Unmarshal([]byte(mustRun(t, "stats", "--json")), &st); err != nil {
			t.Fatal(err)
		}
		ready := map[string]int64{}
		for _, s := range st {
			if s.Table == "job_runs" {
				ready[s.Queue] = s.Ready
				if s.InProgress+s.Done+s.Failed != 0 {
					t.Errorf("stats %+v: only ready jobs exist", s)
				}
			}
		}
		if ready["default"] != 1 || ready["reports"] != 1 {
			t.Errorf("ready by queue = %v, want default 1 and reports 1", ready)
		}
	})

	type limit struct {
		WorkTable     string `json:"table"`
		Queue         string `json:"queue"`
		MaxInProgress int    `json:"max_in_progress"`
	}
	listLimits := func(t *testing.T) []limit {
		t.Helper()
		var got []limit
		if err := json.Unmarshal([]byte(mustRun(t, "limit", "list", "--json")), &got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	t.Run("limit set then list", func(t *testing.T) {
		mustRun(t, "limit", "set", "job_runs", "q", "3")
		if got := listLimits(t); len(got) != 1 || got[0] != (limit{"job_runs", "q", 3}) {
			t.Fatalf("limits = %+v, want job_runs/q = 3", got)
		}
		if out := mustRun(t, "limit", "list"); !strings.Contains(out, "job_runs") || !strings.Contains(out, "3") {
			t.Errorf("limit list = %q", out)
		}
		mustRun(t, "limit", "set", "job_runs", "q", "0")
		if got := listLimits(t); len(got) != 1 || got[0].MaxInProgress != 0 {
			t.Fatalf("limits after set 0 = %+v", got)
		}
		mustRun(t, "limit", "remove", "job_runs", "q")
		if got := listLimits(t); len(got) != 0 {
			t.Fatalf("limits after remove = %+v", got)
		}
	})

	t.Run("migrate status and version", func(t *testing.T) {
		var st []struct {
			Version int64 `json:"version"`
			Applied bool  `json:"applied"`
		}
		if err := json.Unmarshal([]byte(mustRun(t, "migrate", "status", "--json")), &st); err != nil {
			t.Fatal(err)
		}
		if len(st) == 0 || st[0].Version != 1 || !st[0].Applied {
			t.Fatalf("migrate status = %+v, want version 1 applied", st)
		}
		var v struct {
			Version int64 `json:"version"`
		}
		if err := json.Unmarshal([]byte(mustRun(t, "migrate", "version", "--json")), &v); err != nil || v.Version != st[len(st)-1].Version {
			t.Fatalf("migrate version = %+v (%v), want %d", v, err, st[len(st)-1].Version)
		}
	})

	t.Run("migrate sql prints the script for a schema", func(t *testing.T) {
		out := mustRun(t, "migrate", "sql", "--schema", "app_jobs", "--to", "2")
		for _, want := range []string{`create schema if not exists "app_jobs";`, `create table "app_jobs".job_runs`,
			`insert into "app_jobs"."workq_migrations" (version_id, is_applied) values (2, true);`} {
			if !strings.Contains(out, want) {
				t.Errorf("migrate sql lacks %q", want)
			}
		}
		if strings.Contains(out, "workq.") || strings.Contains(out, "values (3, true)") {
			t.Errorf("migrate sql --to 2 names workq. or goes past version 2")
		}
	})

	t.Run("config prints the settings table", func(t *testing.T) {
		out := mustRun(t, "config")
		for _, want := range []string{"| flag | environment | default | meaning |", "| `--lease` | `WORKQ_LEASE` |", "| `30s` |", "`--webhook-allow`"} {
			if !strings.Contains(out, want) {
				t.Errorf("config output lacks %q:\n%s", want, out)
			}
		}
	})
}

// TestCLIEnqueuePayloadSources: --payload takes the JSON itself, @FILE or -
// (standard input), and --max-payload / WORKQ_MAX_PAYLOAD set the limit.
func TestCLIEnqueuePayloadSources(t *testing.T) {
	isolateEnv(t)
	dbURL := testdb.URL(t)
	t.Setenv("DATABASE_URL", dbURL)
	dir := t.TempDir()
	fileJSON := filepath.Join(dir, "args.json")
	if err := os.WriteFile(fileJSON, []byte("{\"from\": \"file\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	big := `{"from":"` + strings.Repeat("x", 2<<20) + `"}`
	cases := []struct {
		name  string
		env   map[string]string
		stdin string
		args  []string
		want  string // payload->>'from'
	}{
		{name: "literal", args: []string{"--payload", `{"from":"literal"}`}, want: "literal"},
		{name: "file", args: []string{"--payload", "@" + fileJSON}, want: "file"},
		{name: "stdin", stdin: "{\"from\":\"stdin\"}\n", args: []string{"--payload", "-"}, want: "stdin"},
		{name: "default payload", args: nil, want: ""},
		{name: "limit raised by flag", stdin: big, args: []string{"--payload", "-", "--max-payload", "3000000"}, want: big[9 : len(big)-2]},
		{name: "limit raised by environment", env: map[string]string{"WORKQ_MAX_PAYLOAD": "3000000"}, stdin: big, args: []string{"--payload", "-"}, want: big[9 : len(big)-2]},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			out, err := runCLIInput(t, strings.NewReader(tc.stdin), append([]string{"enqueue", "--kind", "k"}, tc.args...)...)
			if err != nil {
				t.Fatalf("enqueue: %v", err)
			}
			id, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
			if err != nil {
				t.Fatalf("stdout %q is not an id", out)
			}
			conn, err := pgx.Connect(context.Background(), dbURL)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(context.Background())
			var from string
			var object bool
			if err := conn.QueryRow(context.Background(), "select coalesce(payload->>'from', ''), jsonb_typeof(payload) = 'object' from workq.job_runs_all where id = $1", id).Scan(&from, &object); err != nil {
				t.Fatal(err)
			}
			if from != tc.want || !object {
				t.Errorf("stored payload: object %v, from %.40q; want an object with from %.40q", object, from, tc.want)
			}
		})
	}
}
