package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"
	_ "time/tzdata" // schedules name IANA zones: the binary carries the zone database

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/config"
	"github.com/workq/workq/workqtype"
)

func newSchedulesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedules",
		Short: "Recurring schedules that make job runs: add, update, enable, disable, remove, list, trigger",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newSchedulesAddCmd(), newSchedulesUpdateCmd(),
		newSchedulesToggleCmd("enable"), newSchedulesToggleCmd("disable"),
		newSchedulesRemoveCmd(), newSchedulesListCmd(), newSchedulesTriggerCmd())
	return cmd
}

// scheduleFlags are the fields add and update share.
type scheduleFlags struct {
	cron, timezone, queue, kind, payload, overlap, misfire string
	priority                                               int16
	maxAttempts, misfireCap                                int
}

func (s *scheduleFlags) register(f *pflag.FlagSet) {
	f.StringVar(&s.cron, "cron", "", `cron expression: 5 fields, an optional leading seconds field, @hourly/@daily/..., or "@every 90s"`)
	f.StringVar(&s.timezone, "timezone", "UTC", "IANA time zone the cron expression is read in (e.g. Europe/Berlin)")
	f.StringVar(&s.queue, "queue", "default", "queue of the job runs")
	f.StringVar(&s.kind, "kind", "", "job kind of the runs (selects the handler)")
	f.StringVar(&s.payload, "payload", "{}", "JSON object; @FILE reads it from a file, - from standard input")
	f.Int16Var(&s.priority, "priority", 0, "priority of the runs (higher runs first)")
	f.IntVar(&s.maxAttempts, "max-attempts", workqtype.DefaultMaxAttempts, "max attempts of each run (1-1000)")
	f.StringVar(&s.overlap, "overlap", string(workq.OverlapAllow), "allow, or skip a slot while the previous run is ready or running")
	f.StringVar(&s.misfire, "misfire", string(workq.MisfireRunOnce), "after downtime: run_once, skip (the missed slots) or run_all (up to --misfire-cap)")
	f.IntVar(&s.misfireCap, "misfire-cap", workqtype.DefaultMisfireCap, "run_all: at most this many missed slots run")
}

// withClient connects the operator's Client (opsClient), runs f with it
// and closes: the schedules commands read and write through the Client's
// schedule methods, as a library user would.
func withClient(cmd *cobra.Command, cfg *config.Config, f func(ctx context.Context, c *workq.Client) error) error {
	if cfg.MaxPayload < 1 || cfg.MaxPayload > config.MaxPayloadCeiling {
		return fmt.Errorf("--max-payload must be between 1 and %d bytes, got %d", config.MaxPayloadCeiling, cfg.MaxPayload)
	}
	ctx := cmd.Context()
	c, done, err := opsClient(ctx, cfg, newLogger(cfg, cmd.ErrOrStderr()))
	if err != nil {
		return err
	}
	defer done()
	return f(ctx, c)
}

func oneName(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("%s takes one schedule name, got %d arguments", cmd.CommandPath(), len(args))
	}
	return nil
}

func printSchedule(cmd *cobra.Command, asJSON bool, sc workq.Schedule, verb string) error {
	if asJSON {
		return printJSON(cmd.OutOrStdout(), sc)
	}
	next := "-"
	if sc.NextRunAt != nil {
		next = sc.NextRunAt.UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "schedule %s %s (id %d, next run %s)\n", sc.Name, verb, sc.ID, next)
	return nil
}

func newSchedulesAddCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "add NAME --cron EXPR --kind K [--timezone TZ] [--queue Q] [--payload JSON|@FILE|-] [--priority N] [--max-attempts N] [--overlap allow|skip] [--misfire run_once|skip|run_all] [--misfire-cap N] [--disabled] [--json]",
		Short: "Add a schedule",
	}
	cfg := bindConfig(cmd, "database-url", "max-payload")
	var (
		sf       scheduleFlags
		disabled bool
		asJSON   bool
	)
	sf.register(cmd.Flags())
	cmd.Flags().BoolVar(&disabled, "disabled", false, "add it disabled")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := oneName(cmd, args); err != nil {
			return err
		}
		if sf.cron == "" {
			return fmt.Errorf("--cron is required")
		}
		if sf.kind == "" {
			return fmt.Errorf("--kind is required")
		}
		raw, err := payloadFlag(cmd, sf.payload, cfg.MaxPayload)
		if err != nil {
			return err
		}
		sp := workq.ScheduleSpec{
			Name: args[0], Cron: sf.cron, Timezone: sf.timezone, Queue: sf.queue, Kind: sf.kind, Payload: raw,
			Priority: sf.priority, MaxAttempts: sf.maxAttempts, Overlap: workq.OverlapPolicy(sf.overlap),
			Misfire: workq.MisfirePolicy(sf.misfire), MisfireCap: sf.misfireCap, Disabled: disabled,
		}
		if sf.queue == "" || sf.timezone == "" || sf.maxAttempts == 0 || sf.misfireCap == 0 {
			return fmt.Errorf("%w: --queue, --timezone, --max-attempts and --misfire-cap must not be empty or zero (omit them for the defaults)", workqtype.ErrInvalid)
		}
		// CreateSchedule validates sp before it touches the database (the
		// same checks and messages as before); the Client's payload limit
		// is --max-payload (clientConfig).
		return withClient(cmd, cfg, func(ctx context.Context, client *workq.Client) error {
			sc, err := client.CreateSchedule(ctx, sp)
			if err != nil {
				return err
			}
			return printSchedule(cmd, asJSON, sc, "added")
		})
	}
	return cmd
}

func newSchedulesUpdateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "update NAME [--cron EXPR] [--timezone TZ] [--kind K] [--queue Q] [--payload JSON|@FILE|-] [--priority N] [--max-attempts N] [--overlap P] [--misfire P] [--misfire-cap N] [--json]",
		Short: "Change the given fields of a schedule (a new cron or time zone moves its next run)",
	}
	cfg := bindConfig(cmd, "database-url", "max-payload")
	var (
		sf     scheduleFlags
		asJSON bool
	)
	sf.register(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := oneName(cmd, args); err != nil {
			return err
		}
		f := cmd.Flags()
		var c workq.ScheduleChanges
		str := func(name string, v string) *string {
			if f.Changed(name) {
				return &v
			}
			return nil
		}
		c.Cron, c.Timezone, c.Queue, c.Kind = str("cron", sf.cron), str("timezone", sf.timezone), str("queue", sf.queue), str("kind", sf.kind)
		if f.Changed("priority") {
			c.Priority = &sf.priority
		}
		if f.Changed("max-attempts") {
			c.MaxAttempts = &sf.maxAttempts
		}
		if f.Changed("overlap") {
			o := workq.OverlapPolicy(sf.overlap)
			c.Overlap = &o
		}
		if f.Changed("misfire") {
			m := workq.MisfirePolicy(sf.misfire)
			c.Misfire = &m
		}
		if f.Changed("misfire-cap") {
			c.MisfireCap = &sf.misfireCap
		}
		if f.Changed("payload") {
			raw, err := payloadFlag(cmd, sf.payload, cfg.MaxPayload)
			if err != nil {
				return err
			}
			c.Payload = raw
		}
		if c == (workq.ScheduleChanges{}) {
			return fmt.Errorf("nothing to update: give at least one of --cron --timezone --kind --queue --payload --priority --max-attempts --overlap --misfire --misfire-cap")
		}
		return withClient(cmd, cfg, func(ctx context.Context, client *workq.Client) error {
			sc, err := client.UpdateSchedule(ctx, args[0], c)
			if err != nil {
				return err
			}
			return printSchedule(cmd, asJSON, sc, "updated")
		})
	}
	return cmd
}

func newSchedulesToggleCmd(verb string) *cobra.Command {
	short := "Enable a schedule (its next run is the first slot from now: no catch-up)"
	if verb == "disable" {
		short = "Disable a schedule (runs already made are not touched)"
	}
	cmd := &cobra.Command{Use: verb + " NAME [--json]", Short: short}
	cfg := bindConfig(cmd, "database-url")
	var asJSON bool
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := oneName(cmd, args); err != nil {
			return err
		}
		return withClient(cmd, cfg, func(ctx context.Context, client *workq.Client) error {
			f := client.EnableSchedule
			if verb == "disable" {
				f = client.DisableSchedule
			}
			sc, err := f(ctx, args[0])
			if err != nil {
				return err
			}
			return printSchedule(cmd, asJSON, sc, verb+"d")
		})
	}
	return cmd
}

func newSchedulesRemoveCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "remove NAME [--json]", Short: "Remove a schedule (its job runs stay)"}
	cfg := bindConfig(cmd, "database-url")
	var asJSON bool
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := oneName(cmd, args); err != nil {
			return err
		}
		return withClient(cmd, cfg, func(ctx context.Context, client *workq.Client) error {
			if err := client.DeleteSchedule(ctx, args[0]); err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), map[string]any{"removed": args[0]})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "schedule %s removed\n", args[0])
			return nil
		})
	}
	return cmd
}

func newSchedulesListCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "list [--json]", Short: "List schedules with their next run and last outcome", Args: cobra.NoArgs}
	cfg := bindConfig(cmd, "database-url")
	var asJSON bool
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return withClient(cmd, cfg, func(ctx context.Context, client *workq.Client) error {
			list, err := client.ListSchedules(ctx)
			if err != nil {
				return err
			}
			if asJSON {
				if list == nil {
					list = []workq.Schedule{}
				}
				return printJSON(cmd.OutOrStdout(), list)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tCRON\tTIMEZONE\tQUEUE\tKIND\tENABLED\tNEXT RUN\tLAST RUN\tLAST OUTCOME\tOVERLAP\tMISFIRE")
			ts := func(t *time.Time) string {
				if t == nil {
					return "-"
				}
				return t.UTC().Format(time.RFC3339)
			}
			for _, s := range list {
				outcome := s.LastOutcome
				if outcome == "" {
					outcome = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%t\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Cron, s.Timezone, s.Queue, s.Kind,
					s.Enabled, ts(s.NextRunAt), ts(s.LastRunAt), outcome, s.Overlap, s.Misfire)
			}
			return tw.Flush()
		})
	}
	return cmd
}

func newSchedulesTriggerCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "trigger NAME [--force] [--json]",
		Short: "Enqueue one run of a schedule now, outside its slots (refused while a run is live under overlap skip, unless --force)",
	}
	cfg := bindConfig(cmd, "database-url")
	var asJSON, force bool
	cmd.Flags().BoolVar(&force, "force", false, "run even when the overlap policy is skip and the previous run is still live")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := oneName(cmd, args); err != nil {
			return err
		}
		return withClient(cmd, cfg, func(ctx context.Context, client *workq.Client) error {
			tr, err := client.TriggerSchedule(ctx, args[0], force)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), tr)
			}
			fmt.Fprintln(cmd.OutOrStdout(), tr.RunID)
			return nil
		})
	}
	return cmd
}
