package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/config"
	"github.com/workq/workq/internal/shardlist"
	"github.com/workq/workq/workqtype"
)

// The item commands over several shard databases (--shard NAME=URL,
// repeated): list merges every shard's items newest first
// (internal/shardlist, as the API and the dashboard do), and the ids of
// show, retry, cancel and delete are SHARD:ID. Without --shard the
// commands act on --database-url, ids plain numbers.

// defaultShardTimeout bounds connecting to one shard, and one shard's page
// of a list.
const defaultShardTimeout = 5 * time.Second

// exitPartial is the exit code of a list that printed the items of the
// shards that answered while others did not.
const exitPartial = 3

// itemShards are the --shard flags of one item command.
type itemShards struct {
	values  *[]string
	timeout *time.Duration
}

// bindItemShards binds --shard and --shard-timeout; use says what --shard
// does to the command, bound what --shard-timeout bounds.
func bindItemShards(cmd *cobra.Command, use, bound string) itemShards {
	f := cmd.Flags()
	return itemShards{
		values:  f.StringArray("shard", nil, "a shard of a sharded workq, NAME=URL (repeat for each; instead of --database-url): "+use+" (docs/cli.md, Shards)"),
		timeout: f.Duration("shard-timeout", defaultShardTimeout, "with --shard: bound of "+bound),
	}
}

// parse returns the shards given; none: the command is unsharded.
func (s itemShards) parse(cmd *cobra.Command) ([]shardSpec, error) {
	if len(*s.values) == 0 {
		return nil, nil
	}
	if cmd.Flags().Changed("database-url") {
		return nil, fmt.Errorf("give --shard (several databases) or --database-url (one), not both")
	}
	specs, err := parseShards(*s.values)
	if err != nil {
		return nil, err
	}
	for _, sp := range specs {
		if !workqtype.ValidName(sp.name) {
			return nil, fmt.Errorf("--shard: name %q is not a valid name (%s)", sp.name, workqtype.NameRule)
		}
	}
	return specs, nil
}

// shardNames lists the shards' names for messages: "eu, us".
func shardNames(specs []shardSpec) string {
	names := make([]string, len(specs))
	for i, sp := range specs {
		names[i] = sp.name
	}
	return strings.Join(names, ", ")
}

// shardIDs are the ids given of one shard.
type shardIDs struct {
	spec shardSpec
	ids  []int64
}

// parseShardIDs reads SHARD:ID arguments (the id after the last colon, so
// a shard name may hold one) and groups them by shard, in the order of the
// shards. Every argument is checked before any shard is touched: a plain
// id, an unknown shard, a bad id or a repeated one is refused.
func parseShardIDs(args []string, what string, specs []shardSpec) ([]shardIDs, error) {
	at := make(map[string]int, len(specs))
	groups := make([]shardIDs, len(specs))
	for i, sp := range specs {
		at[sp.name] = i
		groups[i].spec = sp
	}
	for _, a := range args {
		i := strings.LastIndexByte(a, ':')
		if i < 0 {
			return nil, fmt.Errorf("%q names no shard: with --shard, give each %s as SHARD:ID, such as %s:%s (the shards are %s)",
				a, what, specs[0].name, a, shardNames(specs))
		}
		name, num := a[:i], a[i+1:]
		g, ok := at[name]
		if !ok {
			return nil, fmt.Errorf("%q: no shard %q (the shards are %s)", a, name, shardNames(specs))
		}
		id, err := strconv.ParseInt(num, 10, 64)
		if err != nil || id < 1 {
			return nil, fmt.Errorf("%q is not a valid %s id: want SHARD:ID, the id a positive whole number", a, what)
		}
		groups[g].ids = append(groups[g].ids, id)
	}
	out := groups[:0]
	for _, g := range groups {
		if len(g.ids) == 0 {
			continue
		}
		if err := checkIDs(g.ids); err != nil {
			return nil, fmt.Errorf("shard %s: %w", g.spec.name, err)
		}
		out = append(out, g)
	}
	return out, nil
}

// label is an item's id as the commands print it: SHARD:ID, or the plain
// id of an unsharded command.
func label(shard string, id int64) string {
	if shard == "" {
		return strconv.FormatInt(id, 10)
	}
	return shard + ":" + strconv.FormatInt(id, 10)
}

func labels(shard string, ids []int64) string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = label(shard, id)
	}
	return strings.Join(out, " ")
}

