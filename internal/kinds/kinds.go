// Package kinds is the registry of the kinds of work: one entry per work
// table (job runs, outbox messages, inbox messages, timers) with what every
// layer above the engine needs to know about it: its name on the command
// line and in the HTTP API, its title and noun, what its items' Kind is,
// its words for the states, whether it has metadata, where a claimed item
// carries its trace context, and how the operator reads its rows (a page
// and one item, mapped to workqtype.Items).
//
// It is the counterpart of the engine's table registry (internal/lease,
// table.go), which says how a table is claimed; both list the same tables
// (kinds_test.go checks it). Adding a kind is one file here with its entry,
// and the entry in registry. This package imports the engine (lease, the
// generated queries, the per-kind runtime packages for their state words)
// and nothing above it: not admin, the root package, api, ui or cmd.
package kinds

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/workqtype"
)

// Kind is one kind of work: one work table and how the layers above the
// engine show it and read it. Its slices are shared: do not modify them.
type Kind struct {
	// Table is the kind's work table.
	Table workqtype.Table
	// Name is the one word the CLI's command and the HTTP API's path
	// segment use for the kind: "jobs", "outbox", "inbox", "timers".
	Name string
	// Title is how a page or a heading names the kind: "Job runs".
	Title string
	// Noun names one item in messages: "job run", "outbox message".
	Noun string
	// RetryWord is what the kind calls putting a failed item back to
	// ready: "retry", or the inbox's "revive" (its dead messages).
	RetryWord string
	// KindLabel is what Item.Kind is for the kind: WordKind (a job's
	// kind) or WordTopic; the CLI's filter flag has this name.
	KindLabel string
	// ClaimedKind is what lease.Item.Kind holds on a claimed item of the
	// kind: WordKind (job runs), WordTopic or WordSource (the inbox).
	ClaimedKind string
	// HasMetadata says the kind's items have metadata (a filter may match
	// it).
	HasMetadata bool
	// OwnRetention says the retention task leaves the kind's finished
	// items alone: another task deletes them (the inbox's de-duplication
	// window).
	OwnRetention bool

	// State names a status the way the kind's items show it (Item.State):
	// the lease name, or the kind's own word (inbox: processing,
	// processed, dead).
	State func(lease.Status) string
	// States are the kind's words for every status, in status order
	// (State of each): what a state filter of the kind offers. A filter
	// takes these and the lease names (ParseState).
	States []string

	// TraceContext is the JSON object a claimed item carries its
	// enqueuer's trace context in (nil: the kind carries none).
	TraceContext func(*lease.Item) json.RawMessage

	// Page reads one page of the kind's rows (its <Table>Page statement),
	// newest first, mapped to Items with their payloads.
	Page func(ctx context.Context, q *gen.Queries, a PageArgs) ([]workqtype.Item, error)
	// Get reads one row (its <Table>Get statement) with its own columns
	// in Item.Details; pgx.ErrNoRows when there is none.
	Get func(ctx context.Context, q *gen.Queries, id int64) (workqtype.Item, error)
	// Filters are the filters of the kind's own columns its Page and
	// PageAsc take (PageArgs' fields of the same names): FilterLimitKey
	// (job runs), FilterPartitionKey
	// and FilterMessageID (outbox), FilterSource (inbox), FilterDueAfter
	// and FilterDueBefore (timers). A filter of another kind is an error.
	Filters []string
	// PageAsc reads one page oldest first (its <Table>PageAsc statement,
	// up the same indexes): ids above AfterID, at or below MaxID.
	PageAsc func(ctx context.Context, q *gen.Queries, a PageArgs) ([]workqtype.Item, error)
}

// The words of Kind.KindLabel and Kind.ClaimedKind.
const (
	WordKind   = "kind"   // a job's kind
	WordTopic  = "topic"  // a message's or a timer's topic
	WordSource = "source" // an inbox message's source
)

// The filters of Kind.Filters: each a column of one kind's table, named
// as the column (and as the ListParams field's error names it).
const (
	FilterLimitKey     = "limit_key"     // job runs: the limit key (EnqueueOpts.LimitKey)
	FilterPartitionKey = "partition_key" // outbox: the partition key
	FilterMessageID    = "message_id"    // outbox: the message id
	FilterSource       = "source"        // inbox: the sending system
	FilterDueAfter     = "due_after"     // timers: due at or after
	FilterDueBefore    = "due_before"    // timers: due before
)

