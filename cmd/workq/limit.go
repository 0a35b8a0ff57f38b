package main

import (
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/workq/workq"
	"github.com/workq/workq/workqtype"
)

// maxLimit is the largest limit W (workq.Client.SetQueueLimit's).
const maxLimit = math.MaxInt32

// checkLimit checks the queue and W of `limit set` (w < 0: remove) as
// SetQueueLimit does, in its words.
func checkLimit(table workq.Table, queue string, w int) error {
	if err := workqtype.CheckQueue("queue", queue); err != nil {
		return fmt.Errorf("set limit %s: %w", table, err)
	}
	if w > maxLimit {
		return fmt.Errorf("set limit of %s/%s: %w", table, queue, workqtype.Invalid("limit", fmt.Sprintf("W must be a whole number from 0 to %d, got %d", maxLimit, w)))
	}
	return nil
}

// negativeNumberFlag matches pflag's error for an argument like -1.
var negativeNumberFlag = regexp.MustCompile(` in -[0-9]`)

func newLimitCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "limit set TABLE QUEUE W | limit remove TABLE QUEUE | limit list",
		Short: "Set, remove or list the global limit W of in-progress items per (table, queue)",
		Args:  cobra.RangeArgs(1, 4),
	}
	cfg := bindConfig(cmd, "database-url")
	asJSON := cmd.Flags().Bool("json", false, "print JSON")
	// "limit set job_runs q -1" reaches the flag parser as flag -1; say what
	// is wrong with it rather than only that no such flag exists.
	cmd.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		if negativeNumberFlag.MatchString(err.Error()) {
			return fmt.Errorf("%w (W must be a whole number from 0 to %d)", err, maxLimit)
		}
		return flagError(cmd, err)
	})
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		var table workq.Table
		var w int
		switch {
		case args[0] == "list" && len(args) == 1:
		case args[0] == "set" && len(args) == 4, args[0] == "remove" && len(args) == 3:
			t, err := parseTable(args[1])
			if err != nil {
				return err
			}
			table = t
			w = -1
			if args[0] == "set" {
				n, err := strconv.Atoi(args[3])
				if err != nil || n < 0 {
					return fmt.Errorf("set limit of %s/%s: W must be a whole number from 0 to %d, got %q", table, args[2], maxLimit, args[3])
				}
				w = n
			}
			// The queue name and W's range are checked before anything
			// connects, in the words of the Client's SetQueueLimit.
			if err := checkLimit(table, args[2], w); err != nil {
				return err
			}
		default:
			return fmt.Errorf("usage: workq %s", cmd.Use)
		}
		ctx := cmd.Context()
		client, done, err := opsClient(ctx, cfg, newLogger(cfg, cmd.ErrOrStderr()))
		if err != nil {
			return err
		}
		defer done()
		if args[0] != "list" {
			q := workq.QueueRef{Table: table, Queue: args[2]}
			if w < 0 {
				err = client.RemoveQueueLimit(ctx, q)
			} else {
				err = client.SetQueueLimit(ctx, q, w)
			}
			if err != nil {
				return err
			}
			return printLimitSet(cmd.OutOrStdout(), *asJSON, table, args[2], w)
		}
		limits, err := client.ListQueueLimits(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			type limitJSON struct {
				Table         string    `json:"table"`
				Queue         string    `json:"queue"`
				MaxInProgress int       `json:"max_in_progress"`
				UpdatedAt     time.Time `json:"updated_at"`
			}
			out := make([]limitJSON, len(limits))
			for i, l := range limits {
				out[i] = limitJSON{string(l.Table), l.Queue, l.W, l.UpdatedAt}
			}
			return printJSON(cmd.OutOrStdout(), out)
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TABLE\tQUEUE\tW")
		for _, l := range limits {
			fmt.Fprintf(tw, "%s\t%s\t%d\n", l.Table, l.Queue, l.W)
		}
		return tw.Flush()
	}
	return cmd
}

// printLimitSet says what `limit set` or `limit remove` (w < 0) wrote.
func printLimitSet(out io.Writer, asJSON bool, table workq.Table, queue string, w int) error {
	if asJSON {
		v := map[string]any{"table": table, "queue": queue, "max_in_progress": w}
		if w < 0 {
			v = map[string]any{"table": table, "queue": queue, "removed": true}
		}
		return printJSON(out, v)
	}
	var err error
	switch {
	case w < 0:
		_, err = fmt.Fprintf(out, "%s/%s: limit removed (no global limit of items in progress)\n", table, queue)
	case w == 0:
		_, err = fmt.Fprintf(out, "%s/%s: limit W = 0 (no item is claimed until it is raised or removed)\n", table, queue)
	default:
		_, err = fmt.Fprintf(out, "%s/%s: limit W = %d (at most %d items in progress at once, across every worker)\n", table, queue, w, w)
	}
	return err
}
