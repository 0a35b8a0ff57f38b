package workq

import (
	"errors"
	"maps"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/metrics"
	"github.com/workq/workq/internal/shardlimit"
	"github.com/workq/workq/internal/worker"
	"github.com/workq/workq/workqtype"
)

// The Client's settings of the worker runtime are named fields of Config
// (River's shape); the runtime (internal/worker) owns their one default
// and one validation, and the root only maps them here.

// workerConfig returns the runtime's configuration of cfg: its names are
// the job-run queues worked (default ["default"]), their MaxWorkers the
// per-queue concurrency on every table worked (0: Config.MaxWorkers).
func (cfg Config) workerConfig() worker.Config {
	wc := worker.Config{
		ID:                cfg.ID,
		Concurrency:       cfg.MaxWorkers,
		Batch:             cfg.FetchBatch,
		Lease:             cfg.LeaseTTL,
		ExecTimeout:       cfg.JobTimeout,
		Poll:              cfg.FetchPollInterval,
		PollOnly:          cfg.PollOnly,
		NoReclaim:         cfg.NoReclaim,
		FlushInterval:     cfg.CompletionFlushInterval,
		FlushBatch:        cfg.CompletionFlushBatch,
		DrainTimeout:      cfg.DrainTimeout,
		RunsDir:           cfg.RunsDir,
		RetainRuns:        cfg.RunsDirRetention,
		RetentionInterval: cfg.RunsDirPruneInterval,
		BackoffBase:       cfg.BackoffBase,
		BackoffCap:        cfg.BackoffCap,
	}
	if len(cfg.Queues) == 0 {
		return wc
	}
	wc.Queues = slices.Sorted(maps.Keys(cfg.Queues))
	for _, q := range wc.Queues {
		if n := cfg.Queues[q].MaxWorkers; n != 0 {
			if wc.QueueConcurrency == nil {
				wc.QueueConcurrency = map[string]int{}
			}
			wc.QueueConcurrency[q] = n
		}
	}
	return wc
}

// configFields are the runtime's field names (internal/worker.Config) as
// Config calls them, for the Field of the runtime's validation errors.
var configFields = map[string]string{
	"ID": "ID", "Queues": "Queues", "QueueConcurrency": "Queues", "Concurrency": "MaxWorkers",
	"Batch": "FetchBatch", "Lease": "LeaseTTL", "ExecTimeout": "JobTimeout", "Poll": "FetchPollInterval",
	"FlushInterval": "CompletionFlushInterval", "FlushBatch": "CompletionFlushBatch",
	"DrainTimeout": "DrainTimeout", "RetainRuns": "RunsDirRetention", "RetentionInterval": "RunsDirPruneInterval",
	"BackoffBase": "BackoffBase", "BackoffCap": "BackoffCap",
}

// validateWorker is the runtime's validation of wc, its errors naming
// Config's fields.
func validateWorker(wc worker.Config) error {
	err := wc.Validate()
	if err == nil {
		return nil
	}
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = e
		var ve *workqtype.ValidationError
		if errors.As(e, &ve) {
			if name, ok := configFields[ve.Field]; ok && name != ve.Field {
				c := *ve
				c.Field = name
				out[i] = &c
			}
		}
	}
	return errors.Join(out...)
}

// GlobalLimit is a global limit over every shard of a sharded Client
// (ShardingConfig.GlobalLimits): at most W items of the queue of Table
// ("job_runs", "outbox", "inbox" or "timers") in progress across all of
// them (0 or more).
type GlobalLimit struct {
	Table string
	Queue string
	W     int
}

// limits returns ls as the leader's limits (validated by it).
func limits(ls []GlobalLimit) []shardlimit.Limit {
	out := make([]shardlimit.Limit, len(ls))
	for i, l := range ls {
		out[i] = shardlimit.Limit{Table: lease.Table(l.Table), Queue: l.Queue, W: l.W}
	}
	return out
}

// clientMetrics returns the metrics the Client reports to:
// Config.MetricsRegisterer's collectors, made once (a sharded Client
// shares them with its shards), or the process's own set when the
// registerer is one (the CLI's, internal/metrics); nil without.
func clientMetrics(cfg Config) (*metrics.Metrics, error) {
	switch r := cfg.MetricsRegisterer.(type) {
	case nil:
		return nil, nil
	case *metrics.Metrics:
		return r, nil
	default:
		return metrics.New(metrics.Options{Registerer: r, Logger: cfg.Logger})
	}
}

var _ prometheus.Registerer = (*metrics.Metrics)(nil)
