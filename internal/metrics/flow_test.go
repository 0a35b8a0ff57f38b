package metrics_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/metrics"
	"github.com/workq/workq/internal/testdb"
)

// The flow-control gauges, scraped over HTTP: each rule's rate, period,
// concurrency and starts in its window, a per-key rule's active keys, a
// paused kind, a throttled queue with its adapted rate, and per-key
// throttles bounded to MaxFlowKeySeries series per queue with their count
// beside; the flow control is read once per interval however often it is
// scraped.
func TestFlowMetricsScraped(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	var reads atomic.Int64
	flow := metrics.DefaultFlow(pool)
	m, err := metrics.New(metrics.Options{DepthInterval: time.Hour, Flow: func(ctx context.Context) (lease.FlowStatus, error) {
		reads.Add(1)
		return flow(ctx)
	}})
	if err != nil {
		t.Fatal(err)
	}
	url := listen(t, m)

	for _, r := range []lease.FlowRule{
		{Table: lease.JobRuns, Queue: "fq", Rate: 10, Period: time.Minute, Concurrency: 4},
		{Table: lease.JobRuns, Queue: "fq", Kind: "mail", Concurrency: 2},
		{Table: lease.JobRuns, Queue: "fq", PerKey: true, Rate: 3},
	} {
		if err := lease.SetFlowRule(ctx, pool, r); err != nil {
			t.Fatal(err)
		}
	}
	for _, log := range []string{
		`select workq.workq_flow_log('job_runs', 'fq', '', '', 7, now())`,
		`select workq.workq_flow_log('job_runs', 'fq', '', 'acme', 2, now())`,
		`select workq.workq_flow_log('job_runs', 'fq', '', 'globex', 1, now())`,
	} {
		if _, err := pool.Exec(ctx, log); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := lease.PauseKind(ctx, pool, lease.JobRuns, "fq", "sms", "ops:ann", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := lease.Throttle(ctx, pool, lease.JobRuns, "tq", "", "", time.Hour); err != nil {
		t.Fatal(err)
	}
	const keys = metrics.MaxFlowKeySeries + 5
	for i := range keys {
		if _, err := lease.Throttle(ctx, pool, lease.JobRuns, "kq", "", fmt.Sprintf("tenant-%03d", i), time.Hour+time.Duration(i)*time.Second); err != nil {
			t.Fatal(err)
		}
	}

	fams := scrape(t, url)
	rule := func(scope string) []string { return []string{"table", "job_runs", "queue", "fq", "scope", scope} }
	with := func(name string, labels []string) string {
		s := name
		for _, l := range labels {
			s += " " + l
		}
		return s
	}
	want := map[string]float64{
		with("workq_flow_limit_rate", rule("queue")):                  10,
		with("workq_flow_limit_period_seconds", rule("queue")):        60,
		with("workq_flow_limit_concurrency", rule("queue")):           4,
		with("workq_flow_limit_started", rule("queue")):               7,
		with("workq_flow_limit_concurrency", rule("kind:mail")):       2,
		with("workq_flow_limit_started", rule("kind:mail")):           0,
		with("workq_flow_limit_rate", rule("per_key")):                3,
		with("workq_flow_limit_period_seconds", rule("per_key")):      1,
		with("workq_flow_limit_started", rule("per_key")):             2,
		"workq_flow_limit_active_keys table job_runs queue fq":        2,
		"workq_flow_kind_paused table job_runs queue fq kind sms":     1,
		"workq_flow_throttled table job_runs queue tq":                1,
		"workq_flow_throttled_keys table job_runs queue kq":           keys,
		"workq_flow_throttled table job_runs queue kq key tenant-104": 1, // the latest throttles are shown
		"workq_flow_read_errors_total":                                0,
	}
	if diff := expect(fams, want); diff != "" {
		t.Error(diff)
	}
	if _, ok := sample(fams, "workq_flow_limit_rate", rule("kind:mail")...); ok {
		t.Error("a rule without a rate has a rate series")
	}
	if v, ok := sample(fams, "workq_flow_adapt_rate", "table", "job_runs", "queue", "tq"); !ok || v < 1 {
		t.Errorf("the throttled queue's adapted rate: %v (present %v), want at least 1", v, ok)
	}
	shown := 0
	for _, s := range fams["workq_flow_throttled"].GetMetric() {
		if labelOf(s, "queue") == "kq" {
			shown++
		}
	}
	if shown != metrics.MaxFlowKeySeries {
		t.Errorf("%d series of queue kq's %d throttled keys, want %d", shown, keys, metrics.MaxFlowKeySeries)
	}
	if _, ok := sample(fams, "workq_flow_throttled", "table", "job_runs", "queue", "kq", "key", "tenant-000"); ok {
		t.Error("the earliest throttled key is shown, past the bound")
	}
	for range 3 {
		scrape(t, url)
	}
	if n := reads.Load(); n != 1 {
		t.Errorf("4 scrapes within the interval read the flow control %d times, want 1", n)
	}
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
