// Package metrics exports workq's Prometheus metrics: the worker runtime's
// claims, completions by outcome, lost leases, handler duration and pickup
// latency, handlers in flight and completions waiting for their flush; the
// maintenance leader's status, task rounds, reaps and stuck items; and the
// depth of every queue, read by one statement per work table at most once
// per interval and served from a cache in between.
//
// One Metrics per process holds them all. It observes the runtime through
// the hooks the runtime offers (worker.Observer, maintain.Observer): the
// worker and maintain packages know nothing of Prometheus. Serve Handler at
// /metrics, on a server of your own or with Listen.
//
// Names have the workq_ prefix, base units (seconds) and _total on
// counters; labels are table, queue, outcome, status and task, never item
// ids. docs/operations.md lists every metric.
package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/worker"
)

// Options configure Metrics; zero values take the defaults.
type Options struct {
	// Registry receives the collectors and is what Handler serves. Nil: a
	// new registry with the Go runtime and process collectors. To use the
	// global one, pass prometheus.DefaultRegisterer.(*prometheus.Registry).
	Registry *prometheus.Registry
	// Registerer, when set (and Registry not), receives the collectors
	// instead: the registry of a workq.Config.MetricsRegisterer, which its
	// owner serves (Handler then serves an empty registry).
	Registerer prometheus.Registerer
	// Depth reads the depth of every queue (DefaultDepth: one statement
	// per work table). Nil: no queue depth metrics.
	Depth func(ctx context.Context) ([]QueueDepth, error)
	// DepthInterval: Depth runs at most once per this (default 15s), on a
	// scrape that finds the cached result older; every other scrape is
	// served from the cache, whatever the number of scrapers and queues.
	DepthInterval time.Duration
	// DepthTimeout bounds one Depth call (default 10s).
	DepthTimeout time.Duration
	// Flow reads the flow control (DefaultFlow) for the workq_flow_*
	// gauges, at most once per DepthInterval as Depth is, within
	// DepthTimeout. Nil: no flow-control gauges.
	Flow   func(ctx context.Context) (lease.FlowStatus, error)
	Logger *slog.Logger // default: discard
}

// DefaultDepthInterval is how often, at most, the queue depth is read.
const DefaultDepthInterval = 15 * time.Second

// Metrics holds every workq collector of one process.
type Metrics struct {
	reg  *prometheus.Registry
	into prometheus.Registerer // where the collectors are: reg, or Options.Registerer
	log  *slog.Logger

	claimed, claimErrors, leaseLost *prometheus.CounterVec // table, queue
	completed                       *prometheus.CounterVec // table, queue, outcome
	handlerDuration, pickupLatency  *prometheus.HistogramVec
	reaped                          *prometheus.CounterVec // table, queue, outcome

	// The maintenance leader's gauges carry the shard of its database
	// ("" on a single database): each shard of a sharded Client has a
	// leader of its own, and one value per process would be the last
	// writer's.
	leader                        *prometheus.GaugeVec   // shard
	taskRuns, taskErrors, taskRow *prometheus.CounterVec // task
	stuck                         *prometheus.GaugeVec   // shard, table, queue
	standbys, syncStandbys        *prometheus.GaugeVec   // shard

	load *loadCollector

	// The children of one (table, queue), looked up per event without a
	// lock: a copy-on-write map, replaced under mu when a queue is new.
	queues atomic.Pointer[map[queueKey]*queueMetrics]
	mu     sync.Mutex
	// stuckSeen: the queues with a stuck gauge per (shard, table), set to
	// 0 when a later round no longer finds them (guarded by mu).
	stuckSeen map[stuckKey]map[string]bool
}

type queueKey struct {
	table lease.Table
	queue string
}

// outcomes are the label values of workq_worker_completed_total, in the
// order of queueMetrics.completed.
var outcomes = [...]lease.Outcome{lease.Done, lease.Retry, lease.Failed, lease.Snoozed, lease.Released, lease.Cancelled}

// queueMetrics are the children of one (table, queue).
type queueMetrics struct {
	claimed, claimErrors, leaseLost prometheus.Counter
	completed                       [len(outcomes)]prometheus.Counter
	handlerDuration, pickupLatency  prometheus.Observer
}

// Histogram buckets, in seconds: handlers run from microseconds (noop) to
// minutes (exec, the default execution timeout is 5m); pickup latency runs
// from milliseconds (a notified idle worker) to hours (a backlog).
var (
	handlerBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}
	pickupBuckets  = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}
)

