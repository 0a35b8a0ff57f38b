package main

import (
	"encoding/json"
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
	"github.com/workq/workq/internal/shardlist"
	"github.com/workq/workq/workqtype"
)

// The operator's verbs on items, one implementation for every kind of
// work, through the Client: `workq jobs list|show|retry|cancel|delete`,
// and the verbs the outbox, inbox and timers commands share with it
// (kinds_cli.go instantiates them per kind).

// action is one verb that acts on ids: retry, cancel or delete.
type action struct {
	verb      string // retry, cancel, delete
	done      string // text and JSON key of the ids acted on: retried, cancelled, deleted
	skipKey   string // JSON key of the ids left alone: not_failed, finished, not_finished
	only      string // which items the verb takes, with %s for the plural of what: "only failed or cancelled %s can be retried"
	needActor bool   // archived with an actor and reason (retry, cancel)
}

var (
	retryAction  = action{verb: "retry", done: "retried", skipKey: "not_failed", only: "only failed or cancelled %s can be retried", needActor: true}
	reviveAction = action{verb: "retry", done: "revived", skipKey: "not_dead", only: "only dead (or cancelled) %s can be revived", needActor: true}
	cancelAction = action{verb: "cancel", done: "cancelled", skipKey: "finished", only: "only ready or running %s can be cancelled", needActor: true}
	deleteAction = action{verb: "delete", done: "deleted", skipKey: "not_finished", only: "only finished (done, failed or cancelled) %s can be deleted"}
)

// actResult is what an action did to the ids of one database, in the
// order given: Skipped are those left alone (NotFound among them, the
// others with their state in States), Requested those of Applied whose
// cancel their worker carries out.
type actResult struct {
	Applied, Skipped, NotFound, Requested []int64
	States                                map[int64]string
}

// skipped is one id an action left alone, as the command names it (42, or
// eu:42 over shards), and its state ("" when it does not exist).
type skipped struct{ label, state string }

// skippedOf lists r's skipped ids, labelled by label.
func skippedOf(r actResult, label func(int64) string) []skipped {
	out := make([]skipped, 0, len(r.Skipped))
	for _, id := range r.Skipped {
		out = append(out, skipped{label(id), r.States[id]}) // "" for r.NotFound
	}
	return out
}

// leftAlone is the error of the ids an action left alone, telling those
// that do not exist (wrapping workq.ErrNotFound) from those in a state the
// verb does not take (workq.ErrWrongState): "job run 42 not found", "job
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
		errs = append(errs, reasonError{fmt.Sprintf("%s %s not found", what, missing[0]), workq.ErrNotFound})
	default:
		errs = append(errs, reasonError{fmt.Sprintf("%d %ss not found: %s", len(missing), what, strings.Join(missing, ", ")), workq.ErrNotFound})
	}
	only := fmt.Sprintf(a.only, what+"s")
	switch len(wrong) {
	case 0:
	case 1:
		errs = append(errs, reasonError{fmt.Sprintf("%s %s; %s", what, wrong[0], only), workq.ErrWrongState})
	default:
		errs = append(errs, reasonError{fmt.Sprintf("%d %ss left alone (%s); %s", len(wrong), what, strings.Join(wrong, ", "), only), workq.ErrWrongState})
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

// maxItemID is the largest id an item may have (workq.ItemRef's bound).
const maxItemID = 1<<60 - 1

// checkIDs checks the ids of one action before anything is done: 1 to
// workq.MaxActionItems of them, each a valid id, none twice.
func checkIDs(ids []int64) error {
	if len(ids) == 0 {
		return workqtype.Invalid("ids", "no ids given")
	}
	if len(ids) > workq.MaxActionItems {
		return workqtype.Invalid("ids", fmt.Sprintf("%d ids, want at most %d per request", len(ids), workq.MaxActionItems))
	}
	seen := make(map[int64]bool, len(ids))
	for _, id := range ids {
		if id <= 0 || id > maxItemID {
			return workqtype.Invalid("ids", fmt.Sprintf("id %d: want 1 to %d", id, int64(maxItemID)))
		}
		if seen[id] {
			return workqtype.Invalid("ids", fmt.Sprintf("id %d given twice", id))
		}
		seen[id] = true
	}
	return nil
}

// newActionCmd returns the command of one action on kind k's items. Every
// id is checked before the database is touched; ids left alone are
// listed and make the command exit non-zero.
func newActionCmd(k itemKind, text verbText, a action) *cobra.Command {
	what := k.what
	cmd := &cobra.Command{Use: text.use, Short: text.short, Args: cobra.MinimumNArgs(1)}
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
			if err := checkIDs(ids); err != nil {
				return err
			}
		}
		var by workq.ActionOpts
		if a.needActor {
			if strings.TrimSpace(*actor) == "" {
				return fmt.Errorf("--actor must not be empty")
			}
			by = workq.ActionOpts{Actor: *actor, Reason: *reason}
		}
		if specs != nil {
			return a.runSharded(cmd, cfg, *shards.timeout, k, &by, groups, *asJSON)
		}
		ctx := cmd.Context()
		client, done, err := opsClient(ctx, cfg, newLogger(cfg, cmd.ErrOrStderr()))
		if err != nil {
			return err
		}
		defer done()
		r, err := a.viaClient(ctx, client, k.table, "", &by, ids)
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		if *asJSON {
			m := map[string]any{a.done: r.Applied, a.skipKey: r.Skipped, "not_found": r.NotFound}
			if a.verb == "cancel" {
				m["requested"] = append([]int64{}, r.Requested...)
			}
			if err := printJSON(out, m); err != nil {
				return err
			}
		} else {
			a.printApplied(out, r, func(id int64) string { return strconv.FormatInt(id, 10) })
		}
		if len(r.Skipped) > 0 {
			return a.leftAlone(what, skippedOf(r, func(id int64) string { return strconv.FormatInt(id, 10) }))
		}
		return nil
	}
	return cmd
}

