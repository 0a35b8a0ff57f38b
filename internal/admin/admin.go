// Package admin is the operator's view of the four work tables, one API for
// all of them: read one item with its attempts from the run archive, page
// through items with filters, retry failed and cancelled items, cancel ready
// and running ones, delete finished ones, and count every queue by state. The HTTP API (package api)
// and the CLI are thin layers over it.
//
// Every action is one guarded statement that acts only on the items in the
// state it expects (retry: failed or cancelled; cancel: ready or in progress;
// delete: done, failed or cancelled) and
// reports which ids it acted on; the others are left untouched. Retry and
// cancel are archived in runs with the actor and reason.
package admin

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/kinds"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/worker"
	"github.com/workq/workq/workqtype"
)

// ErrInvalid is wrapped by every error about a bad request (an unknown
// table, a bad filter, too many ids): nothing was read or written.
var ErrInvalid = lease.ErrInvalid

// ErrNotFound is returned by Get for an item that does not exist.
var ErrNotFound = lease.ErrNotFound

// ErrWrongState is wrapped by the errors of callers (the CLI) that report
// the ids an action left alone because of their state (Result.States), as
// opposed to those that do not exist (Result.NotFound, ErrNotFound).
var ErrWrongState = workqtype.ErrWrongState

// Limits of one request.
const (
	DefaultLimit = 50   // items per page when Filter.Limit is 0
	MaxLimit     = 1000 // most items per page
	MaxIDs       = 1000 // most ids one action takes
	maxActorLen  = 256
	maxReasonLen = 1024

	// MaxErrorText is the longest Filter.ErrorText.
	MaxErrorText = 256
	// TextScanWindow and TextScanWindows bound what one page with an
	// ErrorText reads: up to TextScanWindows ranges of TextScanWindow ids,
	// each starting at the newest id below the cursor that the other
	// filters match (so gaps in the ids cost nothing).
	TextScanWindow  = 10000
	TextScanWindows = 5
)

// Item is one work item of any table (workqtype.Item, the Client's
// result type).
type Item = workqtype.Item

// Filter selects a page of items. Zero fields match everything.
type Filter struct {
	Queue  string // a queue name
	Status string // ready, in_progress, done, failed, cancelled, or the table's own word (processing, processed, dead)
	// Statuses are more statuses (Status's words): an item in any of them
	// (with Status) matches.
	Statuses      []string
	Kind          string    // the job kind, or the topic
	CreatedAfter  time.Time // created at or after
	CreatedBefore time.Time // created before
	// ErrorText matches items whose last_error contains it, ignoring case
	// (at most MaxErrorText bytes). No index can serve it: a page with it
	// reads at most TextScanWindows windows of TextScanWindow ids below the
	// cursor, so it may come back short, or empty, with a Next cursor to
	// search further (see List).
	ErrorText string
	// Metadata matches the job runs whose metadata contains every one of
	// its keys with its value (the other tables have none: an error). No
	// index serves it either: a page with it reads windows as one with an
	// ErrorText does.
	Metadata map[string]string
	// The filters of one kind's own columns (kinds.Kind.Filters; zero:
	// any); on a table that has not the column, List's error matches
	// ErrInvalid naming the filter. LimitKey: the job runs'; PartitionKey
	// and MessageID: the
	// outbox's; Source: the inbox's; DueAfter (at or after) and DueBefore
	// (before): the timers' due time.
	LimitKey     string
	PartitionKey string
	MessageID    uuid.UUID
	Source       string
	DueAfter     time.Time
	DueBefore    time.Time
	Before       int64 // the cursor: items with smaller ids (Page.Next of the previous page); 0 from the newest
	Limit        int   // 1 to MaxLimit; 0 means DefaultLimit
	// Oldest lists oldest first (ascending ids) instead: After is then the
	// cursor, items with larger ids (Page.Next of the previous page; 0
	// from the oldest), and Before is not used (see listOldest).
	Oldest bool
	After  int64
}

// Page is one page of items, newest first. Next is the cursor of the next
// page (Filter.Before), 0 when this page is the last. Items inserted after
// the first page have higher ids and never shift a later page.
type Page struct {
	Items []Item `json:"items"`
	Next  int64  `json:"next,omitempty"`
}

// view is how admin reads one table: its kind's page and get statements,
// mapped to Items.
func view(table lease.Table) (kinds.Kind, error) {
	if _, err := lease.ParseTable(string(table)); err != nil {
		return kinds.Kind{}, workqtype.InvalidErr("table", err)
	}
	k, ok := kinds.Of(table)
	if !ok {
		return kinds.Kind{}, invalid("table", "table %s has no kind", table)
	}
	return k, nil
}

// Statuses are the state names of every work table, in order.
var Statuses = kinds.StatusNames

