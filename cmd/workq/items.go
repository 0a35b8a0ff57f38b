package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/workqtype"
)

// The operator's verbs on items, one implementation for every table (package
// admin): `workq jobs list|show|retry|cancel|delete`, and the verbs the
// outbox, inbox and timers commands share with it.

// action is one verb that acts on ids: retry, cancel or delete.
type action struct {
	verb      string // retry, cancel, delete
	done      string // text and JSON key of the ids acted on: retried, cancelled, deleted
	skipKey   string // JSON key of the ids left alone: not_failed, finished, not_finished
	only      string // which items the verb takes, with %s for the plural of what: "only failed or cancelled %s can be retried"
	needActor bool   // archived with an actor and reason (retry, cancel)
	do        func(ctx context.Context, db gen.DBTX, table lease.Table, by admin.Actor, ids []int64) (admin.Result, error)
}

var (
	retryAction = action{verb: "retry", done: "retried", skipKey: "not_failed", only: "only failed or cancelled %s can be retried", needActor: true,
		do: func(ctx context.Context, db gen.DBTX, t lease.Table, by admin.Actor, ids []int64) (admin.Result, error) {
			return admin.Retry(ctx, db, t, by, ids...)
		}}
	cancelAction = action{verb: "cancel", done: "cancelled", skipKey: "finished", only: "only ready or running %s can be cancelled", needActor: true,
		do: func(ctx context.Context, db gen.DBTX, t lease.Table, by admin.Actor, ids []int64) (admin.Result, error) {
			return admin.Cancel(ctx, db, t, by, ids...)
		}}
	deleteAction = action{verb: "delete", done: "deleted", skipKey: "not_finished", only: "only finished (done, failed or cancelled) %s can be deleted",
		do: func(ctx context.Context, db gen.DBTX, t lease.Table, _ admin.Actor, ids []int64) (admin.Result, error) {
			return admin.Delete(ctx, db, t, ids...)
		}}
)

// skipped is one id an action left alone, as the command names it (42, or
// eu:42 over shards), and its state ("" when it does not exist).
type skipped struct{ label, state string }

// skippedOf lists r's skipped ids, labelled by label.
func skippedOf(r admin.Result, label func(int64) string) []skipped {
	out := make([]skipped, 0, len(r.Skipped))
	for _, id := range r.Skipped {
		out = append(out, skipped{label(id), r.States[id]}) // "" for r.NotFound
	}
	return out
}

// leftAlone is the error of the ids an action left alone, telling those
// that do not exist (wrapping admin.ErrNotFound) from those in a state the
// verb does not take (admin.ErrWrongState): "job run 42 not found", "job
// run 43 is done; only failed or cancelled job runs can be retried".
func (a action) leftAlone(what string, ids []skipped) error {
	var missing, wrong []string
	for _, s := range ids {
		if s.state == "" {
			missing = append(missing, s.label)
		} else {
			wrong = append(wrong, s.label+" is "+s.state)
		}
	}
	var errs []error
	switch len(missing) {
	case 0:
	case 1:
		errs = append(errs, reasonError{fmt.Sprintf("%s %s not found", what, missing[0]), admin.ErrNotFound})
	default:
		errs = append(errs, reasonError{fmt.Sprintf("%d %ss not found: %s", len(missing), what, strings.Join(missing, ", ")), admin.ErrNotFound})
	}
	only := fmt.Sprintf(a.only, what+"s")
	switch len(wrong) {
	case 0:
	case 1:
		errs = append(errs, reasonError{fmt.Sprintf("%s %s; %s", what, wrong[0], only), admin.ErrWrongState})
	default:
		errs = append(errs, reasonError{fmt.Sprintf("%d %ss left alone (%s); %s", len(wrong), what, strings.Join(wrong, ", "), only), admin.ErrWrongState})
	}
	return errors.Join(errs...)
}

// reasonError is an error whose text is its own and that wraps a
// sentinel a caller can test with errors.Is.
type reasonError struct {
	msg string
	is  error
}

