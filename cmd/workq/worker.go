package main

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/workq/workq/config"
	"github.com/workq/workq/worker"
	"github.com/workq/workq/worker/builtin"
)

// workerFlags are the settings `workq worker` and `workq run` accept.
var workerFlags = []string{
	"database-url", "max-conns", "worker-id", "queues", "concurrency", "batch", "lease", "exec-timeout",
	"poll", "poll-only", "reclaim", "flush-interval", "flush-batch", "drain-timeout", "runs-dir",
	"backoff-base", "backoff-cap", "webhook-allow", "webhook-secret", "webhook-timeout", "exec-allow",
	"log-level", "log-format",
}

func newWorkerCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run a standalone worker process (built-in handlers: webhook, exec, noop)",
		Args:  cobra.NoArgs,
	}
	cfg := bindConfig(cmd, workerFlags...)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := cfg.Validate(); err != nil {
			return err
		}
		log := newLogger(cfg, cmd.ErrOrStderr())
		ctx := cmd.Context()
		pool, done, err := connect(ctx, cfg, log, false)
		if err != nil {
			return err
		}
		defer done()
		w, err := newBuiltinWorker(pool, *cfg, log)
		if err != nil {
			return err
		}
		return w.Run(ctx)
	}
	return cmd
}

// newBuiltinWorker returns a worker with the built-in handlers registered.
func newBuiltinWorker(pool *pgxpool.Pool, cfg config.Config, log *slog.Logger) (*worker.Worker, error) {
	w, err := worker.New(pool, cfg, worker.Options{Logger: log})
	if err != nil {
		return nil, err
	}
	if err := registerBuiltins(w, cfg); err != nil {
		return nil, err
	}
	return w, nil
}

func registerBuiltins(w *worker.Worker, cfg config.Config) error {
	ex, err := builtin.NewExec(cfg.ExecAllow)
	if err != nil {
		return err
	}
	wh := builtin.NewWebhook(cfg.WebhookAllow, cfg.WebhookSecret, cfg.WebhookTimeout)
	if err := w.Register(builtin.WebhookKind, wh.Handle); err != nil {
		return err
	}
	if err := w.Register(builtin.ExecKind, ex.Handle); err != nil {
		return err
	}
	return w.Register(builtin.NoopKind, builtin.Noop)
}
