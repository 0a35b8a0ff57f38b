package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/outage"
	"github.com/workq/workq/workqtype"
)

// MaxFlowKeySeries bounds the series of throttled or adapting limit keys
// per (table, queue): a service with millions of keys (tenants, accounts)
// must not put millions of series on the scraper. The keys shown are those
// throttled longest (the latest Until first, then by key);
// workq_flow_throttled_keys counts them all.
const MaxFlowKeySeries = 100

// DefaultFlow returns the function of Options.Flow that reads the flow
// control of db (lease.ReadFlow: four small tables, and each rule's
// starts in its window from the scope's log).
func DefaultFlow(db workqtype.DB) func(ctx context.Context) (lease.FlowStatus, error) {
	return func(ctx context.Context) (lease.FlowStatus, error) { return lease.ReadFlow(ctx, db) }
}

// flowCollector serves the flow-control gauges from a cache refreshed as
// the depth's is: at most once per interval, on a scrape that finds it
// older.
type flowCollector struct {
	fn       func(ctx context.Context) (lease.FlowStatus, error)
	interval time.Duration
	timeout  time.Duration
	log      *slog.Logger
	outage   *outage.Log

	rate, period, concurrency, started, inProgress, activeKeys *prometheus.Desc
	throttled, adaptRate, throttledKeys, paused                *prometheus.Desc
	errs                                                       *prometheus.Desc

	mu       sync.Mutex
	last     time.Time
	cache    lease.FlowStatus
	at       time.Time // when cache was read
	failures int
}

func newFlowCollector(fn func(ctx context.Context) (lease.FlowStatus, error), interval, timeout time.Duration, log *slog.Logger) *flowCollector {
	rule := []string{"table", "queue", "scope"}
	scope := []string{"table", "queue", "kind", "key"}
	return &flowCollector{
		fn: fn, interval: interval, timeout: timeout, log: log, outage: outage.New(log, "metrics"),
		rate: prometheus.NewDesc("workq_flow_limit_rate",
			"A flow-control rule's rate: at most this many starts per workq_flow_limit_period_seconds (scope: queue, kind:KIND or per_key); absent without a rate.", rule, nil),
		period: prometheus.NewDesc("workq_flow_limit_period_seconds",
			"The window of a flow-control rule's rate.", rule, nil),
		concurrency: prometheus.NewDesc("workq_flow_limit_concurrency",
			"A flow-control rule's concurrency: at most this many in progress (per key for scope per_key); absent without one.", rule, nil),
		started: prometheus.NewDesc("workq_flow_limit_started",
			"Starts of the rule's scope in its window that ends now (per_key: the busiest key's); compare with workq_flow_limit_rate.", rule, nil),
		inProgress: prometheus.NewDesc("workq_flow_limit_in_progress",
			"Items of the rule's scope in progress now, also those whose lease expired until reaped (per_key: the busiest key's); compare with workq_flow_limit_concurrency.", rule, nil),
		activeKeys: prometheus.NewDesc("workq_flow_limit_active_keys",
			"Limit keys of a queue with starts in the window of its per-key rule.", []string{"table", "queue"}, nil),
		throttled: prometheus.NewDesc("workq_flow_throttled",
			fmt.Sprintf("1 while a scope (the queue: kind and key empty; a kind; a limit key) is throttled (workq.Throttle), 0 while it only adapts its rate after; "+
				"at most %d keys per queue, the latest throttled (workq_flow_throttled_keys counts them all).", MaxFlowKeySeries), scope, nil),
		adaptRate: prometheus.NewDesc("workq_flow_adapt_rate",
			"The starts per second a throttled scope may make while its rate adapts (absent when not adapting).", scope, nil),
		throttledKeys: prometheus.NewDesc("workq_flow_throttled_keys",
			"Limit keys of a queue throttled or adapting now.", []string{"table", "queue"}, nil),
		paused: prometheus.NewDesc("workq_flow_kind_paused",
			"1 for a kind (topic, source) paused within its queue (PauseKind).", []string{"table", "queue", "kind"}, nil),
		errs: prometheus.NewDesc("workq_flow_read_errors_total",
			"Flow-control reads that failed (the last good result is served meanwhile).", nil, nil),
	}
}

