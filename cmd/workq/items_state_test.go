package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/testutil"
)

// What the real binary says about finished job runs: a retry of a done one
// and of a missing one fail with different messages; a done job shows the
// error of its earlier attempt only among its attempts; a failed one shows
// when it ended, not a run_at after it.
func TestFinishedJobRunsThroughTheBinary(t *testing.T) {
	isolateEnv(t)
	bin := testutil.BuildWorkq(t, "../..")
	url := testdb.URL(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	enqueue := func(maxAttempts int) int64 {
		t.Helper()
		var id int64
		if err := pool.QueryRow(ctx, `insert into workq.job_runs (queue, kind, payload, max_attempts) values ('mail', 'email.send', '{}', $1) returning id`,
			maxAttempts).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	e := lease.New(pool, lease.JobRuns)
	attempt := func(id int64, out lease.Outcome, msg string) {
		t.Helper()
		it, ok, err := e.ClaimByID(ctx, id, time.Minute, "w1")
		if err != nil || !ok {
			t.Fatalf("claim %d: %v %v", id, ok, err)
		}
		if _, err := e.Complete(ctx, []lease.Completion{{ID: id, Token: it.OwnerToken, Outcome: out, Error: msg}}); err != nil {
			t.Fatal(err)
		}
	}
	// done: failed once ("smtp timeout"), then succeeded.
	done := enqueue(3)
	attempt(done, lease.Retry, "smtp timeout")
	attempt(done, lease.Done, "")
	// failed, with the future run_at a failed job got before LeaseComplete
	// kept it (rows written by an older version keep it).
	failed := enqueue(1)
	attempt(failed, lease.Failed, "bad address")
	if _, err := pool.Exec(ctx, `update workq.job_runs set run_at = now() + interval '1 hour' where id = $1`, failed); err != nil {
		t.Fatal(err)
	}
	const missing = 999999
	run := func(args ...string) (string, string, int) {
		t.Helper()
		return runBinary(t, bin, url, args...)
	}
	only := "only failed or cancelled job runs can be retried"

	t.Run("retry", func(t *testing.T) {
		cases := []struct {
			name   string
			args   []string
			stderr string // all of it
		}{
			{"a done job", []string{fmt.Sprint(done)},
				fmt.Sprintf("workq jobs retry: job run %d is done; %s\n", done, only)},
			{"a missing job", []string{fmt.Sprint(missing)},
				fmt.Sprintf("workq jobs retry: job run %d not found\n", missing)},
			{"both", []string{fmt.Sprint(done), fmt.Sprint(missing)},
				fmt.Sprintf("workq jobs retry: job run %d not found; job run %d is done; %s\n", missing, done, only)},
			{"several of each", []string{fmt.Sprint(done), "999998", fmt.Sprint(missing)},
				fmt.Sprintf("workq jobs retry: 2 job runs not found: 999998, %d; job run %d is done; %s\n", missing, done, only)},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				stdout, stderr, code := run(append([]string{"jobs", "retry"}, c.args...)...)
				if code != 1 || stderr != c.stderr || stdout != "" {
					t.Fatalf("exit %d, stdout %q, stderr %q; want exit 1 and stderr %q", code, stdout, stderr, c.stderr)
				}
			})
		}
		stdout, _, code := run("jobs", "retry", fmt.Sprint(done), fmt.Sprint(missing), "--json")
		var got map[string][]int64
		if err := json.Unmarshal([]byte(stdout), &got); code != 1 || err != nil ||
			fmt.Sprint(got["not_found"]) != fmt.Sprint([]int64{missing}) || fmt.Sprint(got["not_failed"]) != fmt.Sprint([]int64{done, missing}) {
			t.Fatalf("--json: exit %d, %q (%v)", code, stdout, err)
		}
	})

	t.Run("show a done job", func(t *testing.T) {
		stdout, stderr, code := run("jobs", "show", fmt.Sprint(done))
		item, attempts, _ := strings.Cut(stdout, "ATTEMPTS")
		if code != 0 || strings.Contains(item, "smtp timeout") || strings.Contains(item, "last error") || !strings.Contains(attempts, "smtp timeout") {
			t.Fatalf("exit %d, stderr %q; want the earlier error among the attempts only:\n%s", code, stderr, stdout)
		}
		stdout, _, _ = run("jobs", "show", fmt.Sprint(done), "--json")
		var got struct {
			Item     map[string]any
			Attempts []map[string]any
		}
		if err := json.Unmarshal([]byte(stdout), &got); err != nil || got.Item["last_error"] != nil || len(got.Attempts) != 2 || got.Attempts[0]["error"] != "smtp timeout" {
			t.Fatalf("--json: %s (%v)", stdout, err)
		}
	})

	t.Run("a failed job ended", func(t *testing.T) {
		var finished time.Time
		if err := pool.QueryRow(ctx, `select finished_at from workq.job_runs_all where id = $1`, failed).Scan(&finished); err != nil {
			t.Fatal(err)
		}
		stdout, _, code := run("jobs", "show", fmt.Sprint(failed))
		if code != 0 || strings.Contains(stdout, "run at") || !strings.Contains(stdout, "finished at") || !strings.Contains(stdout, "bad address") {
			t.Fatalf("exit %d; want finished at and the error, no run at:\n%s", code, stdout)
		}
		stdout, _, code = run("jobs", "list", "--status", "failed")
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		if code != 0 || len(lines) != 2 || !strings.Contains(lines[0], "RUN/ENDED AT") ||
			!strings.Contains(lines[1], finished.UTC().Format(time.RFC3339)) && !strings.Contains(lines[1], finished.Local().Format(time.RFC3339)) {
			t.Fatalf("exit %d; want the failed job's row with its end (%s):\n%s", code, finished.Format(time.RFC3339), stdout)
		}
		stdout, _, _ = run("jobs", "list", "--status", "done")
		if strings.Contains(stdout, "smtp timeout") {
			t.Fatalf("the done job's row shows its earlier error:\n%s", stdout)
		}
	})
}
