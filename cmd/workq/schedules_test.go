package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/workq/workq/internal/testdb"
)

func TestCLISchedules(t *testing.T) {
	isolateEnv(t)
	url := testdb.URL(t)
	db := "--database-url=" + url
	file := filepath.Join(t.TempDir(), "p.json")
	if err := os.WriteFile(file, []byte(`{"from":"file"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// Bad input: a clear error, nothing written.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"add", "s", "--kind", "k", "--cron", "0 3 * *"}, "cron"},
		{[]string{"add", "s", "--kind", "k", "--cron", "@daily", "--timezone", "Mars/Base"}, "unknown time zone"},
		{[]string{"add", "s s", "--kind", "k", "--cron", "@daily"}, "schedule name"},
		{[]string{"add", "s", "--cron", "@daily"}, "--kind is required"},
		{[]string{"add", "s", "--kind", "k"}, "--cron is required"},
		{[]string{"add", "s", "--kind", "k", "--cron", "@daily", "--payload", "[1]"}, "JSON object"},
		{[]string{"add", "s", "--kind", "k", "--cron", "@daily", "--overlap", "never"}, "overlap"},
		{[]string{"update", "s"}, "nothing to update"},
		{[]string{"trigger", "nope"}, "not found"},
		{[]string{"remove", "nope"}, "not found"},
	} {
		_, err := runCLI(t, append(append([]string{"schedules"}, tc.args...), db)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one mentioning %q", tc.args, err, tc.want)
		}
	}
	out, err := runCLI(t, "schedules", "list", "--json", db)
	if err != nil || strings.TrimSpace(out) != "[]" {
		t.Fatalf("list after rejected adds: %q %v", out, err)
	}

	out, err = runCLI(t, "schedules", "add", "nightly", "--kind", "report", "--cron", "0 3 * * *", "--timezone", "Europe/Berlin",
		"--payload", "@"+file, "--overlap", "skip", "--json", db)
	if err != nil {
		t.Fatal(err)
	}
	var added struct {
		Name      string            `json:"name"`
		Payload   map[string]string `json:"payload"`
		NextRunAt *string           `json:"next_run_at"`
	}
	if err := json.Unmarshal([]byte(out), &added); err != nil || added.Name != "nightly" || added.NextRunAt == nil || added.Payload["from"] != "file" {
		t.Fatalf("add --json: %s (%v)", out, err)
	}
	if _, err := runCLI(t, "schedules", "add", "nightly", "--kind", "report", "--cron", "@daily", db); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("duplicate add: %v", err)
	}
	out, err = runCLI(t, "schedules", "trigger", "nightly", db)
	if _, perr := strconv.ParseInt(strings.TrimSpace(out), 10, 64); err != nil || perr != nil {
		t.Fatalf("trigger: %q %v", out, err)
	}
	if _, err := runCLI(t, "schedules", "trigger", "nightly", db); err == nil || !strings.Contains(err.Error(), "overlap policy is skip") {
		t.Errorf("trigger with a live run: %v", err)
	}
	if _, err := runCLI(t, "schedules", "trigger", "nightly", "--force", "--json", db); err != nil {
		t.Errorf("trigger --force: %v", err)
	}
	if _, err := runCLIInput(t, strings.NewReader(`{"from":"stdin"}`), "schedules", "update", "nightly", "--payload", "-", "--cron", "@every 90s", db); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, "schedules", "disable", "nightly", db); err != nil {
		t.Fatal(err)
	}
	out, err = runCLI(t, "schedules", "list", db)
	if err != nil || !strings.Contains(out, "nightly") || !strings.Contains(out, "@every 90s") || !strings.Contains(out, "false") || !strings.Contains(out, "ready") {
		t.Errorf("list: %q %v", out, err)
	}
	if _, err := runCLI(t, "schedules", "enable", "nightly", db); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, "schedules", "remove", "nightly", db); err != nil {
		t.Fatal(err)
	}
}
