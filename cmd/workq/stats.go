package main

import (
	"context"
	"fmt"
	"sort"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/workq/workq/db/gen"
	"github.com/workq/workq/lease"
)

// queueStats counts one (table, queue) by state.
type queueStats struct {
	Table      lease.Table `json:"table"`
	Queue      string      `json:"queue"`
	Ready      int64       `json:"ready"`
	InProgress int64       `json:"in_progress"`
	Expired    int64       `json:"expired"` // in progress with an expired lease, not yet reaped
	Done       int64       `json:"done"`
	Failed     int64       `json:"failed"`
}

func newStatsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Count work items per table, queue and state",
		Args:  cobra.NoArgs,
	}
	cfg := bindConfig(cmd, "database-url")
	asJSON := cmd.Flags().Bool("json", false, "print JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		pool, done, err := connect(ctx, cfg, newLogger(cfg, cmd.ErrOrStderr()), false)
		if err != nil {
			return err
		}
		defer done()
		st, err := collectStats(ctx, pool)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(cmd.OutOrStdout(), st)
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "TABLE\tQUEUE\tREADY\tIN PROGRESS\tEXPIRED\tDONE\tFAILED\t")
		for _, s := range st {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t\n", s.Table, s.Queue, s.Ready, s.InProgress, s.Expired, s.Done, s.Failed)
		}
		return tw.Flush()
	}
	return cmd
}

func collectStats(ctx context.Context, db gen.DBTX) ([]queueStats, error) {
	byKey := map[string]*queueStats{}
	for _, t := range lease.Tables {
		rows, err := lease.New(db, t).CountByState(ctx)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			key := string(t) + "\x00" + r.Queue
			s := byKey[key]
			if s == nil {
				s = &queueStats{Table: t, Queue: r.Queue}
				byKey[key] = s
			}
			switch r.Status {
			case lease.StatusReady:
				s.Ready += r.Count
			case lease.StatusInProgress:
				s.InProgress += r.Count
				if r.Expired {
					s.Expired += r.Count
				}
			case lease.StatusDone:
				s.Done += r.Count
			case lease.StatusFailed:
				s.Failed += r.Count
			}
		}
	}
	out := make([]queueStats, 0, len(byKey))
	for _, s := range byKey {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Table != out[j].Table {
			return out[i].Table < out[j].Table
		}
		return out[i].Queue < out[j].Queue
	})
	return out, nil
}