// shardsClient opens every shard at once, each bounded by timeout, and
// returns one producer Client of them all (workq.NewShardedClient), as
// `workq api --shard` serves. A shard that could not be opened stays in it
// on a pool that has not connected (a list keeps its place in the cursor
// and reports it down) and is in down with why; done closes every pool.
func shardsClient(cmd *cobra.Command, cfg *config.Config, specs []shardSpec, timeout time.Duration) (_ *workq.Client, down map[string]error, done func(), _ error) {
	log := newLogger(cfg, cmd.ErrOrStderr())
	dialed, closeDialed := dialShards(cmd.Context(), *cfg, log, specs, needSchema, timeout)
	shards := make([]workq.Shard, len(dialed))
	var lazy []*pgxpool.Pool
	done = func() {
		for _, p := range lazy {
			p.Close()
		}
		closeDialed()
	}
	down = map[string]error{}
	for i, d := range dialed {
		shards[i] = workq.Shard{Name: d.name, Pool: d.pool}
		if d.err == nil {
			continue
		}
		down[d.name] = d.err
		pc, err := pgxpool.ParseConfig(specs[i].url)
		if err != nil {
			done()
			return nil, nil, nil, fmt.Errorf("shard %s: %w", d.name, d.err)
		}
		pool, err := pgxpool.NewWithConfig(cmd.Context(), pc) // connects when first used
		if err != nil {
			done()
			return nil, nil, nil, fmt.Errorf("shard %s: %w", d.name, d.err)
		}
		lazy = append(lazy, pool)
		shards[i].Pool = pool
	}
	c := clientConfig(*cfg, log, nil, nil)
	c.MetricsRegisterer = nil
	c.Maintenance.Disabled = true
	client, err := workq.NewShardedClient(shards, c)
	if err != nil {
		done()
		return nil, nil, nil, err
	}
	return client, down, done, nil
}

// runSharded acts on the ids of each shard, shard after shard, through
// the Client of every shard. A shard that cannot be opened, or whose
// statement fails, is reported with its ids (nothing was done to them, or
// its outcome is unknown when the connection broke mid-statement) and the
// others go on; the command then exits non-zero.
func (a action) runSharded(cmd *cobra.Command, cfg *config.Config, timeout time.Duration, k itemKind,
	by *workq.ActionOpts, groups []shardIDs, asJSON bool) error {
	ctx := cmd.Context()
	specs := make([]shardSpec, len(groups))
	for i, g := range groups {
		specs[i] = g.spec
	}
	client, down, done, err := shardsClient(cmd, cfg, specs, timeout)
	if err != nil {
		return err
	}
	defer done()
	out := cmd.OutOrStdout()
	var results []map[string]any
	var failed []string
	var left []skipped
	for _, g := range groups {
		name := g.spec.name
		err := down[name]
		var r actResult
		if err == nil {
			r, err = a.viaClient(ctx, client, k.table, name, by, g.ids)
		}
		if err != nil {
			failed = append(failed, fmt.Sprintf("shard %s: %v (not %s: %s)", name, err, a.done, labels(name, g.ids)))
			results = append(results, map[string]any{"shard": name, "error": err.Error(), "ids": g.ids})
			continue
		}
		m := map[string]any{"shard": name, a.done: nonNil(r.Applied), a.skipKey: nonNil(r.Skipped), "not_found": nonNil(r.NotFound)}
		if a.verb == "cancel" {
			m["requested"] = nonNil(r.Requested)
		}
		results = append(results, m)
		left = append(left, skippedOf(r, func(id int64) string { return label(name, id) })...)
		if !asJSON {
			a.printApplied(out, r, func(id int64) string { return label(name, id) })
		}
	}
	if asJSON {
		if err := printJSON(out, map[string]any{"shards": results}); err != nil {
			return err
		}
	}
	var errs []error
	if len(failed) > 0 {
		errs = append(errs, errors.New(strings.Join(failed, "; ")))
	}
	if len(left) > 0 {
		errs = append(errs, a.leftAlone(k.what, left))
	}
	return errors.Join(errs...)
}

func nonNil(ids []int64) []int64 {
	if ids == nil {
		return []int64{}
	}
	return ids
}

// showSharded is show of one SHARD:ID.
func showSharded(cmd *cobra.Command, cfg *config.Config, timeout time.Duration, k itemKind, arg string,
	specs []shardSpec, asJSON bool) error {
	groups, err := parseShardIDs([]string{arg}, k.what, specs)
	if err != nil {
		return err
	}
	g := groups[0]
	ctx := cmd.Context()
	client, down, done, err := shardsClient(cmd, cfg, []shardSpec{g.spec}, timeout)
	if err != nil {
		return err
	}
	defer done()
	if err := down[g.spec.name]; err != nil {
		return fmt.Errorf("shard %s: %w", g.spec.name, err)
	}
	ref := workq.ItemRef{Table: k.table, ID: g.ids[0], Shard: g.spec.name}
	it, err := client.Get(ctx, ref)
	if err != nil {
		return fmt.Errorf("shard %s: %w", g.spec.name, err)
	}
	atts, err := client.Attempts(ctx, ref)
	if err != nil {
		return fmt.Errorf("shard %s: %w", g.spec.name, err)
	}
	return printItem(cmd.OutOrStdout(), it, atts, itemWaitsFor(cmd, client, ref), asJSON)
}

