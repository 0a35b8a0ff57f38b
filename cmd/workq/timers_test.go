package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/testdb"
)

func TestCLITimers(t *testing.T) {
	isolateEnv(t)
	url := testdb.URL(t)
	db := "--database-url=" + url
	count := func() int {
		t.Helper()
		conn, err := pgx.Connect(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		var n int
		if err := conn.QueryRow(context.Background(), "select count(*) from workq.timers").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// Bad input: a clear error, nothing written.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"timers", "schedule", db, "--in", "1m"}, "--topic is required"},
		{[]string{"timers", "schedule", db, "--topic", "t"}, "give --at TIME or --in DURATION"},
		{[]string{"timers", "schedule", db, "--topic", "t", "--in", "1m", "--at", "2030-01-01T00:00:00Z"}, "not both"},
		{[]string{"timers", "schedule", db, "--topic", "t", "--at", "tomorrow"}, "not an RFC 3339 time"},
		{[]string{"timers", "schedule", db, "--topic", "t", "--at", "0000-01-01T00:00:00Z"}, "due time 0000-01-01T00:00:00Z is out of range"},
		{[]string{"timers", "schedule", db, "--topic", "t", "--at", "9999-12-31T23:59:59-00:01"}, "is out of range"},
		{[]string{"timers", "schedule", db, "--topic", "t", "--in", "-5s"}, "--in must be positive"},
		{[]string{"timers", "schedule", db, "--topic", "t", "--in", "1m", "--payload", "[1]"}, "JSON object"},
		{[]string{"timers", "schedule", db, "--topic", "t", "--in", "1m", "--payload", "@/nonexistent/x.json"}, "no such file"},
		{[]string{"timers", "schedule", db, "--topic", "t", "--in", "1m", "--queue", "a b"}, "not a valid name"},
		{[]string{"timers", "schedule", db, "--topic", "t", "--in", "1m", "--max-attempts", "0"}, "--max-attempts"},
		{[]string{"timers", "cancel", db, "x"}, "positive whole number"},
		{[]string{"timers", "cancel", db, "424242"}, "timer not found"},
		{[]string{"timers", "show", db, "424242"}, "timer not found"},
		{[]string{"timers", "list", db, "--state", "sleeping"}, "not one of"},
		{[]string{"timers", "list", db, "--limit", "0"}, "--limit"},
		{[]string{"timers", "list", db, "--due-before", "soon"}, "not an RFC 3339 time"},
	} {
		if _, err := runCLI(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want it to mention %q", tc.args, err, tc.want)
		}
	}
	if n := count(); n != 0 {
		t.Fatalf("%d timers written by rejected commands", n)
	}

	// schedule: --in, --at in the past (due now), payload from a file and stdin.
	out, err := runCLI(t, "timers", "schedule", db, "--topic", "remind", "--in", "1h", "--payload", `{"n":1}`, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		ID     int64     `json:"id"`
		Due    time.Time `json:"due_time"`
		DueNow bool      `json:"due_now"`
	}
	if err := json.Unmarshal([]byte(out), &s); err != nil || s.ID == 0 || s.DueNow {
		t.Fatalf("schedule --json: %q (%v)", out, err)
	}
	file := filepath.Join(t.TempDir(), "p.json")
	if err := os.WriteFile(file, []byte(`{"from":"file"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = runCLI(t, "timers", "schedule", db, "--topic", "past", "--queue", "q2", "--at", "2001-01-01T00:00:00Z", "--payload", "@"+file, "--max-attempts", "2")
	if err != nil {
		t.Fatal(err)
	}
	pastID, _ := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	out, err = runCLIInput(t, strings.NewReader(`{"from":"stdin"}`), "timers", "schedule", db, "--topic", "stdin", "--in", "2h", "--payload", "-")
	if err != nil {
		t.Fatal(err)
	}
	stdinID, _ := strconv.ParseInt(strings.TrimSpace(out), 10, 64)

	// show
	out, err = runCLI(t, "timers", "show", db, strconv.FormatInt(pastID, 10), "--json")
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Topic, Queue, State string
		Payload             map[string]string
		MaxAttempts         int `json:"max_attempts"`
		History             []any
	}
	if err := json.Unmarshal([]byte(out), &info); err != nil || info.Topic != "past" || info.Queue != "q2" ||
		info.State != "ready" || info.Payload["from"] != "file" || info.MaxAttempts != 2 || info.History == nil {
		t.Fatalf("show --json: %s (%v)", out, err)
	}

	// cancel, twice (idempotent), then list by state.
	for range 2 {
		if out, err = runCLI(t, "timers", "cancel", db, strconv.FormatInt(s.ID, 10)); err != nil || !strings.Contains(out, "cancelled") {
			t.Fatalf("cancel: %q %v", out, err)
		}
	}
	out, err = runCLI(t, "timers", "list", db, "--state", "cancelled", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var list []struct{ ID int64 }
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 1 || list[0].ID != s.ID {
		t.Fatalf("list --state cancelled: %s (%v)", out, err)
	}
	// Keyset pagination: one per page, in id order.
	var ids []int64
	after := int64(0)
	for {
		out, err = runCLI(t, "timers", "list", db, "--limit", "1", "--after-id", strconv.FormatInt(after, 10), "--json")
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			t.Fatal(err)
		}
		if len(list) == 0 {
			break
		}
		after = list[0].ID
		ids = append(ids, after)
	}
	if len(ids) != 3 || ids[0] != s.ID || ids[1] != pastID || ids[2] != stdinID {
		t.Fatalf("pages: %v, want %d %d %d", ids, s.ID, pastID, stdinID)
	}
	// Due-time filters and the table output.
	out, err = runCLI(t, "timers", "list", db, "--due-before", "2020-01-01T00:00:00Z")
	if err != nil || !strings.Contains(out, "past") || strings.Contains(out, "stdin") {
		t.Fatalf("list --due-before: %q %v", out, err)
	}
	out, err = runCLI(t, "timers", "list", db, "--due-after", "2020-01-01T00:00:00Z", "--topic", "stdin", "--json")
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 || list[0].ID != stdinID {
		t.Fatalf("list --due-after --topic: %q %v", out, err)
	}
}
