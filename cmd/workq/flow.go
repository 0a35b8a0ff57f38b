package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/config"
)

// `workq flow`: flow control (docs/concepts.md, "Flow control") through
// the Client's SetFlowLimit, RemoveFlowLimit, SetFairness, PauseKind,
// ResumeKind and FlowStatus, which validate what they are given (an error
// wrapping ErrInvalid, nothing written): the commands check only that the
// flags needed are there and parse.

func newFlowCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "flow", Short: "Flow control: rate and concurrency limits per queue, kind or limit key, fair claims, paused kinds"}
	cmd.AddCommand(newFlowListCmd(), newFlowSetCmd(), newFlowRemoveCmd(), newFlowFairCmd(),
		newFlowPauseKindCmd(true), newFlowPauseKindCmd(false))
	return cmd
}

// flowFlags are the flags every flow command has: the database (or
// --shard) and --json.
type flowFlags struct {
	cfg    *config.Config
	shards itemShards
	asJSON *bool
}

// bindFlowFlags binds them; use says what --shard does to the command.
func bindFlowFlags(cmd *cobra.Command, use string) flowFlags {
	return flowFlags{
		cfg:    bindConfig(cmd, "database-url"),
		shards: bindItemShards(cmd, use, "connecting to one shard; a shard down fails the command"),
		asJSON: cmd.Flags().Bool("json", false, "print JSON"),
	}
}

// client is the producer Client of the command: of --database-url, or a
// sharded one of every --shard.
func (f flowFlags) client(cmd *cobra.Command) (*workq.Client, func(), error) {
	specs, err := f.shards.parse(cmd)
	if err != nil {
		return nil, nil, err
	}
	if specs == nil {
		return opsClient(cmd.Context(), f.cfg, newLogger(f.cfg, cmd.ErrOrStderr()))
	}
	client, down, done, err := shardsClient(cmd, f.cfg, specs, *f.shards.timeout)
	if err != nil {
		return nil, nil, err
	}
	// Flow control is every shard's: a shard that cannot be reached fails
	// the command before anything is done on the others.
	for _, sp := range specs {
		if e := down[sp.name]; e != nil {
			done()
			return nil, nil, fmt.Errorf("shard %s: %w (nothing done on any shard)", sp.name, e)
		}
	}
	return client, done, nil
}

// queueFlags are --table and --queue, both required.
type queueFlags struct{ table, queue *string }

func bindQueueFlags(cmd *cobra.Command, withTable bool) queueFlags {
	q := queueFlags{queue: cmd.Flags().String("queue", "", "the queue; required")}
	if withTable {
		q.table = cmd.Flags().String("table", "", "the work table: job_runs, outbox, inbox or timers; required")
	}
	return q
}

// ref reads them; table is job_runs when the command has no --table.
func (q queueFlags) ref() (workq.QueueRef, error) {
	ref := workq.QueueRef{Table: workq.TableJobRuns, Queue: *q.queue}
	if q.table != nil {
		if *q.table == "" {
			return ref, fmt.Errorf("--table is required (job_runs, outbox, inbox or timers)")
		}
		t, err := parseTable(*q.table)
		if err != nil {
			return ref, fmt.Errorf("--table: %w", err)
		}
		ref.Table = t
	}
	if *q.queue == "" {
		return ref, fmt.Errorf("--queue is required")
	}
	return ref, nil
}

// flowRuleJSON is a rule as `flow set --json` and `flow list --json`
// print it, under the HTTP API's names (GET /v1/flow).
type flowRuleJSON struct {
	Table       workq.Table `json:"table"`
	Queue       string      `json:"queue"`
	Shard       string      `json:"shard,omitempty"`
	Kind        string      `json:"kind"`
	PerKey      bool        `json:"per_key"`
	Rate        int         `json:"rate"`
	Period      string      `json:"period,omitempty"` // with a rate only
	Concurrency int         `json:"concurrency"`
}

func flowRuleOf(l workq.FlowLimit) flowRuleJSON {
	r := flowRuleJSON{Table: l.Table, Queue: l.Queue, Shard: l.Shard, Kind: l.Kind, PerKey: l.PerKey, Rate: l.Rate, Concurrency: l.Concurrency}
	if l.Rate > 0 {
		r.Period = flowPeriod(l.Period).String()
	}
	return r
}

// flowPeriod is a rule's period, 0 being a second.
func flowPeriod(d time.Duration) time.Duration {
	if d == 0 {
		return time.Second
	}
	return d
}

// ruleScope names what a rule counts: the queue, a kind, each key.
func ruleScope(l workq.FlowLimit) string {
	switch {
	case l.PerKey:
		return "per key"
	case l.Kind != "":
		return "kind " + l.Kind
	}
	return "queue"
}