// ParseStatus reads a status filter: a lease state name or a table's own
// word for it (inbox: processing, processed, dead).
func ParseStatus(s string) (lease.Status, error) {
	if st, ok := kinds.ParseState(s); ok {
		return st, nil
	}
	return 0, invalid("status", "status %q is not one of %s (or %s)", s, strings.Join(Statuses, ", "), strings.Join(kinds.OwnWords(), ", "))
}

// Validate checks f and says what is wrong with it.
func (f Filter) Validate() error {
	if f.Queue != "" {
		if err := workqtype.CheckQueue("queue", f.Queue); err != nil {
			return err
		}
	}
	if f.Status != "" {
		if _, err := ParseStatus(f.Status); err != nil {
			return err
		}
	}
	for _, s := range f.Statuses {
		if _, err := ParseStatus(s); err != nil {
			return err
		}
	}
	if f.Kind != "" && !worker.ValidTopic(f.Kind) {
		return invalid("kind", "kind %q: want 1 to 256 bytes of printable UTF-8 without spaces at its ends", f.Kind)
	}
	if !f.CreatedAfter.IsZero() && !f.CreatedBefore.IsZero() && !f.CreatedAfter.Before(f.CreatedBefore) {
		return invalid("created_after", "created_after %s is not before created_before %s",
			f.CreatedAfter.Format(time.RFC3339Nano), f.CreatedBefore.Format(time.RFC3339Nano))
	}
	if len(f.ErrorText) > MaxErrorText {
		return invalid("error", "error text is %d bytes, want at most %d", len(f.ErrorText), MaxErrorText)
	}
	if f.ErrorText != "" && (!utf8.ValidString(f.ErrorText) || strings.ContainsRune(f.ErrorText, 0)) {
		return invalid("error", "error text must be UTF-8 without NUL")
	}
	if f.Metadata != nil {
		if _, err := workqtype.EncodeMetadata("metadata", f.Metadata); err != nil {
			return err
		}
	}
	if f.Before < 0 || f.After < 0 {
		return invalid("cursor", "cursor %d is negative", min(f.Before, f.After))
	}
	if f.Limit < 0 || f.Limit > MaxLimit {
		return invalid("limit", "limit %d: want 1 to %d", f.Limit, MaxLimit)
	}
	return nil
}

// List returns one page of table's items matching f, newest first. It walks
// the primary key down from the cursor (failed items: their own index), so a
// page costs what it reads, not the size of the table; a filter that matches
// few rows of a large table reads further.
//
// With f.ErrorText or f.Metadata the page reads at most TextScanWindows windows of
// TextScanWindow ids (each one found by a one-row page of the other
// filters, so gaps cost nothing) and filters them by the text: it may hold
// fewer than the limit, even none, and still have a Next cursor, which
// continues the search below the ids already read.
func List(ctx context.Context, db workqtype.DB, table lease.Table, f Filter) (Page, error) {
	v, err := view(table)
	if err != nil {
		return Page{}, err
	}
	if err := f.Validate(); err != nil {
		return Page{}, err
	}
	switch st := f.statuses(); len(st) {
	case 0:
	case 1:
		f.Status, f.Statuses = st[0], nil
	default:
		if f.Oldest {
			return listStatusesOldest(f, st, func(g Filter) (Page, error) { return List(ctx, db, table, g) })
		}
		return listStatuses(f, st, func(g Filter) (Page, error) { return List(ctx, db, table, g) })
	}
	limit := f.Limit
	if limit == 0 {
		limit = DefaultLimit
	}
	a := kinds.PageArgs{Before: math.MaxInt64, Max: int32(limit) + 1}
	if f.Before > 0 {
		a.Before = f.Before
	}
	if f.Queue != "" {
		a.Queue = &f.Queue
	}
	if f.Kind != "" {
		a.Kind = &f.Kind
	}
	if f.Status != "" {
		s, _ := ParseStatus(f.Status)
		st := int16(s)
		a.Status = &st
	}
	if !f.CreatedAfter.IsZero() {
		a.After = &f.CreatedAfter
	}
	if !f.CreatedBefore.IsZero() {
		a.CreatedBefore = &f.CreatedBefore
	}
	q := gen.New(customPlans{db})
	if len(f.Metadata) > 0 {
		if !v.HasMetadata {
			return Page{}, invalid("metadata", "only job runs have metadata, not %s", table)
		}
		b, _ := workqtype.EncodeMetadata("metadata", f.Metadata)
		a.Metadata = ptr(string(b))
	}
	if err := kindFilters(v, f, &a); err != nil {
		return Page{}, err
	}
	if f.Oldest {
		return listOldest(ctx, q, v, table, a, f.After, f.ErrorText, limit)
	}
	if f.ErrorText != "" || a.Metadata != nil {
		return listText(ctx, q, v, table, a, f.ErrorText, limit)
	}
	items, err := v.Page(ctx, q, a)
	if err != nil {
		return Page{}, fmt.Errorf("list %s: %w", table, err)
	}
	return pageOf(items, limit, 0), nil
}

