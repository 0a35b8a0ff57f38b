package main

import (
	"testing"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/config"
	"github.com/workq/workq/internal/worker"
)

// TestConfigDefaultsAreTheComponents: every default the CLI's flags show
// is the owning component's (the worker runtime's, the maintenance's),
// written once there, and clientConfig maps the flags onto workq.Config
// fields with the CLI's "0 means none" as the library's negative.
func TestConfigDefaultsAreTheComponents(t *testing.T) {
	cfg := config.Default()
	c := clientConfig(cfg, nil, nil, nil)
	w, m := worker.DefaultConfig(), workq.DefaultMaintenance()
	for _, d := range []struct {
		name      string
		cli, comp any
	}{
		{"concurrency", c.MaxWorkers, w.Concurrency},
		{"batch", c.FetchBatch, w.Batch},
		{"poll", c.FetchPollInterval, w.Poll},
		{"lease", c.LeaseTTL, w.Lease},
		{"exec-timeout", c.JobTimeout, w.ExecTimeout},
		{"drain-timeout", c.DrainTimeout, w.DrainTimeout},
		{"backoff-base", c.BackoffBase, w.BackoffBase},
		{"backoff-cap", c.BackoffCap, w.BackoffCap},
		{"flush-interval", c.CompletionFlushInterval, w.FlushInterval},
		{"flush-batch", c.CompletionFlushBatch, w.FlushBatch},
		{"retain-runs (runs dir)", c.RunsDirRetention, w.RetainRuns},
		{"leader-ttl", c.Maintenance.LeaderTTL, m.LeaderTTL},
		{"reap-interval", c.Maintenance.ReapInterval, m.ReapInterval},
		{"reap-batch", c.Maintenance.ReapBatch, m.ReapBatch},
		{"retain-finished", c.Maintenance.RetainFinished, m.RetainFinished},
		{"retain-runs", c.Maintenance.RetainRuns, m.RetainRuns},
		{"retention-interval", c.Maintenance.RetentionInterval, m.RetentionInterval},
		{"inbox-window", c.Maintenance.InboxWindow, m.InboxWindow},
		{"schedule-interval", c.Maintenance.ScheduleInterval, m.ScheduleInterval},
	} {
		if d.cli != d.comp {
			t.Errorf("--%s defaults to %v in the CLI, %v in its component", d.name, d.cli, d.comp)
		}
	}
	if len(c.Queues) != 1 || c.Queues["default"] != (workq.QueueConfig{}) {
		t.Errorf("--queues default: Config.Queues %v, want the queue default", c.Queues)
	}
	// The CLI's 0 (none) is the library's negative (none).
	cfg.ExecTimeout, cfg.DrainTimeout, cfg.RetainRuns, cfg.RetainFinished = 0, 0, 0, 0
	c = clientConfig(cfg, nil, nil, nil)
	for name, v := range map[string]time.Duration{"exec-timeout": c.JobTimeout, "drain-timeout": c.DrainTimeout,
		"retain-runs": c.RunsDirRetention, "retain-finished": c.Maintenance.RetainFinished} {
		if v >= 0 {
			t.Errorf("--%s 0 (none) maps to %s, want negative (none)", name, v)
		}
	}
}
