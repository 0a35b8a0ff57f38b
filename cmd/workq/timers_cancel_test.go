package main

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/testdb"
)

// TestTimersCancelRunning: `timers cancel` refuses a claimed timer, and
// with --running requests its cancel (the Client's Cancel).
func TestTimersCancelRunning(t *testing.T) {
	isolateEnv(t)
	url := testdb.URL(t)
	t.Setenv("DATABASE_URL", url)
	if _, err := runCLI(t, "timers", "schedule", "--topic", "t", "--in", "1h"); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	// Claimed by a worker (its lease an hour long).
	if _, err := conn.Exec(t.Context(), "update workq.timers set status = 1, attempts = 1, claimed_by = 'w', owner_token = gen_random_uuid(), "+
		"locked_until = now() + interval '1 hour', lease_version = lease_version + 1 where id = 1"); err != nil {
		t.Fatal(err)
	}
	if out, err := runCLI(t, "timers", "cancel", "1"); err == nil {
		t.Fatalf("cancel of a claimed timer without --running: %q, want an error", out)
	}
	out, err := runCLI(t, "timers", "cancel", "1", "--running", "--actor", "ops")
	if err != nil || !strings.Contains(out, "cancel requested") {
		t.Fatalf("cancel --running: %q, %v; want the cancel requested", out, err)
	}
	if _, err := runCLI(t, "timers", "cancel", "1", "--running", "--actor", " "); err == nil || !strings.Contains(err.Error(), "--actor") {
		t.Fatalf("cancel --running with a blank actor: %v, want an --actor error", err)
	}
}