// New creates the collectors and registers them.
func New(o Options) (*Metrics, error) {
	if o.DepthInterval < 0 || o.DepthTimeout < 0 {
		return nil, fmt.Errorf("metrics: depth interval and timeout must not be negative")
	}
	if o.DepthInterval == 0 {
		o.DepthInterval = DefaultDepthInterval
	}
	if o.DepthTimeout == 0 {
		o.DepthTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	reg := o.Registry
	var into prometheus.Registerer = reg
	if reg == nil && o.Registerer != nil {
		reg, into = prometheus.NewRegistry(), o.Registerer
	} else if reg == nil {
		reg = prometheus.NewRegistry()
		if err := registerAll(reg, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
			return nil, err
		}
		into = reg
	}
	tq := []string{"table", "queue"}
	m := &Metrics{
		reg: reg, into: into, log: o.Logger,
		claimed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workq_worker_claimed_total",
			Help: "Items claimed by this process's workers."}, tq),
		claimErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workq_worker_claim_errors_total",
			Help: "Claim statements that failed."}, tq),
		leaseLost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workq_worker_lease_lost_total",
			Help: "Attempts whose lease this process lost (not extended by a heartbeat, not confirmed in time, or gone at completion); their results are discarded."}, tq),
		completed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workq_worker_completed_total",
			Help: "Attempts whose completion was applied, by how they ended: done, retry, failed (at once or no attempts left), snoozed, released, cancelled."},
			[]string{"table", "queue", "outcome"}),
		handlerDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "workq_worker_handler_duration_seconds",
			Help: "How long handlers ran.", Buckets: handlerBuckets}, tq),
		pickupLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "workq_worker_pickup_latency_seconds",
			Help: "From the moment an item was due (its run_at) until a claim took it, on the database clock.", Buckets: pickupBuckets}, tq),
		reaped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workq_reaped_total",
			Help: "Expired leases reaped by this process (the maintenance reap task and the workers' reclaim), by outcome: requeued, failed with no attempts left, or cancelled (their cancel had been requested)."},
			[]string{"table", "queue", "outcome"}),
		leader: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workq_maintenance_leader",
			Help: "1 while this process is the maintenance leader of the shard's database (shard \"\" on a single database), else 0."}, []string{"shard"}),
		taskRuns: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workq_maintenance_task_runs_total",
			Help: "Rounds of a maintenance task run by this process."}, []string{"task"}),
		taskErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workq_maintenance_task_errors_total",
			Help: "Rounds of a maintenance task that failed."}, []string{"task"}),
		taskRow: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "workq_maintenance_task_rows_total",
			Help: "Rows a maintenance task handled (reaped, deleted, materialised, ...)."}, []string{"task"}),
		stuck: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workq_stuck_items",
			Help: "Items in progress claimed more than twice the lease ago, at the last round of the stuck task."}, []string{"shard", "table", "queue"}),
		standbys: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workq_replication_standbys",
			Help: "Standbys streaming from the shard's database at the maintenance leader's last replication check (pg_stat_replication); -1 before the first check."}, []string{"shard"}),
		syncStandbys: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workq_replication_synchronous_standbys",
			Help: "Of those, the synchronous ones (sync_state sync or quorum); -1 when unknown (the role lacks pg_monitor) or before the first check. Alert on workq_replication_standbys > 0 and this == 0 (per shard): a failover may lose acknowledged commits."}, []string{"shard"}),
		load:      newLoadCollector(),
		stuckSeen: map[stuckKey]map[string]bool{},
	}
	empty := map[queueKey]*queueMetrics{}
	m.queues.Store(&empty)
	cs := []prometheus.Collector{m.claimed, m.claimErrors, m.leaseLost, m.completed, m.handlerDuration, m.pickupLatency,
		m.reaped, m.leader, m.taskRuns, m.taskErrors, m.taskRow, m.stuck, m.standbys, m.syncStandbys, m.load}
	if o.Depth != nil {
		cs = append(cs, newDepthCollector(o.Depth, o.DepthInterval, o.DepthTimeout, o.Logger))
	}
	if o.Flow != nil {
		cs = append(cs, newFlowCollector(o.Flow, o.DepthInterval, o.DepthTimeout, o.Logger))
	}
	if err := registerAll(into, cs...); err != nil {
		return nil, err
	}
	return m, nil
}

func registerAll(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("metrics: register: %w", err)
		}
	}
	return nil
}

// Registry returns the registry the collectors are in.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus exposition formats; mount
// it at /metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorLog: slogErrorLog{m.log}, Registry: m.reg})
}

// slogErrorLog adapts the logger for promhttp.
type slogErrorLog struct{ log *slog.Logger }

func (l slogErrorLog) Println(v ...any) { l.log.Warn("metrics: " + fmt.Sprint(v...)) }

