package lease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/workqtype"
)

// Table names a work table (workqtype.Table, which the Client's operator
// methods take).
type Table = workqtype.Table

// The four work tables.
const (
	JobRuns = workqtype.TableJobRuns
	Outbox  = workqtype.TableOutbox
	Inbox   = workqtype.TableInbox
	Timers  = workqtype.TableTimers
)

// ErrUnknownTable is returned for a table that is not in the registry.
var ErrUnknownTable = errors.New("unknown work table")

// tableDef is everything a work table supplies to the engine: its name, its
// code in run ids, and its claim. Every other lease statement (heartbeat,
// complete, reap, release, counts, retention) is written once in
// db/queries/lease.sql and serves every table.
type tableDef struct {
	table Table
	// code is the table's number in run ids (workq_table_code in SQL, which
	// must agree; test/run_id_test.go checks it). Assigned once, never
	// reused, at most maxTableCode.
	code uint8
	// claim runs the table's own claim statement (its order and the columns
	// it returns differ per table) and maps its rows to Items.
	claim func(ctx context.Context, q *gen.Queries, a claimArgs) ([]Item, error)
	// claimIDs claims the ready rows among ids that a flow claim picked
	// (workq_flow_pick); nil for a table whose flow claim grants a count
	// to its own claim statement instead (the outbox: flow.go).
	claimIDs func(ctx context.Context, q *gen.Queries, a claimArgs, ids []int64) ([]Item, error)
	// deleteFinished, when set, replaces the shared LeaseDeleteFinished for
	// a table whose retention has rules of its own (the outbox keeps failed
	// messages with a partition key: they may be blocking their key).
	deleteFinished func(ctx context.Context, q *gen.Queries, olderThanMs int64, max int32) (int64, error)
	// depth, when set, replaces the shared LeaseQueueDepth for a table
	// whose ready rows are in indexes of its own (the outbox).
	depth func(ctx context.Context, q *gen.Queries) ([]gen.LeaseQueueDepthRow, error)
	// resume says how the table's claim takes a resume point
	// (ClaimParams.Resume), following its claim order.
	resume resumeOrder
	// movesDone: rows that end done leave the table for its done table,
	// <table>_done (its workq_keeps_done is not constantly true, migration
	// 00027), whose day partitions retention makes and drops.
	movesDone bool

	rewritten sync.Map // template SQL text -> this table's SQL text
}

// resumeOrder is how a table's claim reads a resume point.
type resumeOrder int

const (
	resumeNone       resumeOrder = iota // ignores it (the outbox: its claims walk partition keys too)
	resumeByPriority                    // (priority desc, run_at, id): the point's priority from its run_at on
	resumeByRunAt                       // (run_at, id): from the point's run_at on
)

// claimArgs are the parameters every table's claim statement takes.
type claimArgs struct {
	table    Table
	code     uint8
	token    uuid.UUID
	queue    string
	max      int32
	leaseMs  int64
	workerID string
	opts     ClaimOptions
	resume   *ResumePoint
	grant    *int32    // inside a flow claim: what workq_flow_grant granted (the outbox)
	at       time.Time // inside a flow claim: the pick's clock, the rows' claimed_at
	into     []Item    // ClaimParams.Into
}

// maxTableCode is the largest code a run id can hold (six bits).
const maxTableCode = 63

// registry lists every work table. Adding a table: a migration with the
// table (the template's lease columns, its claim index) and its code in
// workq_table_code, a query file with its ingest and claim statements, and
// one entry here with its claim adapter (table_<name>.go).
var registry = []*tableDef{
	{table: JobRuns, code: 0, claim: claimJobRuns, claimIDs: claimJobRunsIDs, resume: resumeByPriority, movesDone: true},
	{table: Outbox, code: 1, claim: claimOutbox, deleteFinished: deleteFinishedOutbox, depth: depthOutbox},
	{table: Inbox, code: 2, claim: claimInbox, claimIDs: claimInboxIDs, resume: resumeByRunAt},
	{table: Timers, code: 3, claim: claimTimers, claimIDs: claimTimersIDs, resume: resumeByRunAt},
}

// Tables lists every work table, in registry order.
var Tables = tableNames()

func tableNames() []Table {
	out := make([]Table, len(registry))
	for i, d := range registry {
		out[i] = d.table
	}
	return out
}

func lookup(t Table) (*tableDef, error) {
	for _, d := range registry {
		if d.table == t {
			return d, nil
		}
	}
	return nil, fmt.Errorf("%w %q (want one of %s)", ErrUnknownTable, string(t), tableList())
}

func byCode(code uint64) (*tableDef, bool) {
	for _, d := range registry {
		if uint64(d.code) == code {
			return d, true
		}
	}
	return nil, false
}

func tableList() string {
	names := make([]string, len(registry))
	for i, d := range registry {
		names[i] = string(d.table)
	}
	return strings.Join(names, ", ")
}

// DoneTable returns the table that t's rows move to when they end done
// (<table>_done, day-partitioned by finished_at, migration 00027), and
// whether they do: false for a table that keeps every finished row in
// place, whose done table stays empty.
func DoneTable(t Table) (string, bool, error) {
	d, err := lookup(t)
	if err != nil {
		return "", false, err
	}
	return string(d.table) + "_done", d.movesDone, nil
}

// ParseTable validates a table name.
func ParseTable(s string) (Table, error) {
	d, err := lookup(Table(s))
	if err != nil {
		return "", err
	}
	return d.table, nil
}

// templateTable is the name the shared statements are written against
// (db/template/lease_table.sql); it never exists in a database.
const templateTable = "workq_lease_table"

// sql returns the statement text for this table: shared statements get the
// template name replaced by the table's own (a name from the registry, never
// from input), table statements pass through unchanged. Each text is
// rewritten once.
func (d *tableDef) sql(text string) string {
	if s, ok := d.rewritten.Load(text); ok {
		return s.(string)
	}
	s := strings.ReplaceAll(text, templateTable, string(d.table))
	d.rewritten.Store(text, s)
	return s
}

// onTable is a workqtype.DB that runs every statement on one table.
type onTable struct {
	db  workqtype.DB
	def *tableDef
}

func (o onTable) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return o.db.Exec(ctx, o.def.sql(sql), args...)
}

func (o onTable) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return o.db.Query(ctx, o.def.sql(sql), args...)
}

func (o onTable) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return o.db.QueryRow(ctx, o.def.sql(sql), args...)
}

// OnTable returns db with workq's shared lease statements bound to table
// t: every statement written against the lease template table runs on t
// instead. It is for workq's own packages, which build their generated
// queries on it; pass a transaction itself, not a handle derived from it,
// or the binding to the table is lost.
func OnTable(db workqtype.DB, t Table) (workqtype.DB, error) {
	d, err := lookup(t)
	if err != nil {
		return nil, err
	}
	return onTable{db: db, def: d}, nil
}
