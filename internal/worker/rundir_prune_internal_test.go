package worker

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestPruneRuns(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	write := func(rel string, age time.Duration) string {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		meta := filepath.Join(p, "meta.json")
		if err := os.WriteFile(meta, []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(meta, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
		return p
	}
	oldA := write("job_runs/1/run-a", 48*time.Hour)
	oldB := write("job_runs/1/run-b", 30*time.Hour)
	recent := write("job_runs/2/run-c", time.Hour)
	oldOther := write("outbox/7/run-d", 72*time.Hour)
	starting := filepath.Join(dir, "job_runs", "3", "run-e") // no meta.json yet: an attempt beginning
	if err := os.MkdirAll(starting, 0o755); err != nil {
		t.Fatal(err)
	}

	// A round removes at most max directories; the next goes on.
	n, err := pruneRuns(dir, 24*time.Hour, 2, now)
	if err != nil || n != 2 {
		t.Fatalf("first round removed %d (%v), want 2", n, err)
	}
	n, err = pruneRuns(dir, 24*time.Hour, 2, now)
	if err != nil || n != 1 {
		t.Fatalf("second round removed %d (%v), want 1", n, err)
	}
	for _, p := range []string{oldA, oldB, oldOther, filepath.Dir(oldA), filepath.Dir(oldOther)} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s still exists (%v)", p, err)
		}
	}
	for _, p := range []string{recent, starting} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
	if n, err := pruneRuns(filepath.Join(dir, "missing"), time.Hour, 10, now); n != 0 || err != nil {
		t.Fatalf("missing dir: %d, %v", n, err)
	}
}
