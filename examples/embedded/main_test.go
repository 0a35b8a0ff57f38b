package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/testutil"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// TestExample builds the example and runs it as a process against a fresh
// database: once stopping by itself (EXAMPLE_RUN_FOR) and once stopped by
// SIGTERM. Both times its jobs must have reached their end in the database
// and the process must exit 0.
func TestExample(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the example: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "embedded")
	if out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	t.Run("stops by itself after EXAMPLE_RUN_FOR", func(t *testing.T) {
		t.Parallel()
		url := testdb.URL(t)
		cmd, stderr := start(t, bin, url, "6s")
		waitExit(t, cmd, stderr, 60*time.Second)
		checkOutcome(t, url, stderr.String())
	})

	t.Run("stops gracefully on SIGTERM", func(t *testing.T) {
		t.Parallel()
		url := testdb.URL(t)
		cmd, stderr := start(t, bin, url, "")
		conn := connect(t, url)
		deadline := time.Now().Add(30 * time.Second)
		for {
			var open int
			// Before the example creates its table, the query fails: keep polling.
			err := conn.QueryRow(context.Background(),
				"select count(*) filter (where status < 2) from workq.job_runs_all where exists (select from example_orders) having count(*) = 6").Scan(&open)
			if err == nil && open == 0 {
				break
			}
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				t.Fatalf("the example's jobs did not finish in 30s (last poll: %v)\n%s", err, stderr.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		waitExit(t, cmd, stderr, 20*time.Second)
		if !strings.Contains(stderr.String(), "shutting down") {
			t.Errorf("no graceful shutdown in the log:\n%s", stderr.String())
		}
		checkOutcome(t, url, stderr.String())
	})
}

// start runs the example binary with only the environment it is meant to see.
func start(t *testing.T, bin, url, runFor string) (*exec.Cmd, *testutil.Buffer) {
	t.Helper()
	cmd := exec.Command(bin)
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k != "DATABASE_URL" && k != "EXAMPLE_RUN_FOR" && !strings.HasPrefix(k, "WORKQ_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "DATABASE_URL="+url)
	if runFor != "" {
		cmd.Env = append(cmd.Env, "EXAMPLE_RUN_FOR="+runFor)
	}
	stderr := &testutil.Buffer{}
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd, stderr
}

func waitExit(t *testing.T, cmd *exec.Cmd, out *testutil.Buffer, limit time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("example exited with %v:\n%s", err, out.String())
		}
	case <-time.After(limit):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("example still running after %s:\n%s", limit, out.String())
	}
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// checkOutcome asserts what the example's demo orders must have left in the
// database.
func checkOutcome(t *testing.T, url, log string) {
	t.Helper()
	ctx := context.Background()
	conn := connect(t, url)
	defer func() {
		if t.Failed() {
			t.Logf("example log:\n%s", log)
		}
	}()

	// Every committed order has exactly one email job; the declined order
	// left neither an order nor a job behind.
	rows, err := conn.Query(ctx, `
		select o.email, o.confirmation_sent_at is not null, j.status, j.attempts, coalesce(j.last_error, '')
		from example_orders o
		left join workq.job_runs_all j on j.kind = 'email.send' and (j.payload->>'order_id')::bigint = o.id
		order by o.id`)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		sent      bool
		status    *int16
		attempts  *int32
		lastError string
	}
	got := map[string]result{}
	var order []string
	for rows.Next() {
		var email string
		var r result
		if err := rows.Scan(&email, &r.sent, &r.status, &r.attempts, &r.lastError); err != nil {
			t.Fatal(err)
		}
		if _, dup := got[email]; dup {
			t.Errorf("%s has more than one order or email job", email)
		}
		got[email] = r
		order = append(order, email)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{"ada@example.com", "grace@example.com", "linus@example.com", "margaret@example.com", "barbara@example.com", "not-an-address"}
	if strings.Join(order, ",") != strings.Join(want, ",") {
		t.Fatalf("orders %v, want %v (the declined order must be rolled back)", order, want)
	}
	for _, email := range want[:5] {
		r := got[email]
		// Snoozes on the provider's rate limit give their attempt back, so
		// every email was sent at the first counted attempt.
		if r.status == nil || *r.status != 2 || *r.attempts != 1 || !r.sent {
			t.Errorf("%s: job status %v attempts %v, confirmation recorded %v; want done after 1 attempt, recorded", email, deref(r.status), deref(r.attempts), r.sent)
		}
	}
	bad := got["not-an-address"]
	if bad.status == nil || *bad.status != 3 || *bad.attempts != 1 || bad.sent || !strings.Contains(bad.lastError, `bad address "not-an-address"`) {
		t.Errorf("bad address: job status %v attempts %v error %q, sent %v; want failed permanently at once", deref(bad.status), deref(bad.attempts), bad.lastError, bad.sent)
	}
	var jobs, snoozed int
	if err := conn.QueryRow(ctx, "select (select count(*) from workq.job_runs_all), (select count(*) from workq.runs where work_table = 'job_runs' and outcome = 'snoozed')").Scan(&jobs, &snoozed); err != nil {
		t.Fatal(err)
	}
	if jobs != 6 {
		t.Errorf("%d job runs, want 6 (one per committed order)", jobs)
	}
	// 5 sends at 3 per second: at least two had to wait for the next second.
	if snoozed < 2 {
		t.Errorf("%d snoozed attempts, want at least 2", snoozed)
	}
	for _, want := range []string{"order declined", "snoozing", "user service stopped"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q", want)
		}
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
