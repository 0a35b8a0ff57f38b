package ui_test

import (
	"bytes"
	"context"
	"html"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/config"
	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/worker"
)

// archived runs n jobs through a real worker writing runsDir and returns
// each job's id and the run id of its (one) attempt. Each job logs
// "handler log of job <i>".
func archived(t *testing.T, pool *pgxpool.Pool, runsDir string, n int) (ids []int64, runIDs []string) {
	t.Helper()
	ctx := context.Background()
	cfg := config.Default()
	cfg.Queues, cfg.RunsDir, cfg.Poll, cfg.WorkerID = []string{"logs"}, runsDir, 100*time.Millisecond, "rundir-test-worker"
	w, err := worker.New(pool, cfg.Worker(), worker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Register("log", func(ctx context.Context, j *worker.Job) error {
		var p struct{ I int }
		if err := j.Decode(&p); err != nil {
			return err
		}
		j.Logger().Info("handler log of job " + strconv.Itoa(p.I))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	jobs := make([]jobq.Job, n)
	for i := range jobs {
		jobs[i] = jobq.Job{Queue: "logs", Kind: "log", Payload: map[string]any{"i": i}}
	}
	ids = enqueue(t, pool, jobs...)
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	awaitCond(t, 60*time.Second, "the worker does every job", func() bool {
		var left int
		return pool.QueryRow(ctx, `select count(*) from workq.job_runs_all where queue = 'logs' and status <> 2`).Scan(&left) == nil && left == 0
	})
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		var runID string
		if err := pool.QueryRow(ctx, `select workq.workq_run_id('job_runs', id, lease_version)::text from workq.job_runs_all where id = $1`, id).Scan(&runID); err != nil {
			t.Fatal(err)
		}
		runIDs = append(runIDs, runID)
	}
	return ids, runIDs
}

// environ is the entries of this process's initial environment, as
// /proc/self/environ shows them, of at least 8 bytes.
func environ(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/environ")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range bytes.Split(b, []byte{0}) {
		if len(e) >= 8 {
			out = append(out, string(e))
		}
	}
	if len(out) == 0 {
		t.Fatal("/proc/self/environ has no entry to look for")
	}
	return out
}

// TestAttemptLogStaysInRunsDir: whatever is planted in the runs directory
// (links out of it, or within it, a hard link, a FIFO), a read session's
// item page shows no content from anywhere but the attempt's own
// attempt.log, and no request hangs.
func TestAttemptLogStaysInRunsDir(t *testing.T) {
	base := t.TempDir()
	runsDir, outside := filepath.Join(base, "runs"), filepath.Join(base, "outside")
	const secret = "TOP-SECRET-outside-the-runs-dir"
	secretFile := filepath.Join(outside, "secret.txt")
	for _, p := range []string{secretFile, filepath.Join(outside, "run", "attempt.log"), filepath.Join(outside, "item", "RUN", "attempt.log")} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(secret+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := newSite(t, func(o *siteSetup) { o.RunsDir = runsDir })
	ids, runIDs := archived(t, s.pool, runsDir, 9)
	runDir := func(i int) string { return filepath.Join(runsDir, "job_runs", itoa(ids[i]), runIDs[i]) }
	logOf := func(i int) string { return filepath.Join(runDir(i), "attempt.log") }
	link := func(target, at string) {
		t.Helper()
		if err := os.RemoveAll(at); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, at); err != nil {
			t.Fatal(err)
		}
	}

	b := s.browser()
	b.c.Timeout = 60 * time.Second // a request blocked on a FIFO fails the test
	b.login(s.read)
	page := func(i int) string {
		t.Helper()
		p := b.get("/ui/items/job_runs/" + itoa(ids[i]))
		must(t, p, 200, `id="attempts"`, `class="outcome o-done"`)
		return p.body
	}
	shown := func(i int) string { return html.EscapeString("handler log of job " + strconv.Itoa(i)) }
	for i := range ids {
		must(t, b.get("/ui/items/job_runs/"+itoa(ids[i])), 200, shown(i), "attempt.log of run "+runIDs[i])
	}

	plants := []struct {
		name  string
		plant func(i int)
	}{
		{"attempt.log a link to a file outside", func(i int) { link(secretFile, logOf(i)) }},
		{"attempt.log a link to /etc/passwd", func(i int) { link("/etc/passwd", logOf(i)) }},
		{"attempt.log a link to /proc/self/environ", func(i int) { link("/proc/self/environ", logOf(i)) }},
		{"the run directory a link to a directory outside", func(i int) { link(filepath.Join(outside, "run"), runDir(i)) }},
		{"the item directory a link to a directory outside", func(i int) {
			// holding <run id>/attempt.log
			if err := os.Rename(filepath.Join(outside, "item", "RUN"), filepath.Join(outside, "item", runIDs[i])); err != nil {
				t.Fatal(err)
			}
			link(filepath.Join(outside, "item"), filepath.Dir(runDir(i)))
		}},
		{"attempt.log a link to another attempt's log", func(i int) { link(logOf(0), logOf(i)) }},
		{"attempt.log a hard link to a file outside", func(i int) {
			if err := os.Remove(logOf(i)); err != nil {
				t.Fatal(err)
			}
			if err := os.Link(secretFile, logOf(i)); err != nil {
				t.Fatal(err)
			}
		}},
		{"attempt.log a FIFO", func(i int) {
			if err := os.Remove(logOf(i)); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mkfifo(logOf(i), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	}
	env := environ(t)
	foreign := func(t *testing.T, body string) {
		t.Helper()
		for _, bad := range []string{secret, "root:x:0:0", shown(0)} {
			if strings.Contains(body, bad) {
				t.Errorf("the page shows %q", bad)
			}
		}
		shownEnv := 0
		for _, e := range env {
			if strings.Contains(body, html.EscapeString(e)) {
				shownEnv++
			}
		}
		if shownEnv > 0 { // which ones is not logged: they may be secrets
			t.Errorf("the page shows %d entries of the API's environment", shownEnv)
		}
		if strings.Contains(body, "attempt.log of run") {
			t.Error("the page shows a log")
		}
	}
	for n, c := range plants {
		i := n + 1 // job 0 stays as the worker wrote it
		t.Run(c.name, func(t *testing.T) {
			c.plant(i)
			foreign(t, page(i))
		})
	}
	must(t, b.get("/ui/items/job_runs/"+itoa(ids[0])), 200, shown(0))

	// A link further up: the table directory moved outside, a link left.
	t.Run("the table directory a link to a directory outside", func(t *testing.T) {
		moved := filepath.Join(outside, "job_runs")
		if err := os.Rename(filepath.Join(runsDir, "job_runs"), moved); err != nil {
			t.Fatal(err)
		}
		link(moved, filepath.Join(runsDir, "job_runs"))
		body := page(0)
		if strings.Contains(body, shown(0)) || strings.Contains(body, "attempt.log of run") {
			t.Error("the page shows a log read through the linked table directory")
		}
	})
}
