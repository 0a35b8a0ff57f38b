package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
)

// The flow-control gauges are served by a process that reads the depth:
// after a limit is set, `workq api --metrics-addr` exposes its rate.
func TestCLIServesFlowMetrics(t *testing.T) {
	isolateEnv(t)
	dbURL := testdb.URL(t)
	t.Setenv("DATABASE_URL", dbURL)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	c, err := workq.NewClient(pool, workq.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetFlowLimit(ctx, workq.FlowLimit{Table: workq.TableJobRuns, Queue: "fq", Rate: 10, Period: time.Minute}); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	done := make(chan error, 1)
	go func() {
		root := newRoot(io.Discard, io.Discard)
		root.SetArgs([]string{"api", "--insecure", "--api-addr", freeAddr(t), "--metrics-addr", addr})
		done <- root.ExecuteContext(ctx)
	}()
	want := `workq_flow_limit_rate{queue="fq",scope="queue",table="job_runs"} 10` + "\n"
	deadline := time.Now().Add(30 * time.Second)
	var last string
	for !strings.Contains(last, want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in /metrics within 30s; last scrape:\n%s", want, last)
		}
		select {
		case err := <-done:
			t.Fatalf("workq api stopped early: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		last = fetchBody("http://" + addr + "/metrics")
	}
	if !strings.Contains(last, `workq_flow_limit_period_seconds{queue="fq",scope="queue",table="job_runs"} 60`+"\n") {
		t.Errorf("no period of the rule in /metrics:\n%s", last)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("workq api did not stop within 30s")
	}
}
