package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workq/workq/internal/jobq"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/workq/workq/internal/config"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/maintain"
	"github.com/workq/workq/internal/metrics"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/worker"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// scrape fetches url over HTTP and parses the text exposition.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: status %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse the scrape: %v", err)
	}
	return fams
}

// sample returns the value of the series of name with exactly labels (a
// histogram's sample count), and whether it exists.
func sample(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f, ok := fams[name]
	if !ok {
		return 0, false
	}
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
next:
	for _, m := range f.GetMetric() {
		// A label with an empty value is no label (as Prometheus stores
		// it): the maintenance gauges of one database carry shard="".
		var labels []*dto.LabelPair
		for _, l := range m.GetLabel() {
			if l.GetValue() != "" {
				labels = append(labels, l)
			}
		}
		if len(labels) != len(want) {
			continue
		}
		for _, l := range labels {
			if want[l.GetName()] != l.GetValue() {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// expect compares series with their wanted values; it returns a
// description of the differences ("" when none).
func expect(fams map[string]*dto.MetricFamily, want map[string]float64) string {
	var diffs []string
	for key, v := range want {
		parts := strings.Split(key, " ")
		got, ok := sample(fams, parts[0], parts[1:]...)
		if !ok || got != v {
			diffs = append(diffs, fmt.Sprintf("%s = %v (present %v), want %v", key, got, ok, v))
		}
	}
	sort.Strings(diffs)
	return strings.Join(diffs, "\n")
}

// eventually polls cond until it returns "" or the bound passes.
func eventually(t *testing.T, bound time.Duration, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %s:\n%s", bound, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func listen(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	srv, err := metrics.Listen("127.0.0.1:0", m.Handler(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return "http://" + srv.Addr().String() + "/metrics"
}

// A real worker on a real database works jobs that succeed, fail, retry
// once and snooze once; the scraped metrics count exactly that, and the
// queue depth is read once however often it is scraped.
func TestWorkerMetricsScraped(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	var depthReads atomic.Int64
	depth := metrics.DefaultDepth(pool)
	m, err := metrics.New(metrics.Options{DepthInterval: time.Hour, Depth: func(ctx context.Context) ([]metrics.QueueDepth, error) {
		depthReads.Add(1)
		return depth(ctx)
	}})
	if err != nil {
		t.Fatal(err)
	}
	url := listen(t, m)

	cfg := config.Default()
	cfg.Queues = []string{"mq"}
	cfg.BackoffBase, cfg.BackoffCap = time.Millisecond, 2*time.Millisecond
	cfg.Poll = 20 * time.Millisecond
	results := make(chan worker.Result, 100)
	w, err := worker.New(pool, cfg.Worker(), worker.Options{Observer: m.Worker(), OnResult: func(r worker.Result) { results <- r }})
	if err != nil {
		t.Fatal(err)
	}
	m.Watch(w)
	var snoozed atomic.Bool
	handlers := map[string]worker.HandlerFunc{
		"ok":   func(context.Context, *worker.Job) error { return nil },
		"fail": func(context.Context, *worker.Job) error { return worker.Permanent(errors.New("boom")) },
		"flaky": func(_ context.Context, j *worker.Job) error {
			if j.Attempt == 1 {
				return errors.New("first attempt fails")
			}
			return nil
		},
		"sleepy": func(context.Context, *worker.Job) error {
			if snoozed.CompareAndSwap(false, true) {
				return worker.Snooze(time.Millisecond)
			}
			return nil
		},
	}
	for kind, h := range handlers {
		if err := w.Register(kind, h); err != nil {
			t.Fatal(err)
		}
	}
	client := jobq.New(jobq.Options{})
	jobs := []jobq.Job{
		{Queue: "mq", Kind: "ok"}, {Queue: "mq", Kind: "ok"}, {Queue: "mq", Kind: "ok"},
		{Queue: "mq", Kind: "fail"}, {Queue: "mq", Kind: "flaky"}, {Queue: "mq", Kind: "sleepy"},
		// Not served: queue other has one ready item, due for an hour, and
		// one scheduled, due in an hour.
		{Queue: "other", Kind: "ok", RunAt: time.Now().Add(-time.Hour)},
		{Queue: "other", Kind: "ok", Delay: time.Hour},
	}
	for _, j := range jobs {
		if _, err := client.Enqueue(ctx, pool, j); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	// 6 jobs, 8 attempts: the flaky one's retry and the snooze add one each.
	for range 8 {
		select {
		case r := <-results:
			if !r.Applied {
				t.Fatalf("result of %d not applied: %+v", r.Item.ID, r)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the worker did not finish the jobs within 30s")
		}
	}

	q := []string{"table", "job_runs", "queue", "mq"}
	with := func(kv ...string) string { return strings.Join(append(append([]string{}, q...), kv...), " ") }
	want := map[string]float64{
		"workq_worker_claimed_total " + with():                            8,
		"workq_worker_completed_total " + with("outcome", "done"):         5,
		"workq_worker_completed_total " + with("outcome", "failed"):       1,
		"workq_worker_completed_total " + with("outcome", "retry"):        1,
		"workq_worker_completed_total " + with("outcome", "snoozed"):      1,
		"workq_worker_completed_total " + with("outcome", "released"):     0,
		"workq_worker_lease_lost_total " + with():                         0,
		"workq_worker_handler_duration_seconds " + with():                 8,
		"workq_worker_pickup_latency_seconds " + with():                   8,
		"workq_worker_in_flight " + with():                                0,
		"workq_worker_pending_completions table job_runs":                 0,
		"workq_queue_items table job_runs queue other status ready":       1,
		"workq_queue_items table job_runs queue other status scheduled":   1,
		"workq_queue_items table job_runs queue other status in_progress": 0,
	}
	// The counters are final once the results are reported; the pending
	// gauge drops just after.
	var fams map[string]*dto.MetricFamily
	eventually(t, 10*time.Second, func() string {
		fams = scrape(t, url)
		return expect(fams, want)
	})
	age, _ := sample(fams, "workq_queue_oldest_ready_age_seconds", "table", "job_runs", "queue", "other")
	if age < 3600 || age > 3600+60 {
		t.Errorf("oldest ready age of queue other = %vs, want about 3600s", age)
	}
	// Pickup latencies are small here (the jobs were due when claimed, but
	// the first waited for the worker's start): the sum is finite and not
	// negative.
	for _, m := range fams["workq_worker_pickup_latency_seconds"].GetMetric() {
		if s := m.GetHistogram().GetSampleSum(); s < 0 || s > 60 {
			t.Errorf("pickup latency sum %v s, want between 0 and 60", s)
		}
	}
	for range 3 {
		scrape(t, url)
	}
	if n := depthReads.Load(); n != 1 {
		t.Errorf("several scrapes within the depth interval read the depth %d times, want 1", n)
	}
}

// The maintenance leader's metrics: the leader gauge, the reap task's
// counts per queue and outcome, the stuck task's gauge, task rounds.
func TestMaintenanceMetricsScraped(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	m, err := metrics.New(metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	url := listen(t, m)

	client := jobq.New(jobq.Options{})
	claim := func(queue string, maxAttempts int, leaseTTL time.Duration) {
		t.Helper()
		if _, err := client.Enqueue(ctx, pool, jobq.Job{Queue: queue, Kind: "k", MaxAttempts: maxAttempts}); err != nil {
			t.Fatal(err)
		}
		c, err := lease.New(pool, lease.JobRuns).Claim(ctx, lease.ClaimParams{Queue: queue, Max: 1, Lease: leaseTTL, WorkerID: "crashed"})
		if err != nil || len(c.Items) != 1 {
			t.Fatalf("claim %s: %v, %d items", queue, err, len(c.Items))
		}
	}
	claim("rq", 4, time.Millisecond) // expires at once: requeued
	claim("rq", 1, time.Millisecond) // expires at once, no attempts left: failed
	claim("sq", 4, time.Hour)        // held far longer than twice the stuck task's 1ms lease

	svc := maintain.New(pool, maintain.Options{Observer: m.Maintenance(), LockTTL: 2 * time.Second})
	reap, err := maintain.ReapTask(pool, 20*time.Millisecond, 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	stuck, err := maintain.StuckTask(pool, 20*time.Millisecond, time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	replication, err := maintain.ReplicationTask(pool, 20*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range []maintain.Task{reap, stuck, replication} {
		if err := svc.Add(task); err != nil {
			t.Fatal(err)
		}
	}
	if v, _ := sample(scrape(t, url), "workq_maintenance_leader"); v != 0 {
		t.Fatalf("leader gauge %v before the service started, want 0", v)
	}
	if v, _ := sample(scrape(t, url), "workq_replication_standbys"); v != -1 {
		t.Fatalf("standbys gauge %v before the first replication round, want -1", v)
	}
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = svc.Stop(context.Background())
		}
	})
	eventually(t, 30*time.Second, func() string {
		fams := scrape(t, url)
		d := expect(fams, map[string]float64{
			"workq_maintenance_leader":                                    1,
			"workq_reaped_total table job_runs queue rq outcome requeued": 1,
			"workq_reaped_total table job_runs queue rq outcome failed":   1,
			"workq_stuck_items table job_runs queue sq":                   1,
			// The test server has no standbys.
			"workq_replication_standbys":             0,
			"workq_replication_synchronous_standbys": 0,
		})
		if runs, _ := sample(fams, "workq_maintenance_task_runs_total", "task", "reap"); runs < 1 {
			d += "\nno reap round counted"
		}
		if rows, _ := sample(fams, "workq_maintenance_task_rows_total", "task", "reap"); rows != 2 {
			d += fmt.Sprintf("\nreap rows %v, want 2", rows)
		}
		return d
	})
	if err := svc.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	stopped = true
	if v, _ := sample(scrape(t, url), "workq_maintenance_leader"); v != 0 {
		t.Errorf("leader gauge %v after the service stopped, want 0", v)
	}
}
