package workq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/kinds"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/shardlist"
	"github.com/workq/workq/workqtype"
)

// Table names a kind of work by its table: job runs, outbox messages,
// inbox messages or timers. The operator methods (Get, List, Retry,
// Cancel, Delete, PauseQueue...) take it.
type Table = workqtype.Table

// The four work tables.
const (
	TableJobRuns = workqtype.TableJobRuns
	TableOutbox  = workqtype.TableOutbox
	TableInbox   = workqtype.TableInbox
	TableTimers  = workqtype.TableTimers
)

// Tables lists the four work tables.
func Tables() []Table { return kinds.Tables() }

// Item is one work item of any table, as Get and List return it, payload
// included (see workqtype.Item).
type Item = workqtype.Item

// Attempt is one archived attempt of an item, or an operator's retry or
// cancel of it (outcome revived or cancelled, the actor as Worker).
type Attempt = workqtype.Attempt

// ErrWrongState is matched (errors.Is) by the error of an action on an
// item in a state the action does not take: Retry of an item that is not
// failed or cancelled, Delete of one that has not finished, Cancel of a
// finished one (which is also a *FinishedError). Nothing changed. A
// *StateError says the state.
var ErrWrongState = workqtype.ErrWrongState

// The item states (Item.Status), for ListParams.States.
const (
	StateReady      = "ready"
	StateInProgress = "in_progress"
	StateDone       = "done"
	StateFailed     = "failed"
	StateCancelled  = "cancelled"
	// StatePending is a workflow's task waiting for its dependencies.
	StatePending = "pending"
)

// ItemRef names one item: its table, its id and, on a Client of several
// shards, its shard (ids are unique per shard only). The result of every
// write makes one (Enqueued.Ref, outbox.Sent.Ref, inbox.Received.Ref,
// timers.Scheduled.Ref), and so does Item.Ref; a ref without a shard is
// looked up on every shard. See workqtype.ItemRef.
type ItemRef = workqtype.ItemRef

// JobRef is the ItemRef of job run id (on a sharded Client, set Shard or
// use Enqueued.Ref).
func JobRef(id int64) ItemRef { return ItemRef{Table: TableJobRuns, ID: id} }

// Ref is the ItemRef of the job an enqueue wrote, with its shard.
func (e Enqueued) Ref() ItemRef { return ItemRef{Table: TableJobRuns, ID: e.ID, Shard: e.Shard} }

// RefOf is the ItemRef of an item Get or List returned, with its shard.
func RefOf(it Item) ItemRef { return ItemRef{Table: it.Table, ID: it.ID, Shard: it.Shard} }

// validateRef checks that r names a table and an id in range.
func validateRef(r ItemRef) error {
	if _, ok := kinds.Of(r.Table); !ok {
		return workqtype.Invalid("table", fmt.Sprintf("table %q is not one of %s", r.Table, tableNames()))
	}
	if r.ID <= 0 || r.ID > lease.MaxItemID {
		return workqtype.Invalid("id", fmt.Sprintf("id %d: want 1 to %d", r.ID, int64(lease.MaxItemID)))
	}
	return nil
}

func tableNames() string { return kinds.TableList() }

// ActionOpts say who acts and why; both are recorded in the run archive
// with a retry or a cancel (Attempts shows them), and with a pause.
type ActionOpts struct {
	// Actor names who acts: "ops:alice", "api:deploy-bot"... Default
	// "client:<host>-<pid>". At most 256 bytes.
	Actor string
	// Reason says why (optional; at most 1024 bytes).
	Reason string
}

// actor is the admin.Actor of opts (nil: the default actor).
func actor(opts *ActionOpts) admin.Actor {
	a := admin.Actor{Name: defaultActor}
	if opts != nil {
		a.Reason = opts.Reason
		if opts.Actor != "" {
			a.Name = opts.Actor
		}
	}
	return a
}

// Limits of List.
const (
	DefaultListLimit = 50   // items per page when ListParams.Limit is 0
	MaxListLimit     = 1000 // most items per page
)

// The limits are admin's (a difference does not compile: a negative
// constant does not convert to uint).
const _ = uint(DefaultListLimit-admin.DefaultLimit) + uint(admin.DefaultLimit-DefaultListLimit) +
	uint(MaxListLimit-admin.MaxLimit) + uint(admin.MaxLimit-MaxListLimit)

