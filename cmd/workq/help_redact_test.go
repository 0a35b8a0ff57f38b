package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestHelpHidesSecrets: no command's --help shows a password or a secret
// that the environment gives as a flag's default (issue 28 item 5); the
// rest of the URL still shows, so a user can tell which database it is.
func TestHelpHidesSecrets(t *testing.T) {
	isolateEnv(t)
	const pw = "hunter2-s3cret"
	t.Setenv("DATABASE_URL", "postgres://app:"+pw+"@db.example:5432/prod")
	t.Setenv("WORKQ_NATS_URL", "nats://nuser:"+pw+"@nats.example:4222")
	t.Setenv("WORKQ_WEBHOOK_SECRET", pw)
	t.Setenv("WORKQ_OUTBOX_WEBHOOK_SECRET", pw)

	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		paths = append(paths, path)
		for _, sub := range c.Commands() {
			walk(sub, append(path[:len(path):len(path)], sub.Name()))
		}
	}
	walk(newRoot(nil, nil), nil)
	sawURL := 0
	for _, path := range paths {
		out, err := runCLI(t, append(path, "--help")...)
		if err != nil {
			t.Fatalf("workq %s --help: %v", strings.Join(path, " "), err)
		}
		if strings.Contains(out, pw) {
			t.Errorf("workq %s --help shows the password:\n%s", strings.Join(path, " "), out)
		}
		if strings.Contains(out, "postgres://app:xxxxx@db.example:5432/prod") {
			sawURL++
		}
	}
	if sawURL < 5 {
		t.Errorf("only %d commands show the redacted --database-url default; want every command that takes it", sawURL)
	}
}