// listText is List with an error text or metadata (the filters no index
// serves): window by window down from the cursor, each window starting at
// the newest id the other filters match.
func listText(ctx context.Context, q *gen.Queries, v kinds.Kind, table lease.Table, a kinds.PageArgs, text string, limit int) (Page, error) {
	var items []Item
	for w := 0; w < TextScanWindows; w++ {
		probe := a
		probe.Max, probe.Metadata = 1, nil
		top, err := v.Page(ctx, q, probe)
		if err != nil {
			return Page{}, fmt.Errorf("list %s: %w", table, err)
		}
		if len(top) == 0 {
			return pageOf(items, limit, 0), nil
		}
		win := a
		win.Before = top[0].ID + 1
		win.MinID = max(top[0].ID-TextScanWindow+1, 1)
		if text != "" {
			win.ErrorText = &text
		}
		win.Max = int32(limit + 1 - len(items))
		got, err := v.Page(ctx, q, win)
		if err != nil {
			return Page{}, fmt.Errorf("list %s: %w", table, err)
		}
		items = append(items, got...)
		if len(items) > limit || win.MinID == 1 {
			return pageOf(items, limit, 0), nil
		}
		a.Before = win.MinID
	}
	// The windows are read: go on below them next time.
	return pageOf(items, limit, a.Before), nil
}

// pageOf makes a page of up to limit items (items may hold one more, which
// says there is a next page); more is the cursor of a search that stopped
// before the end of the table (0: none).
func pageOf(items []Item, limit int, more int64) Page {
	p := Page{Items: items, Next: more}
	if len(items) > limit {
		p.Items = items[:limit]
		p.Next = p.Items[limit-1].ID
	}
	if p.Items == nil {
		p.Items = []Item{}
	}
	return p
}

// Get reads one item with its payload and its table's own columns;
// ErrNotFound when there is none.
func Get(ctx context.Context, db workqtype.DB, table lease.Table, id int64) (Item, error) {
	v, err := view(table)
	if err != nil {
		return Item{}, err
	}
	if id <= 0 || id > lease.MaxItemID {
		return Item{}, invalid("id", "id %d: want 1 to %d", id, int64(lease.MaxItemID))
	}
	it, err := v.Get(ctx, gen.New(db), id)
	if errors.Is(err, pgx.ErrNoRows) {
		return Item{}, fmt.Errorf("%w: %s %d", ErrNotFound, table, id)
	}
	if err != nil {
		return Item{}, fmt.Errorf("get %s %d: %w", table, id, err)
	}
	return it, nil
}

// Attempts lists the archived attempts of one item in claim order, with
// operators' revives and cancels among them.
func Attempts(ctx context.Context, db workqtype.DB, table lease.Table, id int64) ([]workqtype.Attempt, error) {
	if _, err := view(table); err != nil {
		return nil, err
	}
	return lease.Attempts(ctx, db, table, id)
}

// UnknownState is the state in Result.States of an id left alone whose
// state could not be read after the action.
const UnknownState = "in an unknown state (reading it failed)"

// Result of an action on ids: the ids it acted on, and the others (not in
// the state the action needs, or gone), both in the order given.
type Result struct {
	Applied []int64 `json:"applied"`
	Skipped []int64 `json:"skipped"`
	// NotFound are the ids of Skipped that do not exist, in the order given.
	NotFound []int64 `json:"not_found"`
	// States is the status of every other id of Skipped (its table's own
	// word: done, ready, inbox processed...), the reason it was left alone;
	// UnknownState when reading the reasons failed after the action had
	// committed (Applied and Skipped are still true then).
	States map[int64]string `json:"states,omitempty"`
	// Requested (Cancel only) are the ids of Applied that were running:
	// their handler is being stopped, and each ends cancelled when its
	// attempt ends. The others of Applied are cancelled already.
	Requested []int64 `json:"requested,omitempty"`
}

// Actor says who acts and why; both are archived with a retry or a cancel.
type Actor struct {
	Name   string // required: "cli:alice", "api:ops-token", ...
	Reason string // optional
}

// Check reports what is wrong with a (an error wrapping ErrInvalid).
func (a Actor) Check() error { return a.validate() }

func (a Actor) validate() error {
	if strings.TrimSpace(a.Name) == "" {
		return invalid("actor", "actor must not be empty")
	}
	if len(a.Name) > maxActorLen {
		return invalid("actor", "actor is %d bytes, want at most %d", len(a.Name), maxActorLen)
	}
	if len(a.Reason) > maxReasonLen {
		return invalid("reason", "reason is %d bytes, want at most %d", len(a.Reason), maxReasonLen)
	}
	if !workqtype.ValidText(a.Name) || !workqtype.ValidText(a.Reason) {
		return invalid("actor", "actor and reason must be UTF-8 without NUL bytes")
	}
	return nil
}