// ListParams select a page of items. Zero fields match everything.
type ListParams struct {
	// Table is the kind of work to list (default: job runs).
	Table Table
	// States are the states listed (StateReady...; the inbox's words
	// processing, processed and dead too); none: every state.
	States []string
	Queue  string
	// Kind is the job kind (job runs) or the topic (the other tables).
	Kind string
	// Metadata matches the job runs whose metadata (EnqueueOpts.Metadata)
	// holds every one of its keys with its value; only job runs have
	// metadata. No index serves it: a page reads a bounded window of items
	// (as with ErrorText).
	Metadata map[string]string
	// CreatedAfter and CreatedBefore bound the creation time: at or after,
	// and before.
	CreatedAfter, CreatedBefore time.Time
	// ErrorText matches the items whose last error contains it, ignoring
	// case. No index serves it: a page reads a bounded window of items
	// and may come back short, or empty, with a Next cursor to read on.
	ErrorText string
	// The filters of one table's own columns (zero: any). A filter on
	// another table is an error matching ErrInvalid that names it.
	//
	// LimitKey is a job run's limit key (EnqueueOpts.LimitKey; job runs
	// only).
	LimitKey string
	// PartitionKey is an outbox message's partition key (outbox only).
	PartitionKey string
	// MessageID is an outbox message's message id (outbox only): the
	// message with it, on whichever shard it is (at most one per shard).
	MessageID uuid.UUID
	// Source is an inbox message's source, the sending system (inbox
	// only).
	Source string
	// DueAfter and DueBefore bound a timer's due time: at or after, and
	// before (timers only).
	DueAfter, DueBefore time.Time
	// Shard lists one shard of a sharded Client ("": every shard).
	Shard string
	// Cursor is ListResult.Next of the previous page ("": the first).
	Cursor string
	// Limit is the page size, 1 to MaxListLimit (0: DefaultListLimit).
	Limit int
	// Order is List's order: NewestFirst (the zero value) or OldestFirst.
	// The bulk actions (RetryMatching...) walk newest first only.
	Order ListOrder
	// AllowPartial lists the shards that answer when some do not (they are
	// in ListResult.Unavailable and keep their place in the cursor);
	// without it the first shard's error is List's.
	AllowPartial bool
}

// ListResult is one page of items, newest first (ListParams.Order).
type ListResult struct {
	Items []Item
	// Next is the cursor of the next page (ListParams.Cursor); "" when
	// this page is the last. Items written after the first page never
	// shift a later one.
	Next string
	// Unavailable are the shards that did not answer, and why
	// (ListParams.AllowPartial); nil when every shard answered.
	Unavailable map[string]error
}

// filter is the admin.Filter of p.
func (p ListParams) filter() (admin.Filter, error) {
	f := admin.Filter{Queue: p.Queue, Statuses: p.States, Kind: p.Kind, CreatedAfter: p.CreatedAfter,
		CreatedBefore: p.CreatedBefore, ErrorText: p.ErrorText, Metadata: p.Metadata, Limit: p.Limit,
		LimitKey: p.LimitKey, PartitionKey: p.PartitionKey, MessageID: p.MessageID, Source: p.Source, DueAfter: p.DueAfter, DueBefore: p.DueBefore}
	if slices.Contains(p.States, "") {
		return f, workqtype.Invalid("states", "a state must not be empty")
	}
	if k, _ := kinds.Of(p.Table); len(p.Metadata) > 0 && !k.HasMetadata {
		return f, workqtype.Invalid("metadata", fmt.Sprintf("only job runs have metadata, not %s", p.Table))
	}
	if err := p.kindFilters(); err != nil {
		return f, err
	}
	return f, f.Validate()
}

// Get reads one item, payload included. An item that does not exist is
// an error matching ErrNotFound; a bad ref one matching ErrInvalid.
func (c *Client) Get(ctx context.Context, ref ItemRef) (_ Item, err error) {
	defer c.notMigrated(&err)
	sc, err := c.resolve(ctx, ref)
	if err != nil {
		return Item{}, err
	}
	it, err := admin.Get(ctx, sc.db, ref.Table, ref.ID)
	if err != nil {
		return Item{}, fmt.Errorf("workq: get %s: %w", ref, err)
	}
	it.Shard = sc.name
	return it, nil
}