func (c *flowCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.rate, c.period, c.concurrency, c.started, c.inProgress, c.activeKeys, c.throttled, c.adaptRate,
		c.throttledKeys, c.paused, c.errs} {
		ch <- d
	}
}

// ruleScope is a rule's scope label: queue, kind:KIND or per_key.
func ruleScope(r lease.FlowStatus, i int) string {
	switch l := r.Rules[i]; {
	case l.PerKey:
		return "per_key"
	case l.Kind != "":
		return "kind:" + l.Kind
	}
	return "queue"
}

func (c *flowCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	if time.Since(c.last) >= c.interval {
		c.refresh()
	}
	s, at, failures := c.cache, c.at, c.failures
	c.mu.Unlock()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for i, l := range s.Rules {
		labels := []string{l.WorkTable, l.Queue, ruleScope(s, i)}
		if l.Rate != nil {
			gauge(c.rate, float64(*l.Rate), labels...)
			gauge(c.period, float64(l.PeriodMs)/1000, labels...)
		}
		if l.Concurrency != nil {
			gauge(c.concurrency, float64(*l.Concurrency), labels...)
		}
		started := l.Started
		if l.PerKey {
			started = l.BusiestKeyStarted
			gauge(c.activeKeys, float64(l.ActiveKeys), l.WorkTable, l.Queue)
		}
		gauge(c.started, float64(started), labels...)
		gauge(c.inProgress, float64(l.InProgress), labels...)
	}
	for _, p := range s.PausedKinds {
		gauge(c.paused, 1, p.WorkTable, p.Queue, p.Kind)
	}
	// Scopes without a key first, then each queue's keys, the latest
	// throttle first, at most MaxFlowKeySeries of them.
	ts := append(s.Throttles[:0:0], s.Throttles...)
	until := func(i int) time.Time {
		if ts[i].ThrottledUntil == nil {
			return time.Time{}
		}
		return *ts[i].ThrottledUntil
	}
	sort.SliceStable(ts, func(i, j int) bool {
		a, b := ts[i], ts[j]
		switch {
		case a.WorkTable != b.WorkTable:
			return a.WorkTable < b.WorkTable
		case a.Queue != b.Queue:
			return a.Queue < b.Queue
		case (a.Key == "") != (b.Key == ""):
			return a.Key == ""
		case !until(i).Equal(until(j)):
			return until(i).After(until(j))
		}
		return a.Kind+"\x00"+a.Key < b.Kind+"\x00"+b.Key
	})
	type tq struct{ table, queue string }
	keys := map[tq]int{}
	for i, t := range ts {
		if t.Key != "" {
			n := keys[tq{t.WorkTable, t.Queue}]
			keys[tq{t.WorkTable, t.Queue}] = n + 1
			if n >= MaxFlowKeySeries {
				continue
			}
		}
		labels := []string{t.WorkTable, t.Queue, t.Kind, t.Key}
		on := 0.0
		if until(i).After(at) {
			on = 1
		}
		gauge(c.throttled, on, labels...)
		if t.AdaptRate > 0 {
			gauge(c.adaptRate, t.AdaptRate, labels...)
		}
	}
	for k, n := range keys {
		gauge(c.throttledKeys, float64(n), k.table, k.queue)
	}
	ch <- prometheus.MustNewConstMetric(c.errs, prometheus.CounterValue, float64(failures))
}

// refresh reads the flow control; c.mu is held.
func (c *flowCollector) refresh() {
	c.last = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	got, err := c.fn(ctx)
	if err != nil {
		c.failures++
		if !c.outage.Failed(err) {
			c.log.Warn("metrics: reading the flow control failed; serving the last result", "err", err)
		}
		return
	}
	c.outage.OK()
	c.cache, c.at = got, time.Now()
}