// printApplied prints one line for each id acted on. A running item's
// cancel is requested: its worker stops the handler and it ends
// cancelled when the attempt ends.
func (a action) printApplied(out io.Writer, r actResult, label func(int64) string) {
	requested := make(map[int64]bool, len(r.Requested))
	for _, id := range r.Requested {
		requested[id] = true
	}
	for _, id := range r.Applied {
		if requested[id] {
			fmt.Fprintf(out, "cancel requested %s (running: its worker stops it)\n", label(id))
			continue
		}
		fmt.Fprintf(out, "%s %s\n", a.done, label(id))
	}
}

// newJobsCmd is `workq jobs`: the operator's verbs on job runs.
func newJobsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "jobs", Short: "Inspect job runs and act on them: list, show, retry, cancel, delete"}
	cmd.AddCommand(itemCommands(workq.TableJobRuns)...)
	return cmd
}

// listPage is a list's JSON on one database: its items and the --before
// of the next page (none on the last).
type listPage struct {
	Items []workq.Item `json:"items"`
	Next  int64        `json:"next,omitempty"`
}

// newItemsListCmd lists kind k's items through the Client's List, newest
// first; k.kindFlag is what the table calls its kind ("kind" or "topic").
// On one database --before ID is the Client's cursor of that database.
func newItemsListCmd(k itemKind) *cobra.Command {
	kindFlag := k.kindFlag
	cmd := &cobra.Command{Use: k.list.use, Short: k.list.short, Args: cobra.NoArgs}
	cfg := bindConfig(cmd, "database-url")
	f := cmd.Flags()
	p := workq.ListParams{Table: k.table}
	var status, after, before string
	var beforeID int64
	f.StringVar(&p.Queue, "queue", "", "only this queue")
	f.StringVar(&status, "status", "", "only this status: "+strings.Join(itemStates, ", "))
	f.StringVar(&p.Kind, kindFlag, "", "only this "+kindFlag)
	if k.table == workq.TableJobRuns {
		f.StringVar(&p.LimitKey, "limit-key", "", "only the jobs of this limit key")
	}
	f.StringVar(&after, "created-after", "", "only items created at or after this time (RFC 3339)")
	f.StringVar(&before, "created-before", "", "only items created before this time (RFC 3339)")
	f.Int64Var(&beforeID, "before", 0, "page cursor: items with smaller ids (the NEXT id of the previous page)")
	f.IntVar(&p.Limit, "limit", workq.DefaultListLimit, fmt.Sprintf("items per page (1-%d)", workq.MaxListLimit))
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
		if p.CreatedAfter, err = parseTimeFlag("--created-after", after); err != nil {
			return err
		}
		if p.CreatedBefore, err = parseTimeFlag("--created-before", before); err != nil {
			return err
		}
		if p.Limit < 1 {
			return fmt.Errorf("--limit %d: want 1 to %d", p.Limit, workq.MaxListLimit)
		}
		if status != "" {
			p.States = []string{status}
		}
		if specs != nil {
			return listSharded(cmd, cfg, *shards.timeout, kindFlag, specs, only, cursorText, p, *asJSON)
		}
		if beforeID < 0 {
			return workqtype.Invalid("cursor", fmt.Sprintf("cursor %d is negative", beforeID))
		}
		// Every id is below one above the largest: from the newest.
		if beforeID > 0 && beforeID <= maxItemID {
			p.Cursor = shardlist.Cursor{workq.DefaultShard: beforeID}.String()
		}
		ctx := cmd.Context()
		client, done, err := opsClient(ctx, cfg, newLogger(cfg, cmd.ErrOrStderr()))
		if err != nil {
			return err
		}
		defer done()
		res, err := client.List(ctx, p)
		if err != nil {
			return err
		}
		page := listPage{Items: res.Items}
		for i := range page.Items {
			page.Items[i].Shard = "" // one database: no shard to name
		}
		if res.Next != "" {
			cur, err := shardlist.ParseCursor(res.Next)
			if err != nil {
				return err
			}
			page.Next = cur[workq.DefaultShard]
		}
		if *asJSON {
			return printJSON(cmd.OutOrStdout(), page)
		}
		tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "ID\tQUEUE\t%s\tSTATE\tATTEMPTS\tRUN/ENDED AT\tLAST ERROR\n", strings.ToUpper(kindFlag))
		for _, it := range page.Items {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d/%d\t%s\t%s\n", it.ID, it.Queue, it.Kind, it.State, it.Attempts, it.MaxAttempts,
				it.WhenAt().Format(time.RFC3339), cell(it.LastError, 60))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if page.Next != 0 {
			fmt.Fprintf(cmd.OutOrStdout(), "NEXT %d (--before %d)\n", page.Next, page.Next)
		}
		return nil
	}
	return cmd
}