// Retry puts failed and cancelled items back to ready with their attempts
// reset, due now (lease.Engine.Revive): for a dead inbox message a revive,
// for a cancelled item an undo.
func Retry(ctx context.Context, db workqtype.DB, table lease.Table, by Actor, ids ...int64) (Result, error) {
	if err := by.validate(); err != nil {
		return Result{}, err
	}
	return act(ctx, db, table, "retry", ids, func(e *lease.Engine) ([]int64, error) {
		return e.Revive(ctx, by.Name, by.Reason, ids...)
	})
}

// Cancel cancels ready and running items, with last_error "cancelled by
// <actor>" (lease.Engine.Cancel): a ready item is cancelled at once; a
// running one's handler is stopped by the worker holding it, and the item
// ends cancelled when the attempt ends (Result.Requested). Finished items
// are skipped.
func Cancel(ctx context.Context, db workqtype.DB, table lease.Table, by Actor, ids ...int64) (Result, error) {
	if err := by.validate(); err != nil {
		return Result{}, err
	}
	var requested []int64
	r, err := act(ctx, db, table, "cancel", ids, func(e *lease.Engine) ([]int64, error) {
		c, err := e.Cancel(ctx, by.Name, by.Reason, ids...)
		requested = c.Requested
		return c.IDs(), err
	})
	if err != nil || len(requested) == 0 {
		return r, err
	}
	running := make(map[int64]bool, len(requested))
	for _, id := range requested {
		running[id] = true
	}
	for _, id := range r.Applied { // in the order given
		if running[id] {
			r.Requested = append(r.Requested, id)
		}
	}
	return r, nil
}

// Delete deletes finished (done, failed or cancelled) items; their archived attempts
// stay until the archive's retention.
func Delete(ctx context.Context, db workqtype.DB, table lease.Table, ids ...int64) (Result, error) {
	return act(ctx, db, table, "delete", ids, func(e *lease.Engine) ([]int64, error) {
		return e.Delete(ctx, ids...)
	})
}

// act validates ids and runs one action on them.
func act(ctx context.Context, db workqtype.DB, table lease.Table, verb string, ids []int64, do func(*lease.Engine) ([]int64, error)) (Result, error) {
	k, err := view(table)
	if err != nil {
		return Result{}, err
	}
	if err := CheckIDs(ids); err != nil {
		return Result{}, fmt.Errorf("%s: %w", verb, err)
	}
	e := lease.New(db, table)
	got, err := do(e)
	if err != nil {
		return Result{}, err
	}
	done := make(map[int64]bool, len(got))
	for _, id := range got {
		done[id] = true
	}
	r := Result{Applied: []int64{}, Skipped: []int64{}, NotFound: []int64{}}
	for _, id := range ids {
		if done[id] {
			r.Applied = append(r.Applied, id)
		} else {
			r.Skipped = append(r.Skipped, id)
		}
	}
	if len(r.Skipped) == 0 {
		return r, nil
	}
	// Why each was left alone: gone, or in another state. Read after the
	// action, so a concurrent change may show (an item retried by another
	// operator meanwhile shows ready).
	st, err := e.Statuses(ctx, r.Skipped...)
	if err != nil {
		// The action has committed: report what it did, whatever the
		// reasons' read says.
		r.States = make(map[int64]string, len(r.Skipped))
		for _, id := range r.Skipped {
			r.States[id] = UnknownState
		}
		return r, nil
	}
	r.States = make(map[int64]string, len(st))
	for _, id := range r.Skipped {
		s, ok := st[id]
		if !ok {
			r.NotFound = append(r.NotFound, id)
			continue
		}
		r.States[id] = k.State(s)
	}
	return r, nil
}

// CheckIDs checks the ids of one action: 1 to MaxIDs of them, each a valid
// item id, none twice.
func CheckIDs(ids []int64) error {
	if len(ids) == 0 {
		return invalid("ids", "no ids given")
	}
	if len(ids) > MaxIDs {
		return invalid("ids", "%d ids, want at most %d per request", len(ids), MaxIDs)
	}
	seen := make(map[int64]bool, len(ids))
	for _, id := range ids {
		if id <= 0 || id > lease.MaxItemID {
			return invalid("ids", "id %d: want 1 to %d", id, int64(lease.MaxItemID))
		}
		if seen[id] {
			return invalid("ids", "id %d given twice", id)
		}
		seen[id] = true
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

// invalid is a *workqtype.ValidationError about field.
func invalid(field, format string, args ...any) error {
	return workqtype.Invalid(field, fmt.Sprintf(format, args...))
}
