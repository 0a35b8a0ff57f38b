package main

import (
	"fmt"
	"slices"
	"text/tabwriter"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/workq/workq/migrate"
)

var migrateActions = []string{"up", "down", "status", "version", "sql"}

func newMigrateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate up|down|status|version|sql",
		Short: "Apply, revert, inspect or print the schema (migrations embedded in the binary)",
		Long: `Apply, revert, inspect or print workq's schema in the PostgreSQL schema
--schema (default workq). Applied versions are kept in <schema>.workq_migrations.

  up       apply every pending migration; the first run is one transaction,
           all or nothing, that also moves a database of the old layout
           (workq's own objects in public, never an application's tables)
           into the schema
  down     revert the newest applied migration
  status   list the migrations and whether each is applied
  version  print the newest applied version
  sql      print the SQL script from --from to --to (default: 0 to the latest),
           for teams that run their own migration tool; needs no database`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: migrateActions,
	}
	cfg := bindConfig(cmd, "database-url", "schema")
	asJSON := cmd.Flags().Bool("json", false, "print JSON")
	from := cmd.Flags().Int64("from", 0, "sql: the version the database is at")
	to := cmd.Flags().Int64("to", 0, "sql: the version to reach (0: the latest when --from is below it)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		// Check the action before the database, so a typo is reported as
		// such even where DATABASE_URL is unset.
		if !slices.Contains(migrateActions, args[0]) {
			return fmt.Errorf("unknown migrate action %q (want up, down, status, version or sql)", args[0])
		}
		ctx, out := cmd.Context(), cmd.OutOrStdout()
		if args[0] == "sql" {
			m, err := migrate.New(nil, migrate.Options{Schema: cfg.Schema})
			if err != nil {
				return err
			}
			script, err := m.SQL(*from, *to)
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(out, script)
			return err
		}
		if _, err := migrate.New(nil, migrate.Options{Schema: cfg.Schema}); err != nil {
			return err // an invalid schema name, before connecting
		}
		if cfg.DatabaseURL == "" {
			return fmt.Errorf("DATABASE_URL is not set (or pass --database-url)")
		}
		if err := checkDatabaseURL("DATABASE_URL", cfg.DatabaseURL); err != nil {
			return err
		}
		conn, err := pgx.Connect(ctx, cfg.DatabaseURL)
		if err != nil {
			return fmt.Errorf("open database: %w", err)
		}
		defer conn.Close(ctx)
		m, err := migrate.New(conn, migrate.Options{Schema: cfg.Schema})
		if err != nil {
			return err
		}
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
		}
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(out, map[string]any{"version": v, "schema": m.Schema()})
		}
		fmt.Fprintf(out, "schema %s at version %d\n", m.Schema(), v)
		return nil
	}
	return cmd
}
