package workq

import (
	"errors"
	"fmt"
	"slices"

	"github.com/workq/workq/internal/clienthook"
	"github.com/workq/workq/internal/dbschema"
	"github.com/workq/workq/internal/worker"
	"github.com/workq/workq/workqtype"
)

// cmd/workq declares its flags from Config's fields: it takes their
// defaults and its values' validation from here (internal/clienthook), so
// each setting has one default and one validation, the library's. The
// hooks are registered when the package is loaded (unlike the Surface's,
// registered by NewWorkers and NewClient): the CLI needs the defaults to
// declare its flags, before any Client exists.
func init() {
	clienthook.RegisterConfig(clienthook.Config{
		Defaults: func() any { return defaultConfig() },
		Validate: func(cfg any) error {
			c, ok := cfg.(Config)
			if !ok {
				return fmt.Errorf("workq: %T is not a workq.Config", cfg)
			}
			return c.validate()
		},
	})
}

// defaultConfig returns the Config whose every field that has a default is
// set to it: what NewClient makes of a zero field. The worker runtime's
// come from internal/worker (its one default; workerConfig is the inverse
// of this mapping), the maintenance's from DefaultMaintenance.
func defaultConfig() Config {
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

// validate returns every problem with cfg that NewClient reports (the
// schema, the worker runtime's and the maintenance's validation), and
// those every enqueue would report of its item defaults (MaxAttempts,
// MaxPayloadBytes, which NewClient leaves to the enqueue), each a
// *workqtype.ValidationError naming cfg's field.
func (cfg Config) validate() error {
	var errs []error
	if _, err := dbschema.NewRewriter(cfg.Schema); err != nil {
		errs = append(errs, workqtype.InvalidErr("Schema", err))
	}
	errs = append(errs, validateWorker(cfg.workerConfig()), cfg.Maintenance.Validate())
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
