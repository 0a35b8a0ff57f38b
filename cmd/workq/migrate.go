package main

import (
	"fmt"
	"slices"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/workq/workq/db"
)

func newMigrateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:       "migrate up|down|status|version",
		Short:     "Apply, revert or inspect the schema (goose, migrations embedded in the binary)",
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"up", "down", "status", "version"},
	}
	cfg := bindConfig(cmd, "database-url")
	asJSON := cmd.Flags().Bool("json", false, "print JSON")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		// Check the action before the database, so a typo is reported as
		// such even where DATABASE_URL is unset.
		if !slices.Contains(cmd.ValidArgs, args[0]) {
			return fmt.Errorf("unknown migrate action %q (want up, down, status or version)", args[0])
		}
		if cfg.DatabaseURL == "" {
			return fmt.Errorf("DATABASE_URL is not set (or pass --database-url)")
		}
		m, err := db.OpenMigrator(cfg.DatabaseURL)
		if err != nil {
			return err
		}
		defer m.Close()
		ctx, out := cmd.Context(), cmd.OutOrStdout()
		var v int64
		switch args[0] {
		case "up":
			v, err = m.Up(ctx)
		case "down":
			v, err = m.Down(ctx)
		case "version":
			v, err = m.Version(ctx)
		case "status":
			st, err := m.Status(ctx)
			if err != nil {
				return err
			}
			if *asJSON {
				return printJSON(out, st)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "VERSION\tAPPLIED\tAPPLIED AT\tSOURCE")
			for _, s := range st {
				fmt.Fprintf(tw, "%d\t%v\t%s\t%s\n", s.Version, s.Applied, s.AppliedAt, s.Source)
			}
			return tw.Flush()
		default:
			return fmt.Errorf("unknown migrate action %q (want up, down, status or version)", args[0])
		}
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(out, map[string]int64{"version": v})
		}
		fmt.Fprintf(out, "schema version %d\n", v)
		return nil
	}
	return cmd
}