// ruleText says what a rule allows, in words.
func ruleText(l workq.FlowLimit) string {
	var parts []string
	if l.Rate > 0 {
		parts = append(parts, fmt.Sprintf("at most %d starts per %s", l.Rate, flowPeriod(l.Period)))
	}
	if l.Concurrency > 0 {
		parts = append(parts, fmt.Sprintf("at most %d in progress", l.Concurrency))
	}
	s := strings.Join(parts, ", ")
	if l.PerKey {
		s += " (each limit key)"
	}
	return s
}

func newFlowSetCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "set",
		Short: "Set a rate and/or concurrency limit of a queue, of one kind of it (--kind) or of each limit key (--per-key)",
		Args:  cobra.NoArgs,
	}
	ff := bindFlowFlags(cmd, "sets it on every shard given, a rule without --per-key split evenly over them")
	qf := bindQueueFlags(cmd, true)
	f := cmd.Flags()
	kind := f.String("kind", "", "the job kind, timer topic or inbox source the rule is for (default: the whole queue)")
	perKey := f.Bool("per-key", false, "count the rule for each limit key apart (job runs only)")
	rate := f.Int("rate", 0, "at most this many starts in any window of --period (0: no rate limit)")
	period := f.Duration("period", 0, "the rate's window, whole milliseconds up to 24h (default 1s)")
	concurrency := f.Int("concurrency", 0, "at most this many items in progress at once (0: none)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		q, err := qf.ref()
		if err != nil {
			return err
		}
		l := workq.FlowLimit{Table: q.Table, Queue: q.Queue, Kind: *kind, PerKey: *perKey, Rate: *rate, Period: *period, Concurrency: *concurrency}
		client, done, err := ff.client(cmd)
		if err != nil {
			return err
		}
		defer done()
		if err := client.SetFlowLimit(cmd.Context(), l); err != nil {
			return err
		}
		if *ff.asJSON {
			return printJSON(cmd.OutOrStdout(), flowRuleOf(l))
		}
		_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", l, ruleText(l))
		return err
	}
	return cmd
}

func newFlowRemoveCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "remove", Short: "Remove the flow limit of a queue, of one kind of it (--kind) or of each limit key (--per-key)", Args: cobra.NoArgs}
	ff := bindFlowFlags(cmd, "removes it on every shard given")
	qf := bindQueueFlags(cmd, true)
	kind := cmd.Flags().String("kind", "", "the kind whose rule to remove (default: the queue's own)")
	perKey := cmd.Flags().Bool("per-key", false, "remove the rule per limit key")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		q, err := qf.ref()
		if err != nil {
			return err
		}
		l := workq.FlowLimit{Table: q.Table, Queue: q.Queue, Kind: *kind, PerKey: *perKey}
		client, done, err := ff.client(cmd)
		if err != nil {
			return err
		}
		defer done()
		removed, err := client.RemoveFlowLimit(cmd.Context(), l)
		if err != nil {
			return err
		}
		if *ff.asJSON {
			return printJSON(cmd.OutOrStdout(), map[string]any{"table": l.Table, "queue": l.Queue, "kind": l.Kind, "per_key": l.PerKey, "removed": removed})
		}
		if !removed {
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: no such flow limit (nothing changed)\n", l)
			return err
		}
		_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: flow limit removed\n", l)
		return err
	}
	return cmd
}

func newFlowFairCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fair on|off",
		Short: "Whether claims of a job-run queue take its limit keys in turn, so one key's backlog does not starve the others",
		Args:  cobra.ExactArgs(1),
	}
	ff := bindFlowFlags(cmd, "sets it on every shard given")
	qf := bindQueueFlags(cmd, false)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		var fair bool
		switch args[0] {
		case "on":
			fair = true
		case "off":
		default:
			return fmt.Errorf("%q: want on or off", args[0])
		}
		q, err := qf.ref()
		if err != nil {
			return err
		}
		client, done, err := ff.client(cmd)
		if err != nil {
			return err
		}
		defer done()
		if err := client.SetFairness(cmd.Context(), q, fair); err != nil {
			return err
		}
		if *ff.asJSON {
			return printJSON(cmd.OutOrStdout(), map[string]any{"table": q.Table, "queue": q.Queue, "fair": fair})
		}
		if fair {
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: fair claims on (limit keys taken in turn)\n", q)
		} else {
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: fair claims off\n", q)
		}
		return err
	}
	return cmd
}