func (e reasonError) Error() string { return e.msg }
func (e reasonError) Unwrap() error { return e.is }

// newActionCmd returns the command of one action on table; what names the
// items in texts ("job run"). Every id is checked before the database is
// touched; ids left alone are listed and make the command exit non-zero.
func newActionCmd(table lease.Table, what, use, short string, a action) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, Args: cobra.MinimumNArgs(1)}
	cfg := bindConfig(cmd, "database-url")
	f := cmd.Flags()
	var actor, reason *string
	if a.needActor {
		actor = f.String("actor", defaultActor(), "who (recorded in the run archive)")
		reason = f.String("reason", "", "why (recorded in the run archive)")
	}
	asJSON := f.Bool("json", false, "print JSON")
	shards := bindItemShards(cmd, "ids are SHARD:ID, acted on per shard",
		"connecting to one shard; a shard slower than it is down, its ids not acted on")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		specs, err := shards.parse(cmd)
		if err != nil {
			return err
		}
		var ids []int64
		var groups []shardIDs
		if specs != nil {
			if groups, err = parseShardIDs(args, what, specs); err != nil {
				return err
			}
		} else {
			if ids, err = parseIDs(args, what); err != nil {
				return err
			}
			if err := admin.CheckIDs(ids); err != nil {
				return err
			}
		}
		var by admin.Actor
		if a.needActor {
			if strings.TrimSpace(*actor) == "" {
				return fmt.Errorf("--actor must not be empty")
			}
			by = admin.Actor{Name: *actor, Reason: *reason}
		}
		if specs != nil {
			return a.runSharded(cmd, cfg, *shards.timeout, table, what, by, groups, *asJSON)
		}
		ctx := cmd.Context()
		client, done, err := opsClient(ctx, cfg, newLogger(cfg, cmd.ErrOrStderr()))
		if err != nil {
			return err
		}
		defer done()
		r, err := a.viaClient(ctx, client, table, by, ids)
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		// A running item's cancel is requested: its worker stops the
		// handler and it ends cancelled when the attempt ends.
		requested := make(map[int64]bool, len(r.Requested))
		for _, id := range r.Requested {
			requested[id] = true
		}
		if *asJSON {
			m := map[string]any{a.done: r.Applied, a.skipKey: r.Skipped, "not_found": r.NotFound}
			if a.verb == "cancel" {
				m["requested"] = append([]int64{}, r.Requested...)
			}
			if err := printJSON(out, m); err != nil {
				return err
			}
		} else {
			for _, id := range r.Applied {
				if requested[id] {
					fmt.Fprintf(out, "cancel requested %d (running: its worker stops it)\n", id)
					continue
				}
				fmt.Fprintf(out, "%s %d\n", a.done, id)
			}
		}
		if len(r.Skipped) > 0 {
			return a.leftAlone(what, skippedOf(r, func(id int64) string { return strconv.FormatInt(id, 10) }))
		}
		return nil
	}
	return cmd
}

// newJobsCmd is `workq jobs`: the operator's verbs on job runs.
func newJobsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "jobs", Short: "Inspect job runs and act on them: list, show, retry, cancel, delete"}
	const what = "job run"
	cmd.AddCommand(
		newItemsListCmd(lease.JobRuns, "kind", "list [--queue Q] [--status S] [--kind K] [--created-after T] [--created-before T] [--before ID] [--limit N] [--json]",
			"List job runs, newest first (keyset pages: --before the NEXT id printed)"),
		newItemShowCmd(lease.JobRuns, what, "show ID [--json]", "Show one job run with its payload and its attempts from the run archive"),
		newActionCmd(lease.JobRuns, what, "retry ID... [--reason R] [--actor A] [--json]",
			"Put failed (or cancelled) job runs back to ready, attempts reset, recorded in the run archive", retryAction),
		newActionCmd(lease.JobRuns, what, "cancel ID... [--reason R] [--actor A] [--json]",
			"Cancel job runs: ready ones at once, running ones through their worker (cancelled, 'cancelled by <actor>', recorded in the run archive)", cancelAction),
		newActionCmd(lease.JobRuns, what, "delete ID... [--json]",
			"Delete finished (done or failed) job runs; their archived attempts stay", deleteAction),
	)
	return cmd
}

