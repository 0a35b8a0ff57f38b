package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/workq/workq/internal/testdb"
)

// TestBenchModes runs each `workq bench` mode briefly against a test
// database and checks what it reports: jobs done, the configuration, and
// in rate mode the pickup latency beside the SQL floor measured just
// before it. No figure is judged: benchmarks are not timed tests.
func TestBenchModes(t *testing.T) {
	isolateEnv(t)
	t.Setenv("DATABASE_URL", testdb.URL(t))
	for _, c := range []struct {
		name  string
		args  []string
		check func(t *testing.T, r benchResult)
	}{
		{"burn-down", []string{"-n", "2000"}, func(t *testing.T, r benchResult) {
			if r.Mode != "burn-down" || r.Jobs != 2000 {
				t.Errorf("mode %q, %d jobs; want burn-down of 2000", r.Mode, r.Jobs)
			}
			if r.CPUPerJob <= 0 {
				t.Errorf("process CPU per job %.2f µs; want it measured over the window", r.CPUPerJob)
			}
		}},
		{"burn-down, two clients", []string{"-n", "2000", "--clients", "2"}, func(t *testing.T, r benchResult) {
			if r.Mode != "burn-down" || r.Jobs != 2000 {
				t.Errorf("mode %q, %d jobs; want burn-down of 2000", r.Mode, r.Jobs)
			}
			if r.Config["clients"] != "2" || !slices.Contains(r.NonDefault, "clients") {
				t.Errorf("config %v, not the default %v; want clients=2 reported as not the default", r.Config, r.NonDefault)
			}
		}},
		{"continuous", []string{"--duration", "1s"}, func(t *testing.T, r benchResult) {
			if r.Mode != "continuous" || r.Jobs <= 0 {
				t.Errorf("mode %q, %d jobs; want continuous with jobs done", r.Mode, r.Jobs)
			}
			if r.CPUPerJob <= 0 {
				t.Errorf("process CPU per job %.2f µs; want it measured over the window", r.CPUPerJob)
			}
		}},
		{"continuous, per interval, with maintenance", []string{"--duration", "2s", "--report-every", "1s", "--maintenance"}, func(t *testing.T, r benchResult) {
			if r.Mode != "continuous" || len(r.Intervals) != 2 || !r.Maintenance {
				t.Errorf("mode %q, intervals %v, maintenance %v; want continuous with 2 intervals and maintenance", r.Mode, r.Intervals, r.Maintenance)
			}
			for i, v := range r.Intervals {
				if v <= 0 {
					t.Errorf("interval %d: %.0f jobs/s; want jobs done in every interval", i+1, v)
				}
			}
		}},
		{"rate", []string{"--duration", "1s", "--rate", "50"}, func(t *testing.T, r benchResult) {
			if r.Mode != "rate" || r.Jobs <= 0 || r.LatencyP50 <= 0 {
				t.Errorf("mode %q, %d jobs, p50 %.2f ms; want rate with jobs and a latency", r.Mode, r.Jobs, r.LatencyP50)
			}
			if r.FloorP50 <= 0 || r.FloorP95 < r.FloorP50 || r.FloorP99 < r.FloorP95 {
				t.Errorf("SQL floor p50 %.2f ms, p95 %.2f ms; want a floor measured before the run", r.FloorP50, r.FloorP95)
			}
		}},
		{"rate, batched", []string{"--duration", "1s", "--rate", "50", "--enqueue-batch", "5"}, func(t *testing.T, r benchResult) {
			if r.Mode != "rate-batched" || r.Jobs <= 0 || r.EnqueueBatch != 5 {
				t.Errorf("mode %q, %d jobs, batch %d; want rate-batched with jobs in batches of 5", r.Mode, r.Jobs, r.EnqueueBatch)
			}
			if r.FloorP50 <= 0 || r.FloorP99 < r.FloorP50 {
				t.Errorf("SQL floor p50 %.2f ms, p99 %.2f ms; want a floor of batched pickups measured before the run", r.FloorP50, r.FloorP99)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := runCLI(t, append([]string{"bench", "--json"}, c.args...)...)
			if err != nil {
				t.Fatalf("bench %v: %v", c.args, err)
			}
			var r benchResult
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatalf("bench %v printed no JSON result: %v\n%s", c.args, err, out)
			}
			if len(r.Config) == 0 {
				t.Errorf("bench %v reports no configuration", c.args)
			}
			c.check(t, r)
		})
	}
}

// TestBenchRejectsClients: --clients outside 1 to maxBenchClients, or above
// 1 with a mode that runs no job-run worker of its own, is refused before
// anything connects: the database URL names a port nothing listens on.
func TestBenchRejectsClients(t *testing.T) {
	isolateEnv(t)
	t.Setenv("DATABASE_URL", "postgres://postgres@127.0.0.1:1/none?connect_timeout=1")
	for _, args := range [][]string{
		{"--clients", "0"},
		{"--clients", "-1"},
		{"--clients", "17"},
		{"--clients", "2", "--duration", "1s", "--rate", "50"},
		{"--clients", "2", "--produce-only", "--duration", "1s"},
		{"--clients", "2", "--table", "outbox"},
		{"--clients", "2", "--ordered-keys", "3"},
		{"--clients", "2", "--shards", "postgres://postgres@127.0.0.1:1/a,postgres://postgres@127.0.0.1:1/b"},
	} {
		_, err := runCLI(t, append([]string{"bench"}, args...)...)
		if err == nil || !strings.Contains(err.Error(), "--clients is 1 to") {
			t.Errorf("bench %v: err %v; want the --clients refusal", args, err)
		}
	}
}

// TestBenchRefusesClientsBeyondTheServersConnections: --clients whose
// pools could ask for more connections than the server accepts is refused
// once connected, before the bench migrates or resets anything.
func TestBenchRefusesClientsBeyondTheServersConnections(t *testing.T) {
	isolateEnv(t)
	t.Setenv("DATABASE_URL", testdb.URL(t))
	_, err := runCLI(t, "bench", "-n", "10", "--clients", "16", "--max-conns", "100")
	if err == nil || !strings.Contains(err.Error(), "the server accepts") {
		t.Fatalf("bench --clients 16 --max-conns 100: err %v; want the server's connection limit named", err)
	}
}
