package worker

import (
	"encoding/json"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workq/workq/internal/lease"
)

// TestRunArchiveWritesNoLink: a link planted in the runs directory, in
// place of any directory of an attempt's path or of its files, is never
// written through: nothing outside changes, nothing new appears there.
func TestRunArchiveWritesNoLink(t *testing.T) {
	const secret = "outside the runs directory\n"
	it := lease.Item{Table: lease.JobRuns, ID: 7, RunID: uuid.New(), OwnerToken: uuid.New(), Payload: json.RawMessage(`{"secret":"payload"}`)}
	rel := filepath.Join("job_runs", "7", it.RunID.String())
	cases := []struct {
		name  string
		plant func(t *testing.T, runs, outside string)
	}{
		{"table directory", func(t *testing.T, runs, outside string) { symlink(t, outside, filepath.Join(runs, "job_runs")) }},
		{"item directory", func(t *testing.T, runs, outside string) {
			mkdirAll(t, filepath.Join(runs, "job_runs"))
			symlink(t, outside, filepath.Join(runs, "job_runs", "7"))
		}},
		{"run directory", func(t *testing.T, runs, outside string) {
			mkdirAll(t, filepath.Join(runs, "job_runs", "7"))
			symlink(t, outside, filepath.Join(runs, rel))
		}},
		{"attempt.log", func(t *testing.T, runs, outside string) {
			mkdirAll(t, filepath.Join(runs, rel))
			symlink(t, filepath.Join(outside, "victim"), filepath.Join(runs, rel, "attempt.log"))
		}},
		{"meta.json and meta.json.tmp", func(t *testing.T, runs, outside string) {
			mkdirAll(t, filepath.Join(runs, rel))
			symlink(t, filepath.Join(outside, "victim"), filepath.Join(runs, rel, "meta.json.tmp"))
			symlink(t, filepath.Join(outside, "victim"), filepath.Join(runs, rel, "meta.json"))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			runs, outside := filepath.Join(base, "runs"), filepath.Join(base, "outside")
			mkdirAll(t, runs)
			mkdirAll(t, outside)
			if err := os.WriteFile(filepath.Join(outside, "victim"), []byte(secret), 0o644); err != nil {
				t.Fatal(err)
			}
			c.plant(t, runs, outside)
			a := &runArchive{dir: runs}
			rec := a.begin(&it, "w", slog.New(slog.DiscardHandler))
			if rec.file != nil {
				rec.file.Info("the handler's log line")
			}
			rec.end(Result{Outcome: lease.Done, Applied: true, Status: lease.StatusDone, Finished: time.Now()})
			var found []string
			if err := filepath.WalkDir(outside, func(p string, d fs.DirEntry, err error) error {
				if err == nil && p != outside {
					found = append(found, strings.TrimPrefix(p, outside))
				}
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if len(found) != 1 || found[0] != "/victim" {
				t.Errorf("outside holds %v, want only /victim", found)
			}
			if b, err := os.ReadFile(filepath.Join(outside, "victim")); err != nil || string(b) != secret {
				t.Errorf("the file outside was written: %q, %v", b, err)
			}
		})
	}
}

func symlink(t *testing.T, target, at string) {
	t.Helper()
	if err := os.Symlink(target, at); err != nil {
		t.Fatal(err)
	}
}

func mkdirAll(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestPruneRunsFollowsNoLink: links in place of a table, item or attempt
// directory, to old attempts outside, are left alone, and so is what they
// point at.
func TestPruneRunsFollowsNoLink(t *testing.T) {
	base := t.TempDir()
	runs, outside := filepath.Join(base, "runs"), filepath.Join(base, "outside")
	old := time.Now().Add(-48 * time.Hour)
	oldAttempt := func(p string) {
		t.Helper()
		mkdirAll(t, p)
		meta := filepath.Join(p, "meta.json")
		if err := os.WriteFile(meta, []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(meta, old, old); err != nil {
			t.Fatal(err)
		}
	}
	oldAttempt(filepath.Join(outside, "outbox", "1", "run-a")) // a table's worth
	oldAttempt(filepath.Join(outside, "item", "run-b"))        // an item's
	oldAttempt(filepath.Join(outside, "run-c"))                // an attempt's
	oldAttempt(filepath.Join(runs, "job_runs", "1", "run-d"))  // an old attempt of our own
	mkdirAll(t, filepath.Join(runs, "job_runs", "3"))
	symlink(t, filepath.Join(outside, "outbox"), filepath.Join(runs, "outbox"))
	symlink(t, filepath.Join(outside, "item"), filepath.Join(runs, "job_runs", "2"))
	symlink(t, filepath.Join(outside, "run-c"), filepath.Join(runs, "job_runs", "3", "run-c"))

	n, err := pruneRuns(runs, 24*time.Hour, 100, time.Now())
	if err != nil || n != 1 {
		t.Fatalf("pruned %d (%v), want 1 (run-d)", n, err)
	}
	for _, p := range []string{
		filepath.Join(outside, "outbox", "1", "run-a", "meta.json"), filepath.Join(outside, "item", "run-b", "meta.json"),
		filepath.Join(outside, "run-c", "meta.json"),
	} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	for _, p := range []string{filepath.Join(runs, "outbox"), filepath.Join(runs, "job_runs", "2"), filepath.Join(runs, "job_runs", "3", "run-c")} {
		if fi, err := os.Lstat(p); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("%s: %v, %v; want the link left", p, fi, err)
		}
	}
	if _, err := os.Stat(filepath.Join(runs, "job_runs", "1")); !os.IsNotExist(err) {
		t.Errorf("our old attempt's item directory: %v, want it removed", err)
	}
}