// of returns the children of (table, queue), creating them once.
func (m *Metrics) of(table lease.Table, queue string) *queueMetrics {
	k := queueKey{table, queue}
	if q, ok := (*m.queues.Load())[k]; ok {
		return q
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := *m.queues.Load()
	if q, ok := cur[k]; ok {
		return q
	}
	t := string(table)
	q := &queueMetrics{
		claimed:         m.claimed.WithLabelValues(t, queue),
		claimErrors:     m.claimErrors.WithLabelValues(t, queue),
		leaseLost:       m.leaseLost.WithLabelValues(t, queue),
		handlerDuration: m.handlerDuration.WithLabelValues(t, queue),
		pickupLatency:   m.pickupLatency.WithLabelValues(t, queue),
	}
	for i, o := range outcomes {
		q.completed[i] = m.completed.WithLabelValues(t, queue, string(o))
	}
	next := make(map[queueKey]*queueMetrics, len(cur)+1)
	for kk, v := range cur {
		next[kk] = v
	}
	next[k] = q
	m.queues.Store(&next)
	return q
}

// Worker returns the observer to set as worker.Options.Observer; combine
// it with others (tracing) through worker.Observers. Call Watch with the
// worker too, for its in-flight and pending gauges.
func (m *Metrics) Worker() worker.Observer { return workerObserver{m: m} }

// Watch adds w's handlers in flight and completions waiting for their
// flush to the gauges, read at every scrape (worker.Worker.Load). Several
// workers of one process add up.
func (m *Metrics) Watch(w *worker.Worker) { m.load.add(w) }

type workerObserver struct {
	worker.NopObserver
	m *Metrics
}

func (o workerObserver) Claimed(e worker.ClaimEvent) {
	q := o.m.of(e.Table, e.Queue)
	if e.Err != nil {
		q.claimErrors.Inc()
	}
	if len(e.Items) == 0 {
		return
	}
	q.claimed.Add(float64(len(e.Items)))
	for i := range e.Items {
		q.pickupLatency.Observe(e.PickupLatency(&e.Items[i]).Seconds())
	}
}

func (o workerObserver) HandlerEnd(_ context.Context, job *worker.Job, _ error, took time.Duration) {
	o.m.of(job.Table, job.Queue).handlerDuration.Observe(took.Seconds())
}

func (o workerObserver) Completed(r worker.Result) {
	final := r.Final()
	q := o.m.of(r.Item.Table, r.Item.Queue)
	for i, oc := range outcomes {
		if oc == final {
			q.completed[i].Inc()
			return
		}
	}
}

func (o workerObserver) LeaseLost(it *lease.Item) { o.m.of(it.Table, it.Queue).leaseLost.Inc() }

func (o workerObserver) Reclaimed(table lease.Table, queue string, r lease.Reaped) {
	o.m.addReaped(table, queue, lease.QueueReaped{Requeued: r.Requeued, Failed: r.Failed, Cancelled: r.Cancelled})
}

func (m *Metrics) addReaped(table lease.Table, queue string, r lease.QueueReaped) {
	if r.Requeued > 0 {
		m.reaped.WithLabelValues(string(table), queue, "requeued").Add(float64(r.Requeued))
	}
	if r.Failed > 0 {
		m.reaped.WithLabelValues(string(table), queue, "failed").Add(float64(r.Failed))
	}
	if r.Cancelled > 0 {
		m.reaped.WithLabelValues(string(table), queue, "cancelled").Add(float64(r.Cancelled))
	}
}

// loadCollector reads the in-flight and pending gauges of the watched
// workers at scrape time.
type loadCollector struct {
	inFlight, pending *prometheus.Desc

	mu      sync.Mutex
	workers []*worker.Worker
}

func newLoadCollector() *loadCollector {
	return &loadCollector{
		inFlight: prometheus.NewDesc("workq_worker_in_flight",
			"Claimed attempts holding a handler slot (running, or waiting for a handler).", []string{"table", "queue"}, nil),
		pending: prometheus.NewDesc("workq_worker_pending_completions",
			"Finished attempts whose completion waits for its flush (the completion buffer's backlog; claims stop while it is over 4 x flush-batch).",
			[]string{"table"}, nil),
	}
}

func (c *loadCollector) add(w *worker.Worker) {
	c.mu.Lock()
	c.workers = append(c.workers, w)
	c.mu.Unlock()
}

func (c *loadCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.inFlight
	ch <- c.pending
}

func (c *loadCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	workers := c.workers
	c.mu.Unlock()
	inFlight := map[queueKey]int{}
	pending := map[lease.Table]int64{}
	for _, w := range workers {
		qs, ts := w.Load()
		for _, q := range qs {
			inFlight[queueKey{q.Table, q.Queue}] += q.InFlight
		}
		for _, t := range ts {
			pending[t.Table] += t.Pending
		}
	}
	for k, n := range inFlight {
		ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(n), string(k.table), k.queue)
	}
	for t, n := range pending {
		ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(n), string(t))
	}
}
