package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/workq/workq/internal/testdb"
)

// enqueue --limit-key stores the job's limit key, jobs show prints it,
// jobs list --limit-key lists its jobs only; an invalid or empty one is
// an error that writes nothing.
func TestCLIEnqueueLimitKey(t *testing.T) {
	isolateEnv(t)
	t.Setenv("DATABASE_URL", testdb.URL(t))
	run := func(args ...string) string {
		t.Helper()
		out, err := runCLI(t, args...)
		if err != nil {
			t.Fatalf("workq %s: %v", strings.Join(args, " "), err)
		}
		return out
	}
	var job struct{ ID int64 }
	if err := json.Unmarshal([]byte(run("enqueue", "--kind", "report", "--limit-key", "tenant-a", "--json")), &job); err != nil {
		t.Fatal(err)
	}
	run("enqueue", "--kind", "report")
	if show := run("jobs", "show", fmt.Sprint(job.ID)); !strings.Contains(show, "limit key") || !strings.Contains(show, "tenant-a") {
		t.Fatalf("show lacks the limit key:\n%s", show)
	}
	var page struct {
		Items []struct{ ID int64 } `json:"items"`
	}
	if err := json.Unmarshal([]byte(run("jobs", "list", "--limit-key", "tenant-a", "--json")), &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 1 || page.Items[0].ID != job.ID {
		t.Fatalf("list --limit-key tenant-a: %+v, want job %d only", page.Items, job.ID)
	}
	for _, c := range []struct{ key, want string }{
		{strings.Repeat("k", 257), "longer than 256 bytes"},
		{"", "--limit-key must not be empty"},
	} {
		if _, err := runCLI(t, "enqueue", "--kind", "report", "--limit-key", c.key); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("--limit-key %q: %v, want an error with %q", c.key, err, c.want)
		}
	}
	if err := json.Unmarshal([]byte(run("jobs", "list", "--json")), &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 2 {
		t.Fatalf("%d jobs after the refused enqueues, want 2", len(page.Items))
	}
}
