package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/workq/workq"
)

func newQueueCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "queue", Short: "Pause, resume and list queues of every work table"}
	cmd.AddCommand(newQueuePauseCmd(true), newQueuePauseCmd(false), newQueueListCmd())
	return cmd
}

// newQueuePauseCmd is `workq queue pause` (pause) or `workq queue resume`.
func newQueuePauseCmd(pause bool) *cobra.Command {
	verb, short := "resume", "Let workers claim from a paused queue again (they are woken at once)"
	if pause {
		verb, short = "pause", "Stop every worker of every process from claiming from a queue; items in flight finish"
	}
	cmd := &cobra.Command{Use: verb + " TABLE QUEUE", Short: short, Args: cobra.ExactArgs(2)}
	cfg := bindConfig(cmd, "database-url")
	f := cmd.Flags()
	var actor, reason *string
	if pause {
		actor = f.String("actor", defaultActor(), "who pauses (kept with the pause)")
		reason = f.String("reason", "", "why (kept with the pause)")
	}
	asJSON := f.Bool("json", false, "print JSON")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		table, err := parseTable(args[0])
		if err != nil {
			return err
		}
		ctx := cmd.Context()
		client, done, err := opsClient(ctx, cfg, newLogger(cfg, cmd.ErrOrStderr()))
		if err != nil {
			return err
		}
		defer done()
		q := workq.QueueRef{Table: table, Queue: args[1]}
		var changed bool
		if pause {
			changed, err = client.PauseQueue(ctx, q, &workq.ActionOpts{Actor: *actor, Reason: *reason})
		} else {
			changed, err = client.ResumeQueue(ctx, q)
		}
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(cmd.OutOrStdout(), map[string]any{"table": table, "queue": args[1], "paused": pause, "changed": changed})
		}
		state := map[bool]string{true: "paused", false: "running"}[pause]
		if !changed {
			fmt.Fprintf(cmd.OutOrStdout(), "%s/%s was already %s\n", table, args[1], state)
			return nil
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s/%s %s\n", table, args[1], state)
		return nil
	}
	return cmd
}

func newQueueListCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "list", Short: "List every (table, queue) with its state, limit W and depth", Args: cobra.NoArgs}
	cfg := bindConfig(cmd, "database-url")
	asJSON := cmd.Flags().Bool("json", false, "print JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		out, err := listQueues(cmd, cfg)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(cmd.OutOrStdout(), queuesJSON(out))
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TABLE\tQUEUE\tSTATE\tW\tREADY\tSCHEDULED\tIN PROGRESS\tDONE\tFAILED\tOLDEST READY")
		for _, r := range out {
			state, w := "running", "-"
			if r.Paused {
				state = "paused by " + r.PausedBy
			}
			if r.Limit != nil {
				w = fmt.Sprint(*r.Limit)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", r.Table, r.Queue, state, w, r.Ready, r.Scheduled,
				r.InProgress, r.Done, r.Failed, age(r.OldestReadyAge))
		}
		return tw.Flush()
	}
	return cmd
}
