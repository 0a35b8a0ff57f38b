package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq"
	"github.com/workq/workq/inbox"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/workqtype"
)

func TestInboxCLI(t *testing.T) {
	isolateEnv(t)
	url := testdb.URL(t)
	t.Setenv("DATABASE_URL", url)

	out, err := runCLI(t, "inbox", "receive", "--source", "shop", "--message-id", "o-1", "--topic", "order.created", "--payload", `{"order": 1}`)
	if err != nil || strings.TrimSpace(out) != "new 1" {
		t.Fatalf("receive: %q, %v; want new 1", out, err)
	}
	// The same payload from a file and from standard input: duplicates.
	file := filepath.Join(t.TempDir(), "p.json")
	if err := os.WriteFile(file, []byte(`{ "order" : 1 }`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = runCLI(t, "inbox", "receive", "--source", "shop", "--message-id", "o-1", "--payload", "@"+file, "--json")
	var res inboxResult
	if err != nil || json.Unmarshal([]byte(out), &res) != nil || res.Result != "duplicate" || res.ID != 1 || res.Status != "ready" {
		t.Fatalf("receive @file: %q, %v; want a duplicate of 1", out, err)
	}
	out, err = runCLIInput(t, strings.NewReader(`{"order":1}`), "inbox", "receive", "--source", "shop", "--message-id", "o-1", "--payload", "-")
	if err != nil || strings.TrimSpace(out) != "duplicate 1 (ready)" {
		t.Fatalf("receive -: %q, %v", out, err)
	}
	// Another payload: a conflict, printed, and an error (non-zero exit).
	out, err = runCLI(t, "inbox", "receive", "--source", "shop", "--message-id", "o-1", "--payload", `{"order": 2}`)
	if !errors.Is(err, inbox.ErrConflict) || strings.TrimSpace(out) != "conflict 1" {
		t.Fatalf("conflicting receive: %q, %v; want conflict 1 and ErrConflict", out, err)
	}
	// Bad input: clear errors, nothing written.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--message-id", "x"}, "--source and --message-id are required"},
		{[]string{"--source", "s", "--message-id", "x", "--payload", "[1]"}, "must be a JSON object"},
		{[]string{"--source", "s", "--message-id", "x", "--payload", "@/does/not/exist"}, "no such file"},
		{[]string{"--source", "s", "--message-id", "x", "--topic", "a\tb"}, "topic"},
		{[]string{"--source", "s", "--message-id", "x", "--queue", "bad queue"}, "not a valid name"},
	} {
		_, err := runCLI(t, append([]string{"inbox", "receive"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("receive %v: %v; want an error containing %q", c.args, err, c.want)
		}
	}
	for i := 2; i <= 4; i++ {
		if _, err := runCLI(t, "inbox", "receive", "--source", "mail", "--message-id", "m"+string(rune('0'+i)), "--queue", "mail"); err != nil {
			t.Fatal(err)
		}
	}
	out, err = runCLI(t, "inbox", "list", "--queue", "mail", "--limit", "2", "--json")
	var page []map[string]any
	if err != nil || json.Unmarshal([]byte(out), &page) != nil || len(page) != 2 || page[0]["message_id"] != "m2" || page[0]["status"] != "ready" {
		t.Fatalf("list page 1: %q, %v", out, err)
	}
	// Ids are not dense: a repeat uses up an identity value too.
	after := strconv.FormatInt(int64(page[1]["id"].(float64)), 10)
	out, err = runCLI(t, "inbox", "list", "--queue", "mail", "--after-id", after)
	if err != nil || !strings.Contains(out, "m4") || strings.Contains(out, "m3") || strings.Contains(out, "more may follow") {
		t.Fatalf("list after %s: %q, %v", after, out, err)
	}
	out, err = runCLI(t, "inbox", "list", "--status", "dead")
	if err != nil || strings.Count(out, "\n") != 1 {
		t.Fatalf("list of dead messages: %q, %v; want only the header", out, err)
	}
	if _, err := runCLI(t, "inbox", "list", "--status", "gone"); !errors.Is(err, workqtype.ErrInvalid) {
		t.Fatalf("list --status gone: %v", err)
	}
	// Kill message 1 on the database side, then show and revive it.
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	if _, err := conn.Exec(t.Context(), "update workq.inbox set status = 3, attempts = 4, finished_at = now(), last_error = 'boom' where id = 1"); err != nil {
		t.Fatal(err)
	}
	out, err = runCLI(t, "inbox", "show", "1")
	if err != nil || !strings.Contains(out, "status:       dead") || !strings.Contains(out, "last error:   boom") || !strings.Contains(out, `{"order": 1}`) {
		t.Fatalf("show: %q, %v", out, err)
	}
	out, err = runCLI(t, "inbox", "revive", "1", "2", "--actor", "op:ada", "--reason", "fixed", "--json")
	var rev struct {
		Revived []int64
		NotDead []int64 `json:"not_dead"`
	}
	// There is no message 2 (a repeat used its identity value): it is left
	// alone, listed as not found, and the command fails saying so.
	if err == nil || err.Error() != "inbox message 2 not found" || !errors.Is(err, workq.ErrNotFound) || errors.Is(err, workq.ErrWrongState) || json.Unmarshal([]byte(out), &rev) != nil ||
		len(rev.Revived) != 1 || rev.Revived[0] != 1 || len(rev.NotDead) != 1 || rev.NotDead[0] != 2 {
		t.Fatalf("revive: %q, %v", out, err)
	}
	out, err = runCLI(t, "inbox", "show", "1", "--json")
	var shown struct {
		Message  map[string]any
		Attempts []map[string]any
	}
	if err != nil || json.Unmarshal([]byte(out), &shown) != nil || shown.Message["status"] != "ready" ||
		len(shown.Attempts) != 1 || shown.Attempts[0]["outcome"] != "revived" || shown.Attempts[0]["worker"] != "op:ada" {
		t.Fatalf("show after revive: %q, %v", out, err)
	}
	if _, err := runCLI(t, "inbox", "show", "999"); !errors.Is(err, inbox.ErrNotFound) {
		t.Fatalf("show 999: %v, want ErrNotFound", err)
	}
	if _, err := runCLI(t, "inbox", "revive", "x"); err == nil || !strings.Contains(err.Error(), "positive whole number") {
		t.Fatalf("revive x: %v", err)
	}
}