// newFlowPauseKindCmd is `workq flow pause-kind` (pause) or `resume-kind`.
func newFlowPauseKindCmd(pause bool) *cobra.Command {
	verb, short := "resume-kind", "Let workers start items of a paused kind again"
	if pause {
		verb, short = "pause-kind", "Stop every worker from starting items of one kind of a queue; its other kinds go on, items in flight finish"
	}
	cmd := &cobra.Command{Use: verb, Short: short, Args: cobra.NoArgs}
	ff := bindFlowFlags(cmd, "on every shard given")
	qf := bindQueueFlags(cmd, true)
	f := cmd.Flags()
	kind := f.String("kind", "", "the job kind, timer topic, inbox source or outbox topic; required")
	var actor, reason *string
	if pause {
		actor = f.String("actor", defaultActor(), "who pauses (kept with the pause)")
		reason = f.String("reason", "", "why (kept with the pause)")
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		q, err := qf.ref()
		if err != nil {
			return err
		}
		if *kind == "" {
			return fmt.Errorf("--kind is required")
		}
		k := workq.KindRef{Table: q.Table, Queue: q.Queue, Kind: *kind}
		client, done, err := ff.client(cmd)
		if err != nil {
			return err
		}
		defer done()
		var changed bool
		if pause {
			changed, err = client.PauseKind(cmd.Context(), k, &workq.ActionOpts{Actor: *actor, Reason: *reason})
		} else {
			changed, err = client.ResumeKind(cmd.Context(), k)
		}
		if err != nil {
			return err
		}
		if *ff.asJSON {
			return printJSON(cmd.OutOrStdout(), map[string]any{"table": k.Table, "queue": k.Queue, "kind": k.Kind, "paused": pause, "changed": changed})
		}
		state := map[bool]string{true: "paused", false: "running"}[pause]
		if !changed {
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s was already %s\n", k, state)
			return err
		}
		_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", k, state)
		return err
	}
	return cmd
}

// flowStatusJSON is `flow list --json`: the Client's FlowStatus under the
// HTTP API's names (GET /v1/flow).
type flowStatusJSON struct {
	Queues      []flowQueueJSON  `json:"queues"`
	Limits      []flowLimitJSON  `json:"limits"`
	PausedKinds []pausedKindJSON `json:"paused_kinds"`
	Throttles   []throttleJSON   `json:"throttles"`
}

type flowQueueJSON struct {
	Table workq.Table `json:"table"`
	Queue string      `json:"queue"`
	Shard string      `json:"shard,omitempty"`
	Fair  bool        `json:"fair"`
	Auto  bool        `json:"auto"`
}

type flowLimitJSON struct {
	flowRuleJSON
	UpdatedAt      time.Time  `json:"updated_at"`
	Started        int        `json:"started"`
	InProgress     int        `json:"in_progress"`
	ActiveKeys     int        `json:"active_keys"`
	ThrottledUntil *time.Time `json:"throttled_until,omitempty"`
}

type pausedKindJSON struct {
	Table    workq.Table `json:"table"`
	Queue    string      `json:"queue"`
	Shard    string      `json:"shard,omitempty"`
	Kind     string      `json:"kind"`
	PausedAt time.Time   `json:"paused_at"`
	PausedBy string      `json:"paused_by"`
	Reason   string      `json:"reason,omitempty"`
}

type throttleJSON struct {
	Table             workq.Table `json:"table"`
	Queue             string      `json:"queue"`
	Shard             string      `json:"shard,omitempty"`
	Kind              string      `json:"kind,omitempty"`
	Key               string      `json:"key,omitempty"`
	Until             *time.Time  `json:"until,omitempty"`
	Rate              float64     `json:"rate"`
	StartedLastSecond int         `json:"started_last_second"`
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func flowStatusOf(st workq.FlowStatus) flowStatusJSON {
	out := flowStatusJSON{Queues: make([]flowQueueJSON, len(st.Queues)), Limits: make([]flowLimitJSON, len(st.Limits)),
		PausedKinds: make([]pausedKindJSON, len(st.PausedKinds)), Throttles: make([]throttleJSON, len(st.Throttles))}
	for i, q := range st.Queues {
		out.Queues[i] = flowQueueJSON{Table: q.Table, Queue: q.Queue, Shard: q.Shard, Fair: q.Fair, Auto: q.Auto}
	}
	for i, l := range st.Limits {
		out.Limits[i] = flowLimitJSON{flowRuleJSON: flowRuleOf(l.FlowLimit), UpdatedAt: l.UpdatedAt, Started: l.Started,
			InProgress: l.InProgress, ActiveKeys: l.ActiveKeys, ThrottledUntil: optTime(l.ThrottledUntil)}
	}
	for i, p := range st.PausedKinds {
		out.PausedKinds[i] = pausedKindJSON{Table: p.Table, Queue: p.Queue, Shard: p.Shard, Kind: p.Kind, PausedAt: p.PausedAt,
			PausedBy: p.PausedBy, Reason: p.Reason}
	}
	for i, t := range st.Throttles {
		out.Throttles[i] = throttleJSON{Table: t.Table, Queue: t.Queue, Shard: t.Shard, Kind: t.Kind, Key: t.Key, Until: optTime(t.Until),
			Rate: t.Rate, StartedLastSecond: t.StartedLastSecond}
	}
	return out
}

func newFlowListCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the queues under flow control, their limits with their use now, paused kinds and throttled scopes",
		Args:  cobra.NoArgs,
	}
	ff := bindFlowFlags(cmd, "lists every shard's, each with its shard")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		client, done, err := ff.client(cmd)
		if err != nil {
			return err
		}
		defer done()
		st, err := client.FlowStatus(cmd.Context())
		if err != nil {
			return err
		}
		if *ff.asJSON {
			return printJSON(cmd.OutOrStdout(), flowStatusOf(st))
		}
		return printFlow(cmd.OutOrStdout(), st, len(*ff.shards.values) > 0)
	}
	return cmd
}