// newItemsListCmd lists one table's items through admin.List; kindFlag is
// what the table calls its kind ("kind" or "topic").
func newItemsListCmd(table lease.Table, kindFlag, use, short string) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs}
	cfg := bindConfig(cmd, "database-url")
	f := cmd.Flags()
	var flt admin.Filter
	var after, before string
	f.StringVar(&flt.Queue, "queue", "", "only this queue")
	f.StringVar(&flt.Status, "status", "", "only this status: "+strings.Join(admin.Statuses, ", "))
	f.StringVar(&flt.Kind, kindFlag, "", "only this "+kindFlag)
	f.StringVar(&after, "created-after", "", "only items created at or after this time (RFC 3339)")
	f.StringVar(&before, "created-before", "", "only items created before this time (RFC 3339)")
	f.Int64Var(&flt.Before, "before", 0, "page cursor: items with smaller ids (the NEXT id of the previous page)")
	f.IntVar(&flt.Limit, "limit", admin.DefaultLimit, fmt.Sprintf("items per page (1-%d)", admin.MaxLimit))
	asJSON := f.Bool("json", false, "print JSON ({\"items\": [...], \"next\": ID}; with --shard {\"items\": [...], \"next_cursor\": C, \"down\": [...]})")
	shards := bindItemShards(cmd, "lists every shard's items merged newest first, each with its shard",
		"connecting to one shard and reading its page; a shard slower than it is down, left out with a warning (exit code 3)")
	var only, cursorText string
	f.StringVar(&only, "shard-only", "", "with --shard: list only this shard's items")
	f.StringVar(&cursorText, "cursor", "", "with --shard: page cursor (the NEXT cursor of the previous page)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		specs, err := shards.parse(cmd)
		if err != nil {
			return err
		}
		if specs == nil && (only != "" || cursorText != "") {
			return fmt.Errorf("--shard-only and --cursor are for a list over --shard: without it, page with --before")
		}
		if flt.CreatedAfter, err = parseTimeFlag("--created-after", after); err != nil {
			return err
		}
		if flt.CreatedBefore, err = parseTimeFlag("--created-before", before); err != nil {
			return err
		}
		if flt.Limit < 1 {
			return fmt.Errorf("--limit %d: want 1 to %d", flt.Limit, admin.MaxLimit)
		}
		if err := flt.Validate(); err != nil {
			return err
		}
		if specs != nil {
			return listSharded(cmd, cfg, *shards.timeout, table, kindFlag, specs, only, cursorText, flt, *asJSON)
		}
		ctx := cmd.Context()
		pool, done, err := connectDB(ctx, cfg, newLogger(cfg, cmd.ErrOrStderr()))
		if err != nil {
			return err
		}
		defer done()
		p, err := admin.List(ctx, pool, table, flt)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(cmd.OutOrStdout(), p)
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "ID\tQUEUE\t%s\tSTATE\tATTEMPTS\tRUN/ENDED AT\tLAST ERROR\n", strings.ToUpper(kindFlag))
		for _, it := range p.Items {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d/%d\t%s\t%s\n", it.ID, it.Queue, it.Kind, it.State, it.Attempts, it.MaxAttempts,
				it.WhenAt().Format(time.RFC3339), cell(it.LastError, 60))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if p.Next != 0 {
			fmt.Fprintf(cmd.OutOrStdout(), "NEXT %d (--before %d)\n", p.Next, p.Next)
		}
		return nil
	}
	return cmd
}

