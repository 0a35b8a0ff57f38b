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
		st, err := collectStats(ctx, gen.New(pool))
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

type stateCount struct {
	queue   string
	status  int16
	expired bool
	count   int64
}

func collectStats(ctx context.Context, q *gen.Queries) ([]queueStats, error) {
	byKey := map[string]*queueStats{}
	for _, t := range lease.Tables {
		rows, err := countByState(ctx, q, t)
		if err != nil {
			return nil, fmt.Errorf("count %s: %w", t, err)
		}
		for _, r := range rows {
			key := string(t) + "\x00" + r.queue
			s := byKey[key]
			if s == nil {
				s = &queueStats{Table: t, Queue: r.queue}
				byKey[key] = s
			}
			switch lease.Status(r.status) {
			case lease.StatusReady:
				s.Ready += r.count
			case lease.StatusInProgress:
				s.InProgress += r.count
				if r.expired {
					s.Expired += r.count
				}
			case lease.StatusDone:
				s.Done += r.count
			case lease.StatusFailed:
				s.Failed += r.count
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

func countByState(ctx context.Context, q *gen.Queries, t lease.Table) ([]stateCount, error) {
	var out []stateCount
	switch t {
	case lease.JobRuns:
		rows, err := q.JobRunsCountByState(ctx)
		for _, r := range rows {
			out = append(out, stateCount{r.Queue, r.Status, r.Expired, r.Count})
		}
		return out, err
	case lease.Outbox:
		rows, err := q.OutboxCountByState(ctx)
		for _, r := range rows {
			out = append(out, stateCount{r.Queue, r.Status, r.Expired, r.Count})
		}
		return out, err
	case lease.Inbox:
		rows, err := q.InboxCountByState(ctx)
		for _, r := range rows {
			out = append(out, stateCount{r.Queue, r.Status, r.Expired, r.Count})
		}
		return out, err
	case lease.Timers:
		rows, err := q.TimersCountByState(ctx)
		for _, r := range rows {
			out = append(out, stateCount{r.Queue, r.Status, r.Expired, r.Count})
		}
		return out, err
	}
	return nil, fmt.Errorf("unknown table %q", t)
}