// printFlow prints st as aligned tables, one per part that has rows, each
// with a SHARD column when sharded.
func printFlow(out io.Writer, st workq.FlowStatus, sharded bool) error {
	if len(st.Queues)+len(st.Limits)+len(st.PausedKinds)+len(st.Throttles) == 0 {
		_, err := fmt.Fprintln(out, "no queue is under flow control")
		return err
	}
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	when := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format(time.RFC3339)
	}
	printed := false
	table := func(title, header string, rows [][]string) error {
		if len(rows) == 0 {
			return nil
		}
		if sharded {
			header = strings.Replace(header, "QUEUE\t", "QUEUE\tSHARD\t", 1)
		}
		if printed {
			fmt.Fprintln(out) // a blank line between the parts
		}
		printed = true
		fmt.Fprintf(out, "%s\n", title)
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, header)
		for _, r := range rows {
			if !sharded {
				r = append(r[:2:2], r[3:]...)
			}
			fmt.Fprintln(tw, strings.Join(r, "\t"))
		}
		return tw.Flush()
	}
	var rows [][]string
	for _, q := range st.Queues {
		rows = append(rows, []string{string(q.Table), q.Queue, dash(q.Shard), map[bool]string{true: "yes", false: "no"}[q.Fair],
			map[bool]string{true: "yes", false: "no"}[q.Auto]})
	}
	if err := table("QUEUES", "TABLE\tQUEUE\tFAIR\tAUTO", rows); err != nil {
		return err
	}
	rows = nil
	for _, l := range st.Limits {
		rate, keys := "-", "-"
		if l.Rate > 0 {
			rate = fmt.Sprintf("%d/%s", l.Rate, flowPeriod(l.Period))
		}
		conc := "-"
		if l.Concurrency > 0 {
			conc = fmt.Sprint(l.Concurrency)
		}
		if l.PerKey {
			keys = fmt.Sprint(l.ActiveKeys)
		}
		rows = append(rows, []string{string(l.Table), l.Queue, dash(l.Shard), ruleScope(l.FlowLimit), rate, conc, fmt.Sprint(l.Started), fmt.Sprint(l.InProgress), keys,
			when(l.ThrottledUntil)})
	}
	if err := table("LIMITS", "TABLE\tQUEUE\tSCOPE\tRATE\tCONCURRENCY\tSTARTED IN WINDOW\tIN PROGRESS\tACTIVE KEYS\tTHROTTLED UNTIL", rows); err != nil {
		return err
	}
	rows = nil
	for _, p := range st.PausedKinds {
		rows = append(rows, []string{string(p.Table), p.Queue, dash(p.Shard), p.Kind, p.PausedBy, when(p.PausedAt), dash(p.Reason)})
	}
	if err := table("PAUSED KINDS", "TABLE\tQUEUE\tKIND\tPAUSED BY\tPAUSED AT\tREASON", rows); err != nil {
		return err
	}
	rows = nil
	for _, t := range st.Throttles {
		scope := "queue"
		switch {
		case t.Key != "":
			scope = "key " + t.Key
		case t.Kind != "":
			scope = "kind " + t.Kind
		}
		rate := "-"
		if t.Rate > 0 {
			rate = fmt.Sprintf("%.1f/s", t.Rate)
		}
		rows = append(rows, []string{string(t.Table), t.Queue, dash(t.Shard), scope, when(t.Until), rate, fmt.Sprint(t.StartedLastSecond)})
	}
	return table("THROTTLES", "TABLE\tQUEUE\tSCOPE\tTHROTTLED UNTIL\tADAPTED RATE\tSTARTED LAST SECOND", rows)
}
