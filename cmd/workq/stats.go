package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

func newStatsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Count work items per table and queue: by state, oldest ready age, claim and completion rates over the last minute",
		Args:  cobra.NoArgs,
	}
	cfg := bindConfig(cmd, "database-url")
	asJSON := cmd.Flags().Bool("json", false, "print JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		qs, err := listQueues(cmd, cfg)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(cmd.OutOrStdout(), queuesJSON(qs))
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "TABLE\tQUEUE\tREADY\tSCHEDULED\tIN PROGRESS\tEXPIRED\tDONE\tFAILED\tOLDEST READY\tCLAIMS/S\tCOMPLETIONS/S\t")
		for _, s := range qs {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%.2f\t%.2f\t\n", s.Table, s.Queue, s.Ready, s.Scheduled,
				s.InProgress, s.Expired, s.Done, s.Failed, age(s.OldestReadyAge), s.ClaimsPerSecond, s.CompletionsPerSecond)
		}
		return tw.Flush()
	}
	return cmd
}

// age prints a wait as "-" (none) or rounded to what a reader needs.
func age(t time.Duration) string {
	switch {
	case t <= 0:
		return "-"
	case t < time.Minute:
		return t.Round(100 * time.Millisecond).String()
	default:
		return t.Round(time.Second).String()
	}
}
