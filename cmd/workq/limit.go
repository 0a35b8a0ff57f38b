package main

import (
	"fmt"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/workq/workq/config"
	"github.com/workq/workq/db/gen"
	"github.com/workq/workq/lease"
)

func newLimitCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "limit set TABLE QUEUE W | limit remove TABLE QUEUE | limit list",
		Short: "Set, remove or list the global limit W of in-progress items per (table, queue)",
		Args:  cobra.RangeArgs(1, 4),
	}
	cfg := bindConfig(cmd, "database-url")
	asJSON := cmd.Flags().Bool("json", false, "print JSON (list)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		var table lease.Table
		var w int
		switch {
		case args[0] == "list" && len(args) == 1:
		case args[0] == "set" && len(args) == 4, args[0] == "remove" && len(args) == 3:
			t, err := lease.ParseTable(args[1])
			if err != nil {
				return err
			}
			table = t
			if !config.ValidName(args[2]) {
				return fmt.Errorf("queue %q is not a valid name", args[2])
			}
			w = -1
			if args[0] == "set" {
				n, err := strconv.Atoi(args[3])
				if err != nil || n < 0 {
					return fmt.Errorf("W must be a whole number >= 0, got %q", args[3])
				}
				w = n
			}
		default:
			return fmt.Errorf("usage: workq %s", cmd.Use)
		}
		ctx := cmd.Context()
		pool, done, err := connect(ctx, cfg, newLogger(cfg, cmd.ErrOrStderr()), false)
		if err != nil {
			return err
		}
		defer done()
		if args[0] != "list" {
			return lease.SetLimit(ctx, pool, table, args[2], w)
		}
		limits, err := gen.New(pool).QueueLimitsList(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(cmd.OutOrStdout(), limits)
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TABLE\tQUEUE\tW")
		for _, l := range limits {
			fmt.Fprintf(tw, "%s\t%s\t%d\n", l.WorkTable, l.Queue, l.MaxInProgress)
		}
		return tw.Flush()
	}
	return cmd
}
