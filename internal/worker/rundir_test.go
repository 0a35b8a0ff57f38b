package worker_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/worker"
)

// TestRuntimeRunDirModes: a worker makes the runs directory 0700 when it
// is missing, every attempt directory 0700 and its files 0600 (they hold
// payloads and owner tokens); in a runs directory an older version made
// (0755 directories, 0644 files) it restricts the table directories to
// their owner, which puts the old attempts out of other users' reach, and
// leaves the runs directory itself as the operator made it.
func TestRuntimeRunDirModes(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	mode := func(t *testing.T, p string, want os.FileMode) {
		t.Helper()
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %v, want %v", p, got, want)
		}
	}
	run := func(t *testing.T, runsDir, queue string) {
		t.Helper()
		cfg := rtConfig("modes-"+queue, queue)
		cfg.RunsDir = runsDir
		var results atomic.Int32
		w := startWorker(t, pool, cfg, worker.Options{OnResult: func(worker.Result) { results.Add(1) }}, map[string]worker.HandlerFunc{
			"modes": func(ctx context.Context, j *worker.Job) error { j.Logger().Info("logged"); return nil },
		})
		id := enqueue(t, pool, jobq.Job{Queue: queue, Kind: "modes", Payload: map[string]string{"secret": "payload"}})
		row := waitStatus(t, pool, id, lease.StatusDone, 10*time.Second)
		waitFor(t, 5*time.Second, "the result to be reported", func() bool { return results.Load() == 1 })
		w.stop(t, 30*time.Second)
		item := filepath.Join(runsDir, "job_runs", strconv.FormatInt(id, 10))
		runDir := filepath.Join(item, mustRunID(t, id, row.LeaseVersion).String())
		for _, d := range []string{filepath.Join(runsDir, "job_runs"), item, runDir} {
			mode(t, d, 0o700)
		}
		for _, f := range []string{"meta.json", "attempt.log"} {
			mode(t, filepath.Join(runDir, f), 0o600)
		}
	}

	t.Run("a new runs directory", func(t *testing.T) {
		runsDir := filepath.Join(t.TempDir(), "runs")
		run(t, runsDir, "modes_new")
		mode(t, runsDir, 0o700)
	})
	t.Run("a runs directory of an older version", func(t *testing.T) {
		runsDir := filepath.Join(t.TempDir(), "runs")
		oldRun := filepath.Join(runsDir, "job_runs", "999999", "old-run")
		for _, d := range []string{oldRun, filepath.Join(runsDir, "outbox")} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, f := range []string{"meta.json", "attempt.log"} {
			if err := os.WriteFile(filepath.Join(oldRun, f), []byte("old\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, d := range []string{runsDir, filepath.Join(runsDir, "job_runs"), filepath.Join(runsDir, "outbox"), filepath.Dir(oldRun), oldRun} {
			if err := os.Chmod(d, 0o755); err != nil { // whatever the umask
				t.Fatal(err)
			}
		}
		run(t, runsDir, "modes_old")
		mode(t, runsDir, 0o755) // the operator's
		mode(t, filepath.Join(runsDir, "outbox"), 0o700)
		if b, err := os.ReadFile(filepath.Join(oldRun, "attempt.log")); err != nil || string(b) != "old\n" {
			t.Errorf("the old attempt's log: %q, %v", b, err)
		}
	})
}
