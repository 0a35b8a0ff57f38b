package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/db"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/testutil"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// TestQuickstart builds the example and runs it as a process against a
// database without the schema: it must migrate, enqueue its job and run it
// to done at the first attempt, then stop on SIGTERM with status 0.
func TestQuickstart(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "quickstart")
	if out, err := exec.Command(testutil.GoBin(t), "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	ctx := context.Background()
	url := testdb.URL(t)
	m, err := db.OpenMigrator(url)
	if err != nil {
		t.Fatal(err)
	}
	err = m.DownTo(ctx, 0) // the example brings the schema up itself
	m.Close()
	if err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(bin)
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "DATABASE_URL" && !strings.HasPrefix(k, "WORKQ_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "DATABASE_URL="+url)
	out := &testutil.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	})

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(60 * time.Second)
	for {
		var status int16
		var attempts int32
		// Until the example has migrated, the query fails: keep polling.
		err := conn.QueryRow(ctx, "select status, attempts from workq.job_runs_all where kind = 'email.send'").Scan(&status, &attempts)
		if err == nil && status == 2 {
			if attempts != 1 {
				t.Errorf("the job took %d attempts, want 1", attempts)
			}
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("the example exited before its job was done (%v):\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job was not done after 60s (last poll: status %d, %v):\n%s", status, err, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(out.String(), "attempt 1: sending to ann@example.com") {
		t.Errorf("the handler's log line is missing:\n%s", out.String())
	}
	// The timer is the example's last write: once it fired, every kind of
	// work was written and handled, and SIGTERM finds the service idle.
	for _, line := range []string{"order.placed: order 1", "payment.settled: order 1", "order.expired: order 1"} {
		for !strings.Contains(out.String(), line) {
			select {
			case err := <-exited:
				t.Fatalf("the example exited before logging %q (%v):\n%s", line, err, out.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %q after 60s:\n%s", line, out.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("the example exited with %v after SIGTERM:\n%s", err, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the example was still running 30s after SIGTERM:\n%s", out.String())
	}
}

// TestREADMEShowsQuickstart: every Go block of the README is a contiguous
// part of this example's main.go, so what the README shows compiles and is
// what TestQuickstart runs.
func TestREADMEShowsQuickstart(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	blocks := goBlocks(string(readme))
	if len(blocks) == 0 {
		t.Fatal("README.md has no ```go block; it shows examples/quickstart/main.go")
	}
	for i, b := range blocks {
		if !strings.Contains(string(src), b) {
			t.Errorf("README.md's Go block %d is not a part of examples/quickstart/main.go: copy the code from main.go into the README (or change main.go and keep TestQuickstart passing)\n%s", i+1, b)
		}
	}
}

// goBlocks returns the text of every ```go fenced block of a Markdown file.
func goBlocks(md string) []string {
	var blocks []string
	var cur []string
	in := false
	for _, line := range strings.Split(md, "\n") {
		switch {
		case !in && strings.TrimSpace(line) == "```go":
			in, cur = true, nil
		case in && strings.TrimSpace(line) == "```":
			in = false
			blocks = append(blocks, strings.Join(cur, "\n")+"\n")
		case in:
			cur = append(cur, line)
		}
	}
	return blocks
}