// newItemShowCmd shows one item with its attempts through admin.Get.
func newItemShowCmd(table lease.Table, what, use, short string) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, Args: cobra.ExactArgs(1)}
	cfg := bindConfig(cmd, "database-url")
	asJSON := cmd.Flags().Bool("json", false, "print JSON ({\"item\": ..., \"attempts\": [...]})")
	shards := bindItemShards(cmd, "the id is SHARD:ID", "connecting to the shard")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		specs, err := shards.parse(cmd)
		if err != nil {
			return err
		}
		if specs != nil {
			return showSharded(cmd, cfg, *shards.timeout, table, what, args[0], specs, *asJSON)
		}
		ids, err := parseIDs(args, what)
		if err != nil {
			return err
		}
		ctx := cmd.Context()
		client, done, err := opsClient(ctx, cfg, newLogger(cfg, cmd.ErrOrStderr()))
		if err != nil {
			return err
		}
		defer done()
		ref := workq.ItemRef{Table: table, ID: ids[0]}
		it, err := client.Get(ctx, ref)
		if err != nil {
			return err
		}
		atts, err := client.Attempts(ctx, ref)
		if err != nil {
			return err
		}
		return printItem(cmd.OutOrStdout(), it, atts, *asJSON)
	}
	return cmd
}

// printItem prints one item and its attempts (show); an item of a shard
// leads with its shard.
func printItem(out io.Writer, it admin.Item, atts []workqtype.Attempt, asJSON bool) error {
	if asJSON {
		return printJSON(out, map[string]any{"item": it, "attempts": atts})
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	if it.Shard != "" {
		fmt.Fprintf(tw, "shard\t%s\n", it.Shard)
	}
	fmt.Fprintf(tw, "id\t%d\nqueue\t%s\nkind\t%s\nstate\t%s\npriority\t%d\nattempts\t%d of %d\n",
		it.ID, it.Queue, it.Kind, it.State, it.Priority, it.Attempts, it.MaxAttempts)
	// A finished item's run_at is when it was last due: it ended at
	// finished_at, and will not run again unless retried.
	if it.FinishedAt == nil {
		fmt.Fprintf(tw, "run at\t%s\n", it.RunAt.Format(time.RFC3339Nano))
	}
	fmt.Fprintf(tw, "created at\t%s\n", it.CreatedAt.Format(time.RFC3339Nano))
	if it.FinishedAt != nil {
		fmt.Fprintf(tw, "finished at\t%s\n", it.FinishedAt.Format(time.RFC3339Nano))
	}
	if it.LastError != "" {
		fmt.Fprintf(tw, "last error\t%s\n", it.LastError)
	}
	for k, v := range it.Details {
		fmt.Fprintf(tw, "%s\t%v\n", strings.ReplaceAll(k, "_", " "), v)
	}
	for _, k := range slices.Sorted(maps.Keys(it.Metadata)) {
		fmt.Fprintf(tw, "metadata %s\t%s\n", k, it.Metadata[k])
	}
	fmt.Fprintf(tw, "payload\t%s\n", it.Payload)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(out, "\nATTEMPTS")
	tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tLEASE\tWORKER\tSTARTED\tDURATION\tOUTCOME\tERROR")
	for _, a := range atts {
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%s\n", a.Attempt, a.LeaseVersion, a.Worker, a.StartedAt.Format(time.RFC3339Nano),
			a.FinishedAt.Sub(a.StartedAt).Round(time.Millisecond), a.Outcome, cell(a.Error, 80))
	}
	return tw.Flush()
}

// parseTimeFlag reads an RFC 3339 time flag ("" is the zero time).
func parseTimeFlag(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s %q: want an RFC 3339 time such as 2030-01-02T15:04:05Z", name, v)
	}
	return t, nil
}

// cell shortens s to one line of at most n runes for a table cell.
func cell(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// parseIDs parses item ids given as arguments; what names them in errors.
func parseIDs(args []string, what string) ([]int64, error) {
	ids := make([]int64, len(args))
	for i, a := range args {
		id, err := strconv.ParseInt(a, 10, 64)
		if err != nil || id < 1 {
			return nil, fmt.Errorf("%q is not a valid %s id: an id is a positive whole number", a, what)
		}
		ids[i] = id
	}
	return ids, nil
}
