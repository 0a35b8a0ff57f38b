package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/testdb"
)

// workq jobs list|show|retry|cancel|delete, and the same verbs on the other
// tables, end to end on a real database.
func TestItemVerbs(t *testing.T) {
	isolateEnv(t)
	url := testdb.URL(t)
	t.Setenv("DATABASE_URL", url)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	run := func(args ...string) string {
		t.Helper()
		out, err := runCLI(t, args...)
		if err != nil {
			t.Fatalf("workq %s: %v", strings.Join(args, " "), err)
		}
		return out
	}
	var ids []int64
	for i := 0; i < 3; i++ {
		var r struct{ ID int64 }
		if err := json.Unmarshal([]byte(run("enqueue", "--queue", "mail", "--kind", "email.send", "--json")), &r); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}

	// Pages of two, newest first, through the cursor.
	var p admin.Page
	if err := json.Unmarshal([]byte(run("jobs", "list", "--queue", "mail", "--limit", "2", "--json")), &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != 2 || p.Items[0].ID != ids[2] || p.Next != ids[1] {
		t.Fatalf("first page %+v", p)
	}
	next := p.Next
	p = admin.Page{}
	if err := json.Unmarshal([]byte(run("jobs", "list", "--queue", "mail", "--limit", "2", "--before", fmt.Sprint(next), "--json")), &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != 1 || p.Items[0].ID != ids[0] || p.Next != 0 {
		t.Fatalf("second page %+v", p)
	}
	if out := run("jobs", "list", "--kind", "email.send"); !strings.Contains(out, "email.send") || !strings.Contains(out, "ready") {
		t.Fatalf("list table: %q", out)
	}

	// Cancel one ready job; a second cancel of it leaves it alone and fails.
	id := fmt.Sprint(ids[0])
	if out := run("jobs", "cancel", id, "--actor", "op:ada", "--reason", "dup"); out != "cancelled "+id+"\n" {
		t.Fatalf("cancel printed %q", out)
	}
	if _, err := runCLI(t, "jobs", "cancel", id); err == nil || !strings.Contains(err.Error(), "job run "+id+" is cancelled; only ready or running job runs can be cancelled") {
		t.Fatalf("second cancel: %v", err)
	}
	show := run("jobs", "show", id)
	for _, want := range []string{"cancelled by op:ada: dup", "cancelled", "op:ada"} {
		if !strings.Contains(show, want) {
			t.Fatalf("show lacks %q:\n%s", want, show)
		}
	}
	// Delete refuses ready jobs, takes the cancelled one.
	var del map[string][]int64
	out, err := runCLI(t, "jobs", "delete", id, fmt.Sprint(ids[1]), "--json")
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("job run %d is ready; only finished", ids[1])) {
		t.Fatalf("delete of a ready job: %v", err)
	}
	if err := json.Unmarshal([]byte(out), &del); err != nil || !slices.Equal(del["deleted"], []int64{ids[0]}) || !slices.Equal(del["not_finished"], []int64{ids[1]}) {
		t.Fatalf("delete printed %q (%v)", out, err)
	}
	if _, err := runCLI(t, "jobs", "show", id); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("show of a deleted job: %v", err)
	}

	// Retry undoes a cancel, on another table.
	var tm struct{ ID int64 }
	if err := json.Unmarshal([]byte(run("timers", "schedule", "--topic", "trial.end", "--in", "1h", "--json")), &tm); err != nil {
		t.Fatal(err)
	}
	run("timers", "cancel", fmt.Sprint(tm.ID))
	if out := run("timers", "retry", fmt.Sprint(tm.ID)); out != fmt.Sprintf("retried %d\n", tm.ID) {
		t.Fatalf("timers retry printed %q", out)
	}
	var st int16
	if err := conn.QueryRow(ctx, "select status from workq.timers where id = $1", tm.ID).Scan(&st); err != nil || st != 0 {
		t.Fatalf("retried timer status %d (%v)", st, err)
	}

	// Bad input is refused before the database is touched.
	for _, args := range [][]string{
		{"jobs", "cancel", "0"}, {"jobs", "cancel", "x"}, {"jobs", "retry", "5", "5"}, {"jobs", "cancel", "5", "--actor", " "},
		{"jobs", "list", "--status", "gone"}, {"jobs", "list", "--limit", "0"}, {"jobs", "list", "--created-after", "yesterday"},
		{"outbox", "cancel", "-1"}, {"inbox", "delete"},
	} {
		if _, err := runCLI(t, args...); err == nil {
			t.Errorf("workq %s succeeded", strings.Join(args, " "))
		}
	}
	var n int
	if err := conn.QueryRow(ctx, "select count(*) from workq.job_runs_all where status = 0").Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d ready jobs (%v), want 2", n, err)
	}
}

// Metadata given to enqueue is shown by show; a unique enqueue returns the
// job that holds its key.
func TestCLIEnqueueMetadataAndUnique(t *testing.T) {
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
	var first, again struct {
		ID        int64
		Duplicate bool
	}
	args := []string{"enqueue", "--kind", "report", "--unique-by-args", "--unique-states", "ready,in_progress,done", "--json"}
	if err := json.Unmarshal([]byte(run(append(args, "--metadata", "tenant=acme", "--metadata", "note=a=b")...)), &first); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(run(args...)), &again); err != nil {
		t.Fatal(err)
	}
	if first.Duplicate || !again.Duplicate || again.ID != first.ID {
		t.Fatalf("unique enqueue: %+v then %+v", first, again)
	}
	show := run("jobs", "show", fmt.Sprint(first.ID))
	for _, want := range []string{"metadata note    a=b", "metadata tenant  acme", "unique states"} {
		if !strings.Contains(show, want) {
			t.Fatalf("show lacks %q:\n%s", want, show)
		}
	}
}
