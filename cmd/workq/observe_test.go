package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/workq/workq/internal/jobq"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/testdb"
)

// Bad metrics and tracing settings are refused before anything starts,
// saying what is wrong; so is a metrics address that is taken.
func TestCLIObservabilitySettingsRejected(t *testing.T) {
	isolateEnv(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dbURL := testdb.URL(t)
	cases := []struct {
		name string
		args []string
		env  map[string]string
		db   bool
		want string
	}{
		{name: "metrics-addr without a port", args: []string{"worker", "--metrics-addr", "localhost"}, want: `metrics-addr "localhost" must be host:port`},
		{name: "metrics-addr port not a number", args: []string{"maintain", "--metrics-addr", ":http"}, want: `metrics-addr ":http" must be host:port`},
		{name: "WORKQ_METRICS_ADDR bad", env: map[string]string{"WORKQ_METRICS_ADDR": "9090"}, args: []string{"run"}, want: `metrics-addr "9090" must be host:port`},
		{name: "depth interval too short", args: []string{"worker", "--metrics-depth-interval", "10ms"}, want: "metrics-depth-interval must be 0 (off) or at least 1s"},
		{name: "unknown exporter", args: []string{"maintain", "--otel-exporter", "jaeger"}, want: `otel-exporter must be none or otlp-http, got "jaeger"`},
		{name: "endpoint not a URL", args: []string{"worker", "--otel-endpoint", "collector:4318"}, want: `otel-endpoint "collector:4318" must be an http or https URL`},
		{name: "metrics address taken", db: true, args: []string{"maintain", "--metrics-addr", taken.Addr().String()}, want: "metrics: listen on " + taken.Addr().String()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.db {
				t.Setenv("DATABASE_URL", dbURL)
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, err := runCLI(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("workq %q: error %v, want one mentioning %q", tc.args, err, tc.want)
			}
		})
	}
}

// workq worker and workq maintain serve /metrics on --metrics-addr while
// they run, and stop serving when they stop.
func TestCLIServesMetrics(t *testing.T) {
	isolateEnv(t)
	dbURL := testdb.URL(t)
	t.Setenv("DATABASE_URL", dbURL)
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := jobq.New(jobq.Options{}).Enqueue(context.Background(), conn, jobq.Job{Kind: "noop"}); err != nil {
		t.Fatal(err)
	}
	apiAddr := freeAddr(t)
	for _, tc := range []struct {
		args []string
		want string // a line of the exposition
		also string // another /metrics URL that serves it (the API's)
	}{
		{args: []string{"worker", "--jobs", "--poll", "50ms"}, want: `workq_worker_completed_total{outcome="done",queue="default",table="job_runs"} 1`},
		{args: []string{"maintain", "--leader-ttl", "1s"}, want: `workq_maintenance_leader{shard=""} 1`},
		// The API process serves them on its own listener too (read scope;
		// --insecure: every request may).
		{args: []string{"api", "--insecure", "--api-addr", apiAddr}, want: `workq_queue_depth_errors_total 0`,
			also: "http://" + apiAddr + "/metrics"},
	} {
		t.Run(tc.args[0], func(t *testing.T) {
			addr := freeAddr(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				root := newRoot(io.Discard, io.Discard)
				root.SetArgs(append(tc.args, "--metrics-addr", addr))
				done <- root.ExecuteContext(ctx)
			}()
			url := "http://" + addr + "/metrics"
			deadline := time.Now().Add(30 * time.Second)
			var last string
			for !strings.Contains(last, tc.want+"\n") || (tc.also != "" && !strings.Contains(fetchBody(tc.also), tc.want+"\n")) {
				if time.Now().After(deadline) {
					t.Fatalf("no %q in /metrics within 30s; last scrape:\n%s", tc.want, last)
				}
				select {
				case err := <-done:
					t.Fatalf("workq %s stopped early: %v", tc.args[0], err)
				case <-time.After(50 * time.Millisecond):
				}
				last = fetchBody(url)
			}
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("workq %s: %v", tc.args[0], err)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("workq %s did not stop within 30s", tc.args[0])
			}
			if _, err := http.Get(url); err == nil {
				t.Errorf("/metrics still answers after workq %s stopped", tc.args[0])
			}
		})
	}
}

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// fetchBody returns the body at url, or "" when it cannot be fetched yet.
func fetchBody(url string) string {
	resp, err := http.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil && !errors.Is(err, io.EOF) {
		return ""
	}
	return string(b)
}