// shardedPage is a merged list's JSON: items tagged with their shard, the
// cursor of the next page, the shards that did not answer.
type shardedPage struct {
	Items      []workq.Item `json:"items"`
	NextCursor *string      `json:"next_cursor,omitempty"`
	Down       []downShard  `json:"down,omitempty"`
}

type downShard struct {
	Shard string `json:"shard"`
	Error string `json:"error"`
}

// listSharded is list over several shards: one page of every shard's items
// (only shard only's, if given) merged newest first by the Client's List,
// paged with its cursor. A shard that cannot be opened or does not answer
// in timeout is left out with a warning; the command prints what the
// others gave and exits with exitPartial (the next cursor tries the shard
// again from where it was). With every shard down it fails.
func listSharded(cmd *cobra.Command, cfg *config.Config, timeout time.Duration, kindFlag string,
	specs []shardSpec, only, cursorText string, p workq.ListParams, asJSON bool) error {
	if cmd.Flags().Changed("before") {
		return fmt.Errorf("--before pages one database: with --shard, page with --cursor (the NEXT cursor printed)")
	}
	var cur shardlist.Cursor
	if cursorText != "" {
		var err error
		cur, err = shardlist.ParseCursor(cursorText)
		if err != nil {
			return fmt.Errorf("--cursor %q is not a cursor of this list (%s)", cursorText,
				strings.TrimPrefix(err.Error(), shardlist.ErrBadCursor.Error()+": "))
		}
		for name := range cur {
			if !hasShard(specs, name) {
				return fmt.Errorf("--cursor names shard %q, not one of --shard (the shards are %s): pass the same --shard flags as the previous page", name, shardNames(specs))
			}
		}
	}
	if only != "" {
		if !hasShard(specs, only) {
			return fmt.Errorf("--shard-only %q: no shard %q (the shards are %s)", only, only, shardNames(specs))
		}
		for _, sp := range specs {
			if sp.name == only {
				specs = []shardSpec{sp}
			}
		}
		// The Client of that shard alone reads that shard's place of a
		// cursor over every shard.
		if pos, ok := cur[only]; ok {
			cursorText = shardlist.Cursor{only: pos}.String()
		} else if cur != nil {
			cursorText = ""
		}
	}
	client, dialDown, done, err := shardsClient(cmd, cfg, specs, timeout)
	if err != nil {
		return err
	}
	defer done()
	ctx := cmd.Context()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	p.Cursor, p.AllowPartial = cursorText, true
	res, err := client.List(ctx, p)
	if err != nil {
		return err
	}
	// The shards that did not answer, in --shard order, each with why: the
	// error that kept it from opening, else its page's.
	var down []downShard
	for _, sp := range specs {
		err, ok := res.Unavailable[sp.name]
		if !ok {
			continue
		}
		if e := dialDown[sp.name]; e != nil {
			err = e
		}
		down = append(down, downShard{Shard: sp.name, Error: err.Error()})
	}
	if len(down) == len(specs) {
		msgs := make([]string, len(down))
		for i, d := range down {
			msgs[i] = fmt.Sprintf("shard %s: %s", d.Shard, d.Error)
		}
		return fmt.Errorf("no shard answered: %s", strings.Join(msgs, "; "))
	}
	out := cmd.OutOrStdout()
	if asJSON {
		page := shardedPage{Items: res.Items, Down: down}
		if res.Next != "" {
			page.NextCursor = &res.Next
		}
		if err := printJSON(out, page); err != nil {
			return err
		}
	} else if err := printShardedPage(out, kindFlag, res); err != nil {
		return err
	}
	if len(down) == 0 {
		return nil
	}
	names := make([]string, len(down))
	for i, d := range down {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: shard %s did not answer, its items are missing from this page: %s\n", d.Shard, d.Error)
		names[i] = d.Shard
	}
	return exitError{code: exitPartial, err: fmt.Errorf("partial list: shard(s) %s did not answer (the NEXT cursor tries them again from where they were)",
		strings.Join(names, ", "))}
}

func printShardedPage(w io.Writer, kindFlag string, page workq.ListResult) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "SHARD\tID\tQUEUE\t%s\tSTATE\tATTEMPTS\tRUN/ENDED AT\tLAST ERROR\n", strings.ToUpper(kindFlag))
	for _, it := range page.Items {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\n", it.Shard, label(it.Shard, it.ID), it.Queue, it.Kind, it.State,
			it.Attempts, it.MaxAttempts, it.WhenAt().Format(time.RFC3339), cell(it.LastError, 60))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if page.Next != "" {
		fmt.Fprintf(w, "NEXT %s (--cursor %s)\n", page.Next, page.Next)
	}
	return nil
}

func hasShard(specs []shardSpec, name string) bool {
	for _, sp := range specs {
		if sp.name == name {
			return true
		}
	}
	return false
}

// exitError is an error that ends the process with code instead of 1.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }
func (e exitError) ExitCode() int { return e.code }
