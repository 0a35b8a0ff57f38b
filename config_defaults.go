package workq

import (
	"errors"
	"slices"

	"github.com/workq/workq/internal/dbschema"
	"github.com/workq/workq/internal/worker"
	"github.com/workq/workq/workqtype"
)

// DefaultConfig returns the Config whose every field that has a default
// is set to it: what NewClient makes of a zero field (the zero Config is
// the same Client). Use it to show or log the effective settings; the
// workq CLI declares its flags' defaults from it.
func DefaultConfig() Config {
	w := worker.DefaultConfig()
	queues := make(map[string]QueueConfig, len(w.Queues))
	for _, q := range w.Queues {
		queues[q] = QueueConfig{}
	}
	return Config{
		Schema:                  dbschema.Default,
		Queues:                  queues,
		ID:                      w.ID,
		MaxWorkers:              w.Concurrency,
		FetchBatch:              w.Batch,
		FetchPollInterval:       w.Poll,
		PollOnly:                w.PollOnly,
		NoReclaim:               w.NoReclaim,
		LeaseTTL:                w.Lease,
		JobTimeout:              w.ExecTimeout,
		DrainTimeout:            w.DrainTimeout,
		BackoffBase:             w.BackoffBase,
		BackoffCap:              w.BackoffCap,
		CompletionFlushInterval: w.FlushInterval,
		CompletionFlushBatch:    w.FlushBatch,
		RunsDir:                 w.RunsDir,
		RunsDirRetention:        w.RetainRuns,
		RunsDirPruneInterval:    w.RetentionInterval,
		OutboxQueues:            slices.Clone(w.Queues),
		InboxQueues:             slices.Clone(w.Queues),
		TimerQueues:             slices.Clone(w.Queues),
		MaxAttempts:             workqtype.DefaultMaxAttempts,
		MaxPayloadBytes:         workqtype.DefaultMaxPayload,
		NotifyDebounce:          workqtype.DefaultNotifyDebounce,
		Maintenance:             DefaultMaintenance(),
	}
}

// Validate returns every problem with cfg that NewClient would report
// (the schema, the runtime's and the maintenance's settings), and those
// every enqueue would report of its item defaults (MaxAttempts,
// MaxPayloadBytes), without a database: each matches ErrInvalid and is a
// *ValidationError naming cfg's field; nil when cfg is valid. Fields that
// need a pool or workers (Workers, PeriodicJobs, Queues' kinds) are
// checked by NewClient only.
func (cfg Config) Validate() error {
	var errs []error
	if _, err := dbschema.NewRewriter(cfg.Schema); err != nil {
		errs = append(errs, workqtype.InvalidErr("Schema", err))
	}
	errs = append(errs, validateWorker(cfg.workerConfig()), cfg.Maintenance.Validate())
	errs = append(errs, validateFlowLimits(cfg.FlowLimits))
	if _, err := workqtype.MaxAttempts("MaxAttempts", cfg.MaxAttempts, workqtype.DefaultMaxAttempts); err != nil {
		errs = append(errs, err)
	}
	if err := workqtype.CheckPayloadSize(0, cfg.MaxPayloadBytes); err != nil {
		var ve *workqtype.ValidationError
		if errors.As(err, &ve) {
			c := *ve
			c.Field = "MaxPayloadBytes"
			err = &c
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
