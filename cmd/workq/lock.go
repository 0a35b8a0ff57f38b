package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/workq/workq/internal/lock"
)

func newLockCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "lock", Short: "Inspect the distributed locks (the maintenance leader is one)"}
	list := &cobra.Command{Use: "list", Short: "List locks with their holder, fencing token and expiry", Args: cobra.NoArgs}
	cfg := bindConfig(list, "database-url")
	asJSON := list.Flags().Bool("json", false, "print JSON")
	list.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		pool, done, err := connectDB(ctx, cfg, newLogger(cfg, cmd.ErrOrStderr()))
		if err != nil {
			return err
		}
		defer done()
		locks, err := lock.List(ctx, pool)
		if err != nil {
			return err
		}
		if *asJSON {
			if locks == nil {
				locks = []lock.Info{}
			}
			return printJSON(cmd.OutOrStdout(), locks)
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tOWNER\tTOKEN\tHELD\tEXPIRES\tACQUIRED")
		for _, l := range locks {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%t\t%s\t%s\n", l.Name, l.Owner, l.Token, l.Held,
				l.ExpiresAt.UTC().Format(time.RFC3339Nano), l.AcquiredAt.UTC().Format(time.RFC3339))
		}
		return tw.Flush()
	}
	cmd.AddCommand(list)
	return cmd
}
