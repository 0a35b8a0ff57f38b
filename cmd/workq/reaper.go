package main

import (
	"github.com/spf13/cobra"

	"github.com/workq/workq/internal/reaper"
)

func newReaperCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use: "reaper",
		Short: "Run the reaper: requeue expired leases and fail exhausted items on every work table " +
			"(the reap task of workq maintain, alone and without a leader)",
		Args: cobra.NoArgs,
	}
	cfg := bindConfig(cmd, "database-url", "max-conns", "reap-interval", "reap-batch", "log-level", "log-format")
	once := cmd.Flags().Bool("once", false, "reap once and exit")
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
		r, err := reaper.New(inSchema(cfg, pool), cfg.ReapInterval, cfg.ReapBatch, log)
		if err != nil {
			return err
		}
		if *once {
			got, err := r.RunOnce(ctx)
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), got)
		}
		return r.Run(ctx)
	}
	return cmd
}