// itemStates are the states a list filters on.
var itemStates = []string{workq.StateReady, workq.StateInProgress, workq.StateDone, workq.StateFailed, workq.StateCancelled}

// newItemShowCmd shows one of kind k's items with its attempts through
// the Client's Get and Attempts.
func newItemShowCmd(k itemKind) *cobra.Command {
	what := k.what
	cmd := &cobra.Command{Use: k.show.use, Short: k.show.short, Args: cobra.ExactArgs(1)}
	cfg := bindConfig(cmd, "database-url")
	asJSON := cmd.Flags().Bool("json", false, "print JSON ({\"item\": ..., \"attempts\": [...]}, and \"waits_for\": [...] while flow control holds a ready item)")
	shards := bindItemShards(cmd, "the id is SHARD:ID", "connecting to the shard")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		specs, err := shards.parse(cmd)
		if err != nil {
			return err
		}
		if specs != nil {
			return showSharded(cmd, cfg, *shards.timeout, k, args[0], specs, *asJSON)
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
		ref := workq.ItemRef{Table: k.table, ID: ids[0]}
		it, err := client.Get(ctx, ref)
		if err != nil {
			return err
		}
		atts, err := client.Attempts(ctx, ref)
		if err != nil {
			return err
		}
		waits := itemWaitsFor(cmd, client, ref)
		it.Shard = "" // one database: no shard to name
		return printItem(cmd.OutOrStdout(), it, atts, waits, *asJSON)
	}
	return cmd
}

// printItem prints one item and its attempts (show), and what flow
// control holds it back with when anything does (Client.WaitsFor); an item
// of a shard leads with its shard.
func printItem(out io.Writer, it workq.Item, atts []workq.Attempt, waits []string, asJSON bool) error {
	if asJSON {
		v := map[string]any{"item": it, "attempts": atts}
		if len(waits) > 0 {
			v["waits_for"] = waits
		}
		return printJSON(out, v)
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
		if raw, ok := v.(json.RawMessage); ok { // a job run's output: its JSON, not its bytes
			v = string(raw)
		}
		fmt.Fprintf(tw, "%s\t%v\n", strings.ReplaceAll(k, "_", " "), v)
	}
	for _, k := range slices.Sorted(maps.Keys(it.Metadata)) {
		fmt.Fprintf(tw, "metadata %s\t%s\n", k, it.Metadata[k])
	}
	for _, w := range waits {
		fmt.Fprintf(tw, "waits for\t%s\n", w)
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
