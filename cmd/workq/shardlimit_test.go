package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/shardlimit"
	"github.com/workq/workq/internal/testdb"
)

func TestParseShardLimit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want shardlimit.Limit
		err  string
	}{
		{"job_runs/emails=100", shardlimit.Limit{Table: lease.JobRuns, Queue: "emails", W: 100}, ""},
		{"outbox/default=0", shardlimit.Limit{Table: lease.Outbox, Queue: "default", W: 0}, ""},
		{"job_runs/emails", shardlimit.Limit{}, "want TABLE/QUEUE=W"},
		{"emails=3", shardlimit.Limit{}, "want TABLE/QUEUE=W"},
		{"job_runs/emails=-1", shardlimit.Limit{}, "whole number"},
		{"job_runs/emails=x", shardlimit.Limit{}, "whole number"},
		{"nope/emails=3", shardlimit.Limit{}, "nope"},
		{"job_runs/bad queue=3", shardlimit.Limit{}, "not a valid name"},
	} {
		got, err := parseShardLimit(tc.in)
		if tc.err == "" {
			if err != nil || got != tc.want {
				t.Errorf("parseShardLimit(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("parseShardLimit(%q) = %v, want an error containing %q", tc.in, err, tc.err)
		}
	}
}

// `workq shard-limit` over two databases sets both budgets (idle shards
// share W evenly) and exits 0 on its context's end.
func TestShardLimitCommand(t *testing.T) {
	isolateEnv(t)
	urls := []string{testdb.URL(t), testdb.URL(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	root := newRoot(&out, &errOut)
	root.SetArgs([]string{"shard-limit", "--shard", "a=" + urls[0], "--shard", "b=" + urls[1],
		"--limit", "job_runs/emails=6", "--interval", "100ms", "--log-level", "warn"})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	budget := func(url string) int {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var b int
		err = conn.QueryRow(ctx, `select max_in_progress from workq.queue_limits where work_table = 'job_runs' and queue = 'emails'`).Scan(&b)
		if errors.Is(err, pgx.ErrNoRows) {
			return -1
		}
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for budget(urls[0]) != 3 || budget(urls[1]) != 3 {
		select {
		case err := <-done:
			t.Fatalf("shard-limit exited early: %v; stderr: %s", err, errOut.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("shard-limit: %v; stderr: %s", err, errOut.String())
	}
	if _, err := runCLI(t, "shard-limit", "--limit", "job_runs/emails=6"); err == nil || !strings.Contains(err.Error(), "--shard") {
		t.Errorf("shard-limit without --shard: %v, want an error naming --shard", err)
	}
}
