package main

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/workq/workq/config"
	"github.com/workq/workq/maintain"
)

// maintainFlags are the settings of the maintenance process (also part of
// `workq run`).
var maintainFlags = []string{
	"reap-interval", "reap-batch", "leader-ttl", "retain-finished", "retain-runs", "retention-interval",
}

func newMaintainCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "maintain",
		Short: "Run the maintenance process: one leader (fenced lock) reaps expired leases and applies retention",
		Args:  cobra.NoArgs,
	}
	cfg := bindConfig(cmd, append([]string{"database-url", "max-conns", "worker-id", "log-level", "log-format"}, maintainFlags...)...)
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
		m, err := newMaintenance(pool, *cfg, log)
		if err != nil {
			return err
		}
		return m.Run(ctx)
	}
	return cmd
}

// newMaintenance returns the maintenance service with every built-in task.
func newMaintenance(pool *pgxpool.Pool, cfg config.Config, log *slog.Logger) (*maintain.Service, error) {
	m := maintain.New(pool, maintain.Options{Logger: log, LockTTL: cfg.LeaderTTL, Owner: cfg.WorkerID})
	reap, err := maintain.ReapTask(pool, cfg.ReapInterval, cfg.ReapBatch)
	if err != nil {
		return nil, err
	}
	retention, err := maintain.RetentionTask(pool, cfg.RetentionInterval, maintain.Retention{Finished: cfg.RetainFinished, Runs: cfg.RetainRuns})
	if err != nil {
		return nil, err
	}
	for _, t := range []maintain.Task{reap, retention} {
		if err := m.Add(t); err != nil {
			return nil, err
		}
	}
	return m, nil
}