// List returns one page of the items of one table matching p, newest
// first, payloads included. It walks the table's primary key (failed
// items: their own index) down from the cursor, so a page costs what it
// reads, not the size of the table. On a sharded Client it reads every
// shard's page at once and merges them newest first (by creation time,
// then shard and id); the cursor holds every shard's position, so paging
// never repeats or skips an item. ListParams.Order OldestFirst lists the
// other way: up the same indexes, merged oldest first.
func (c *Client) List(ctx context.Context, p ListParams) (_ ListResult, err error) {
	defer c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return ListResult{}, err
	}
	if p.Table == "" {
		p.Table = TableJobRuns
	}
	if err := validateRef(ItemRef{Table: p.Table, ID: 1}); err != nil {
		return ListResult{}, err
	}
	f, err := p.filter()
	if err != nil {
		return ListResult{}, err
	}
	if f.Oldest, err = p.oldest(); err != nil {
		return ListResult{}, err
	}
	shards, err := c.shardsOf(p.Shard)
	if err != nil {
		return ListResult{}, err
	}
	cur, err := listCursor(p, f.Oldest)
	if err != nil {
		return ListResult{}, err
	}
	if p.Cursor != "" {
		for name := range cur {
			if !slices.ContainsFunc(shards, func(sh shardlist.Shard) bool { return sh.Name == name }) {
				return ListResult{}, workqtype.Invalid("cursor", fmt.Sprintf("the cursor names shard %q, which this list does not read", name))
			}
		}
	}
	page, err := shardlist.List(ctx, shards, p.Table, f, cur, shardlist.Options{Tolerate: p.AllowPartial})
	if err != nil {
		return ListResult{}, fmt.Errorf("workq: list %s: %w", p.Table, err)
	}
	out := ListResult{Items: page.Items}
	if page.Next != nil {
		out.Next = page.Next.Format(f.Oldest)
	}
	for _, d := range page.Down {
		if out.Unavailable == nil {
			out.Unavailable = map[string]error{}
		}
		out.Unavailable[d.Shard] = d.Err
	}
	return out, nil
}

// Attempts lists the archived attempts of one item in claim order, with
// the operators' retries and cancels among them (outcome revived or
// cancelled, the actor as Worker and the reason as Error). The attempt in
// progress, if any, is on the item (Get). A deleted item's attempts stay
// until the archive's retention; an item that never existed is an error
// matching ErrNotFound.
func (c *Client) Attempts(ctx context.Context, ref ItemRef) (_ []Attempt, err error) {
	defer c.notMigrated(&err)
	sc, err := c.resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	atts, err := admin.Attempts(ctx, sc.db, ref.Table, ref.ID)
	if err != nil {
		return nil, fmt.Errorf("workq: attempts of %s: %w", ref, err)
	}
	if len(atts) == 0 {
		if _, err := admin.Get(ctx, sc.db, ref.Table, ref.ID); err != nil {
			return nil, fmt.Errorf("workq: attempts of %s: %w", ref, err)
		}
	}
	return atts, nil
}

// StateError is the error of an action on an item in a state the action
// does not take; it matches ErrWrongState.
type StateError struct {
	Ref    ItemRef
	Action string // retry, cancel or delete
	State  string // the item's state (its table's word: Item.State)
	Takes  string // the states the action takes
}

func (e *StateError) Error() string {
	return fmt.Sprintf("workq: %s %s: it is %s; %s takes %s items", e.Action, e.Ref, e.State, e.Action, e.Takes)
}

// Is makes errors.Is(err, ErrWrongState) true.
func (e *StateError) Is(target error) bool { return target == ErrWrongState }

// Retry puts a failed or cancelled item back to ready, due now, with its
// attempts reset (a cancelled one: the cancel undone; a dead inbox
// message: revived). It is recorded in the run archive with opts' actor
// and reason (outcome "revived"). An item in another state is left alone:
// the error matches ErrWrongState; a missing one ErrNotFound.
//
// Retry is the one name of this action: the HTTP API's and the CLI's
// retry, the dashboard's "Retry" (on the inbox: "Revive", `workq inbox
// revive`) and the archive's "revived" are it.
func (c *Client) Retry(ctx context.Context, ref ItemRef, opts *ActionOpts) (err error) {
	defer c.notMigrated(&err)
	_, err = c.act(ctx, ref, "retry", "failed or cancelled", func(ctx context.Context, db DB) (admin.Result, error) {
		return admin.Retry(ctx, db, ref.Table, actor(opts), ref.ID)
	})
	return err
}

// Delete deletes a finished (done, failed or cancelled) item; its archived
// attempts stay until the archive's retention. An item that has not
// finished is left alone: the error matches ErrWrongState (cancel it
// first); a missing one ErrNotFound. A workflow's task is left alone
// too (ErrWrongState): it goes with its workflow, at retention.
func (c *Client) Delete(ctx context.Context, ref ItemRef) (err error) {
	defer c.notMigrated(&err)
	_, err = c.act(ctx, ref, "delete", "finished (done, failed or cancelled)", func(ctx context.Context, db DB) (admin.Result, error) {
		return admin.Delete(ctx, db, ref.Table, ref.ID)
	})
	var se *StateError
	if errors.As(err, &se) && ref.Table == TableJobRuns && slices.Contains([]string{StateDone, StateFailed, StateCancelled}, se.State) {
		// finished, and left alone: a workflow's task
		return fmt.Errorf("workq: delete %s: a workflow's task goes with its workflow, at retention: %w", se.Ref, ErrWrongState)
	}
	return err
}