// Takes reports whether the kind takes the filter (one of Filters).
func (k Kind) Takes(filter string) bool {
	for _, f := range k.Filters {
		if f == filter {
			return true
		}
	}
	return false
}

// PageArgs are the parameters every kind's <Table>Page statement takes.
type PageArgs struct {
	Before               int64 // ids below it
	Queue, Kind          *string
	Status               *int16
	After, CreatedBefore *time.Time
	MinID                int64
	ErrorText            *string
	Metadata             *string // a JSON object (only kinds with HasMetadata)
	// The filters of one kind's own columns (Kind.Filters; nil: any):
	// the outbox's partition key and message id, the inbox's source, the
	// timers' due time (at or after DueAfter, before DueBefore).
	PartitionKey, Source *string
	LimitKey             *string // job runs' limit key
	MessageID            *uuid.UUID
	DueAfter, DueBefore  *time.Time
	Max                  int32
	// AfterID and MaxID bound an oldest-first page (PageAsc) instead of
	// Before and MinID: ids above AfterID, at or below MaxID.
	AfterID, MaxID int64
}

// registry lists every kind, in the order of lease's table registry: a
// literal, no registration at init. Adding a kind: its file with its
// entry, and the entry here.
var registry = [...]*Kind{&jobRuns, &outbox, &inbox, &timers}

// All lists every kind, in registry order: job runs, outbox, inbox,
// timers (the order of lease.Tables). The slice is new on every call.
func All() []Kind {
	out := make([]Kind, len(registry))
	for i, k := range registry {
		out[i] = *k
	}
	return out
}

// Of is the kind of table t. It is on the worker's path (a claimed
// item's WorkInfo, Message and trace context): it reads the registry in
// place and does not allocate.
func Of(t workqtype.Table) (Kind, bool) {
	for _, k := range registry {
		if k.Table == t {
			return *k, true
		}
	}
	return Kind{}, false
}

// ByName is the kind called name (Kind.Name: "jobs", "outbox"...).
func ByName(name string) (Kind, bool) {
	for _, k := range All() {
		if k.Name == name {
			return k, true
		}
	}
	return Kind{}, false
}

// Tables lists every kind's table, in registry order.
func Tables() []workqtype.Table {
	all := All()
	out := make([]workqtype.Table, len(all))
	for i, k := range all {
		out[i] = k.Table
	}
	return out
}

// TableList is every kind's table, comma separated, for messages.
func TableList() string {
	var s []string
	for _, k := range All() {
		s = append(s, string(k.Table))
	}
	return strings.Join(s, ", ")
}

// Statuses are every status, in order.
var Statuses = []lease.Status{lease.StatusReady, lease.StatusInProgress, lease.StatusDone, lease.StatusFailed, lease.StatusCancelled,
	lease.StatusPending}

// StatusNames are the lease names of Statuses, the words every kind's
// filter takes: ready, in_progress, done, failed, cancelled, pending (a
// workflow's task waiting for its dependencies: job runs only).
var StatusNames = statusNames()

func statusNames() []string {
	out := make([]string, len(Statuses))
	for i, s := range Statuses {
		out[i] = s.String()
	}
	return out
}

// ParseState reads a state filter of the kind: one of its words (States)
// or a lease name. A kind has a word for each of Statuses but the last
// ones it never holds (pending: job runs only); their lease names still
// read, and match none of its items.
func (k Kind) ParseState(word string) (lease.Status, bool) {
	for i, s := range Statuses {
		if word == StatusNames[i] || (i < len(k.States) && word == k.States[i]) {
			return s, true
		}
	}
	return 0, false
}

// ParseState reads a state filter that names a status in any kind's words
// (a filter over every kind: "processing" is the inbox's in_progress).
func ParseState(word string) (lease.Status, bool) {
	for _, k := range All() {
		if s, ok := k.ParseState(word); ok {
			return s, true
		}
	}
	return 0, false
}

// OwnWords are the words of every kind that are not lease names, each
// once, in registry and status order ("processing, processed, dead").
func OwnWords() []string {
	var out []string
	seen := map[string]bool{}
	for _, n := range StatusNames {
		seen[n] = true
	}
	for _, k := range All() {
		for _, w := range k.States {
			if !seen[w] {
				seen[w] = true
				out = append(out, w)
			}
		}
	}
	return out
}

// String is the kind's table name.
func (k Kind) String() string { return string(k.Table) }
