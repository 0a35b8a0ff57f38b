package metrics

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/outage"
	"github.com/workq/workq/workqtype"
)

// QueueDepth is how many items of one (table, queue) wait and run.
type QueueDepth struct {
	Table      lease.Table
	Queue      string
	Ready      int64 // ready items that are due
	Scheduled  int64 // ready items due later (a delay, a backoff, a timer)
	InProgress int64 // items in progress
	// OldestReadyAge is how long the oldest due ready item has been due
	// (0: none is due): the queue's lag.
	OldestReadyAge time.Duration
}

// DefaultDepth returns the depth function of Options.Depth that reads the
// four work tables on db, one statement per table
// (lease.Engine.QueueDepth): it counts the ready and in-progress sets
// through their partial indexes and never reads finished rows, so its
// cost grows with the backlog, not with the history. It does not count
// done and failed items: those are rates (workq_worker_completed_total)
// and counting them would read every finished row kept for retention.
// A table whose statement fails is left out and the error returned.
func DefaultDepth(db workqtype.DB) func(ctx context.Context) ([]QueueDepth, error) {
	return func(ctx context.Context) ([]QueueDepth, error) {
		var out []QueueDepth
		var errs []error
		for _, t := range lease.Tables {
			ds, err := lease.New(db, t).QueueDepth(ctx)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			for _, d := range ds {
				out = append(out, QueueDepth{Table: t, Queue: d.Queue, Ready: d.Ready, Scheduled: d.Scheduled, InProgress: d.InProgress,
					OldestReadyAge: d.OldestDue})
			}
		}
		return out, errors.Join(errs...)
	}
}

// depthCollector serves the queue depth from a cache that a scrape
// refreshes when it is older than the interval: at most one call of the
// depth function per interval, whatever the scrapers and queues. Scrapes
// that arrive during a refresh wait for it (one call, not one each).
type depthCollector struct {
	fn       func(ctx context.Context) ([]QueueDepth, error)
	interval time.Duration
	timeout  time.Duration
	log      *slog.Logger
	outage   *outage.Log // its reads\' database failures, as one outage

	items, oldest, errs, refreshed *prometheus.Desc

	mu       sync.Mutex
	last     time.Time // the last refresh attempt
	ok       time.Time // the last successful one
	cache    []QueueDepth
	seen     map[queueKey]bool // queues reported before: shown as 0 once they are empty
	failures int
}

func newDepthCollector(fn func(ctx context.Context) ([]QueueDepth, error), interval, timeout time.Duration, log *slog.Logger) *depthCollector {
	return &depthCollector{
		fn: fn, interval: interval, timeout: timeout, log: log, outage: outage.New(log, "metrics"), seen: map[queueKey]bool{},
		items: prometheus.NewDesc("workq_queue_items",
			"Items of a queue by status (ready: due; scheduled: ready, due later; in_progress), read at most once per depth interval.",
			[]string{"table", "queue", "status"}, nil),
		oldest: prometheus.NewDesc("workq_queue_oldest_ready_age_seconds",
			"How long the oldest due ready item of a queue has been due (0: none is due).", []string{"table", "queue"}, nil),
		errs: prometheus.NewDesc("workq_queue_depth_errors_total",
			"Queue depth reads that failed (the last good result is served meanwhile).", nil, nil),
		refreshed: prometheus.NewDesc("workq_queue_depth_refreshed_timestamp_seconds",
			"When the queue depth was last read successfully (unix time).", nil, nil),
	}
}

func (c *depthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.items
	ch <- c.oldest
	ch <- c.errs
	ch <- c.refreshed
}

func (c *depthCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	if time.Since(c.last) >= c.interval {
		c.refresh()
	}
	cache, seen, failures, ok := c.cache, c.seen, c.failures, c.ok
	now := make(map[queueKey]bool, len(cache))
	for _, d := range cache {
		k := queueKey{d.Table, d.Queue}
		now[k] = true
		seen[k] = true
	}
	var gone []queueKey
	for k := range seen {
		if !now[k] {
			gone = append(gone, k)
		}
	}
	c.mu.Unlock()
	for _, d := range cache {
		t := string(d.Table)
		ch <- prometheus.MustNewConstMetric(c.items, prometheus.GaugeValue, float64(d.Ready), t, d.Queue, "ready")
		ch <- prometheus.MustNewConstMetric(c.items, prometheus.GaugeValue, float64(d.Scheduled), t, d.Queue, "scheduled")
		ch <- prometheus.MustNewConstMetric(c.items, prometheus.GaugeValue, float64(d.InProgress), t, d.Queue, "in_progress")
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, d.OldestReadyAge.Seconds(), t, d.Queue)
	}
	for _, k := range gone {
		t := string(k.table)
		ch <- prometheus.MustNewConstMetric(c.items, prometheus.GaugeValue, 0, t, k.queue, "ready")
		ch <- prometheus.MustNewConstMetric(c.items, prometheus.GaugeValue, 0, t, k.queue, "scheduled")
		ch <- prometheus.MustNewConstMetric(c.items, prometheus.GaugeValue, 0, t, k.queue, "in_progress")
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, 0, t, k.queue)
	}
	ch <- prometheus.MustNewConstMetric(c.errs, prometheus.CounterValue, float64(failures))
	if !ok.IsZero() {
		ch <- prometheus.MustNewConstMetric(c.refreshed, prometheus.GaugeValue, float64(ok.UnixNano())/1e9)
	}
}

// refresh calls the depth function; c.mu is held.
func (c *depthCollector) refresh() {
	c.last = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	got, err := c.fn(ctx)
	if err != nil {
		c.failures++
		if !c.outage.Failed(err) {
			c.log.Warn("metrics: reading the queue depth failed; serving the last result", "err", err)
		}
		return
	}
	c.outage.OK()
	c.cache, c.ok = got, time.Now()
}