// act runs one action on the item of ref, on its shard, and turns what
// it left alone into an error.
func (c *Client) act(ctx context.Context, ref ItemRef, verb, takes string, do func(ctx context.Context, db DB) (admin.Result, error)) (admin.Result, error) {
	sc, err := c.resolve(ctx, ref)
	if err != nil {
		return admin.Result{}, err
	}
	if c.set != nil { // errors name the shard
		ref.Shard = sc.name
	}
	r, err := do(ctx, sc.db)
	if err != nil {
		return r, fmt.Errorf("workq: %s %s: %w", verb, ref, err)
	}
	return r, actionError(r, ref, verb, takes)
}

// actionError is the error of an action on one item that left it alone.
func actionError(r admin.Result, ref ItemRef, verb, takes string) error {
	switch {
	case len(r.Applied) == 1:
		return nil
	case len(r.NotFound) == 1:
		return fmt.Errorf("workq: %s %s: %w", verb, ref, ErrNotFound)
	}
	return &StateError{Ref: ref, Action: verb, State: r.States[ref.ID], Takes: takes}
}

// resolve returns the Client of the shard that holds ref's item after
// checking ref and ctx: the shard it names, the Client's one shard, or on
// a sharded Client the one shard where the id exists (looked up on every
// shard at once; ErrNotFound on none, ErrInvalid when several have it).
func (c *Client) resolve(ctx context.Context, ref ItemRef) (*Client, error) {
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	if err := validateRef(ref); err != nil {
		return nil, err
	}
	if ref.Shard != "" || c.set == nil {
		return c.Shard(ref.Shard)
	}
	shards, _ := c.shardsOf("")
	found := shardlist.Each(ctx, shards, 0, func(ctx context.Context, sh shardlist.Shard) (bool, error) {
		_, _, err := lease.New(sh.DB, ref.Table).Status(ctx, ref.ID)
		if errors.Is(err, ErrNotFound) {
			return false, nil
		}
		return err == nil, err
	})
	var on []string
	for _, a := range found {
		if a.Err != nil {
			return nil, fmt.Errorf("workq: look %s up on shard %s: %w", ref, a.Shard, workqtype.NotMigrated(a.Err, c.Schema()))
		}
		if a.Value {
			on = append(on, a.Shard)
		}
	}
	switch len(on) {
	case 0:
		return nil, fmt.Errorf("workq: %s on no shard: %w", ref, ErrNotFound)
	case 1:
		return c.set.byName[on[0]], nil
	}
	return nil, workqtype.Invalid("shard", fmt.Sprintf("%s exists on shards %s (ids are per shard): name the shard (ItemRef.Shard)", ref, strings.Join(on, ", ")))
}

// shardsOf returns the shards an operation reads: the one named (""
// every shard of the Client).
func (c *Client) shardsOf(name string) ([]shardlist.Shard, error) {
	var of []*Client
	switch {
	case name != "":
		sc, err := c.Shard(name)
		if err != nil {
			return nil, err
		}
		of = []*Client{sc}
	case c.set == nil:
		of = []*Client{c}
	default:
		of = c.set.shards
	}
	out := make([]shardlist.Shard, len(of))
	for i, sc := range of {
		out[i] = shardlist.Shard{Name: sc.name, DB: sc.db}
	}
	return out, nil
}

// unavailable is the error of an operation on every shard that failed on
// some, naming them (nil: none failed): a *ShardsError on several shards.
func unavailable[T any](what string, answers []shardlist.Answer[T]) error {
	failed := map[string]error{}
	for _, a := range answers {
		if a.Err != nil {
			failed[a.Shard] = a.Err
		}
	}
	if len(failed) == 0 {
		return nil
	}
	if len(answers) == 1 {
		return fmt.Errorf("workq: %s: %w", what, answers[0].Err)
	}
	return &ShardsError{Op: what, Failed: failed} // ready.go
}

// onEveryShard runs f on every shard of c at once (one database: on it);
// a shard that fails fails the call, naming it (what says what failed).
func onEveryShard[T any](ctx context.Context, c *Client, what string, f func(ctx context.Context, sh shardlist.Shard) (T, error)) ([]shardlist.Answer[T], error) {
	shards, _ := c.shardsOf("")
	answers := shardlist.Each(ctx, shards, 0, f)
	if err := unavailable(what, answers); err != nil {
		return nil, err
	}
	return answers, nil
}
