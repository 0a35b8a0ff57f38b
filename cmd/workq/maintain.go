package main

import (
	"github.com/spf13/cobra"

	"github.com/workq/workq/internal/config"
)

// maintainFlags are the settings of the maintenance process (also part of
// `workq run`).
var maintainFlags = []string{
	"reap-interval", "reap-batch", "leader-ttl", "retain-finished", "retain-runs", "retention-interval",
	"inbox-window", "schedule-interval", "vacuum-interval",
}

func newMaintainCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use: "maintain",
		Short: "Run the maintenance process: one leader (fenced lock) reaps expired leases, materialises schedules, " +
			"fails overdue joins and applies retention",
		Args: cobra.NoArgs,
	}
	// --lease is the workers' lease, for the stuck-items task.
	cfg := bindConfig(cmd, append(append([]string{"database-url", "max-conns", "worker-id", "log-level", "log-format", "lease"},
		maintainFlags...), config.ObservabilityFlags...)...)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := cfg.Validate(); err != nil {
			return err
		}
		log := newLogger(cfg, cmd.ErrOrStderr())
		ctx := cmd.Context()
		pool, done, err := connect(ctx, cfg, log, needSchema)
		if err != nil {
			return err
		}
		defer done()
		obs, err := startObservability(ctx, *cfg, pool, log)
		if err != nil {
			return err
		}
		defer obs.close()
		// A Client without workers: it runs every built-in maintenance task.
		client, err := newClient(pool, *cfg, log, nil, obs, false)
		if err != nil {
			return err
		}
		return client.Run(ctx)
	}
	return cmd
}
