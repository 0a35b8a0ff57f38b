package main

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/testdb"
)

// TestShowDoneItemView: `outbox|inbox|timers show` of a done item print
// the generic item view's last error and time (the Client's Get): no
// error of an earlier attempt, and when it finished rather than its last
// run_at.
func TestShowDoneItemView(t *testing.T) {
	isolateEnv(t)
	url := testdb.URL(t)
	t.Setenv("DATABASE_URL", url)
	for _, args := range [][]string{
		{"outbox", "send", "--topic", "t"},
		{"inbox", "receive", "--source", "s", "--message-id", "m"},
		{"timers", "schedule", "--topic", "t", "--in", "1h"},
	} {
		if _, err := runCLI(t, args...); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	for _, table := range []string{"outbox", "inbox", "timers"} {
		// Done after an attempt that failed: last_error stays in the row.
		if _, err := conn.Exec(t.Context(), "update workq."+table+
			" set status = 2, attempts = 2, finished_at = now(), last_error = 'stale boom' where id = 1"); err != nil {
			t.Fatal(err)
		}
		out, err := runCLI(t, table, "show", "1")
		if err != nil {
			t.Fatalf("%s show: %v", table, err)
		}
		if strings.Contains(out, "stale boom") || !strings.Contains(out, "finished at:") {
			t.Errorf("%s show of a done item: want no last error and its finished time, got\n%s", table, out)
		}
		if table == "outbox" {
			if out, err = runCLI(t, "outbox", "list"); err != nil || strings.Contains(out, "stale boom") || !strings.Contains(out, "RUN/ENDED AT") {
				t.Errorf("outbox list of a done message: want no last error and its end, got %v\n%s", err, out)
			}
		}
	}
}
