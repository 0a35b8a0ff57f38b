package lease_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
)

// leaseTable adapts one work table's generated queries to common shapes, so
// that the behaviour the four tables share is tested by one table-driven test.
type leaseTable struct {
	name string

	// enqueue inserts n ready rows into queue (EnqueueMany, or
	// InboxReceive) that become due after delayMs, and returns their ids in
	// input order.
	enqueue func(ctx context.Context, q *gen.Queries, spec enqueueSpec) ([]int64, error)
	// claim leases up to maxRows due rows of queue under a fresh owner token
	// (with reclaimExpired, after reaping the queue's expired leases, as the
	// worker does).
	claim func(ctx context.Context, q *gen.Queries, p claimParams) ([]claimedRow, error)
	// get reads the lease columns of one row.
	get func(ctx context.Context, q *gen.Queries, id int64) (leaseRow, error)
}

type enqueueSpec struct {
	queue       string
	n           int
	maxAttempts int32 // 0 means 4 (the column default)
	delayMs     int64 // eligibility delay; <= 0 means due now
}

type claimParams struct {
	queue          string
	workerID       string
	leaseMs        int64
	maxRows        int32
	reclaimExpired bool
}

// claimedRow is what every Claim returns, reduced to the lease columns.
type claimedRow struct {
	ID           int64
	Attempts     int32
	MaxAttempts  int32
	LeaseVersion int64
	Token        uuid.UUID
	RunID        uuid.UUID
	LockedUntil  time.Time
	Priority     int16
	RunAt        time.Time
}

// attemptEnd is one element of a Complete call.
type attemptEnd struct {
	ID      int64
	Token   uuid.UUID
	Outcome string // done, retry, failed, snoozed, released
	Error   string
	DelayMs int64
}

type idStatus struct {
	ID     int64
	Status lease.Status
}

// leaseRow is the lease part of a work row as Get reads it.
type leaseRow struct {
	ID           int64
	Queue        string
	Status       lease.Status
	Priority     int16
	RunAt        time.Time
	Token        *uuid.UUID
	LockedUntil  *time.Time
	LeaseVersion int64
	Attempts     int32
	MaxAttempts  int32
	ClaimedBy    *string
	LastError    *string
	FinishedAt   *time.Time
}

// The lease statements every table shares (db/queries/lease.sql) run through
// queries bound to the table (lease.Queries), so these need no adapter.

// reclaimFirst reaps the queue's expired leases when the claim asks for it,
// as the worker does before it claims, and mints the claim's owner token.
func reclaimFirst(ctx context.Context, q *gen.Queries, p claimParams) (uuid.UUID, error) {
	if p.reclaimExpired {
		if _, err := q.LeaseReapExpired(ctx, &p.queue, p.maxRows); err != nil {
			return uuid.Nil, err
		}
	}
	return uuid.New(), nil
}

// heartbeatRows extends the unexpired leases of ids held by token.
// It returns the ids it extended.
func heartbeatRows(ctx context.Context, q *gen.Queries, leaseMs int64, ids []int64, token uuid.UUID) ([]int64, error) {
	rows, err := q.LeaseHeartbeat(ctx, gen.LeaseHeartbeatParams{LeaseMs: leaseMs, Ids: ids, OwnerTokens: fill(len(ids), token.String())})
	var out []int64
	for _, r := range rows {
		if r.Extended {
			out = append(out, r.ID)
		}
	}
	return out, err
}

// completeRows ends the given attempts; it returns the (id, status) rows it applied to.
func completeRows(ctx context.Context, q *gen.Queries, ends []attemptEnd) ([]idStatus, error) {
	ids, tokens, outcomes, errs, delays := splitEnds(ends)
	// Each completion's token listed on its own (Engine.Complete lists the
	// distinct ones): the statement takes either.
	tokenOf := make([]int32, len(tokens))
	for i := range tokenOf {
		tokenOf[i] = int32(i + 1)
	}
	row, err := q.LeaseComplete(ctx, gen.LeaseCompleteParams{Ids: ids, Tokens: tokens, TokenOf: tokenOf, Outcomes: outcomes, Errors: errs, DelaysMs: delays})
	if err == nil && len(row.Ids) != len(row.Statuses) {
		return nil, fmt.Errorf("%d ids applied but %d statuses", len(row.Ids), len(row.Statuses))
	}
	out := make([]idStatus, len(row.Ids))
	for i, id := range row.Ids {
		out[i] = idStatus{id, lease.Status(row.Statuses[i])}
	}
	return out, err
}

// reapRows requeues (or fails) up to maxRows rows whose lease expired.
func reapRows(ctx context.Context, q *gen.Queries, maxRows int32) ([]idStatus, error) {
	rows, err := q.LeaseReapExpired(ctx, nil, maxRows)
	out := make([]idStatus, len(rows))
	for i, r := range rows {
		out[i] = idStatus{r.ID, lease.Status(r.Status)}
	}
	return out, err
}

// runID is lease.RunID for a registered table.
func runID(t lease.Table, id, leaseVersion int64) uuid.UUID {
	u, err := lease.RunID(t, id, leaseVersion)
	if err != nil {
		panic(err)
	}
	return u
}

// leaseTables lists the adapters of the four work tables.
var leaseTables = []leaseTable{jobRunsTable, outboxTable, inboxTable, timersTable}

func fill[T any](n int, v T) []T {
	s := make([]T, n)
	for i := range s {
		s[i] = v
	}
	return s
}

func (s enqueueSpec) attempts() int32 {
	if s.maxAttempts == 0 {
		return 4
	}
	return s.maxAttempts
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func splitEnds(ends []attemptEnd) (ids []int64, tokens []uuid.UUID, outcomes, errs []string, delays []int64) {
	for _, e := range ends {
		ids = append(ids, e.ID)
		tokens = append(tokens, e.Token)
		outcomes = append(outcomes, e.Outcome)
		errs = append(errs, e.Error)
		delays = append(delays, e.DelayMs)
	}
	return
}

var jobRunsTable = leaseTable{
	name: "job_runs",
	enqueue: func(ctx context.Context, q *gen.Queries, s enqueueSpec) ([]int64, error) {
		rows, err := q.JobRunsEnqueueMany(ctx, gen.JobRunsEnqueueManyParams{
			Queues:      fill(s.n, s.queue),
			Kinds:       fill(s.n, "test.kind"),
			Payloads:    fill(s.n, `{}`),
			Priorities:  fill(s.n, int16(0)),
			DelaysMs:    fill(s.n, s.delayMs),
			MaxAttempts: fill(s.n, s.attempts()),
			DedupKeys:   fill(s.n, ""),
		})
		ids := make([]int64, len(rows))
		for i, r := range rows {
			ids[i] = r.ID
		}
		return ids, err
	},
	claim: func(ctx context.Context, q *gen.Queries, p claimParams) ([]claimedRow, error) {
		tok, err := reclaimFirst(ctx, q, p)
		if err != nil {
			return nil, err
		}
		rows, err := q.JobRunsClaim(ctx, gen.JobRunsClaimParams{OwnerToken: tok, LeaseMs: p.leaseMs, WorkerID: p.workerID, Queue: p.queue, MaxRows: p.maxRows})
		out := make([]claimedRow, len(rows))
		for i, r := range rows {
			out[i] = claimedRow{r.ID, r.Attempts, r.MaxAttempts, r.LeaseVersion, tok, runID(lease.JobRuns, r.ID, r.LeaseVersion),
				deref(r.LockedUntil), r.Priority, r.RunAt}
		}
		return out, err
	},
	get: func(ctx context.Context, q *gen.Queries, id int64) (leaseRow, error) {
		r, err := q.JobRunsGet(ctx, id)
		return leaseRow{r.ID, r.Queue, lease.Status(r.Status), r.Priority, r.RunAt, r.OwnerToken, r.LockedUntil, r.LeaseVersion,
			r.Attempts, r.MaxAttempts, r.ClaimedBy, r.LastError, r.FinishedAt}, err
	},
}

var outboxTable = leaseTable{
	name: "outbox",
	enqueue: func(ctx context.Context, q *gen.Queries, s enqueueSpec) ([]int64, error) {
		rows, err := q.OutboxEnqueueMany(ctx, gen.OutboxEnqueueManyParams{
			Queues:         fill(s.n, s.queue),
			Topics:         fill(s.n, "test.topic"),
			PartitionKeys:  fill(s.n, ""),
			Payloads:       fill(s.n, `{}`),
			Headers:        fill(s.n, `{}`),
			CorrelationIds: fill(s.n, ""),
			Priorities:     fill(s.n, int16(0)),
			DelaysMs:       fill(s.n, s.delayMs),
			MaxAttempts:    fill(s.n, s.attempts()),
		})
		ids := make([]int64, len(rows))
		for i, r := range rows {
			ids[i] = r.ID
		}
		return ids, err
	},
	claim: func(ctx context.Context, q *gen.Queries, p claimParams) ([]claimedRow, error) {
		tok, err := reclaimFirst(ctx, q, p)
		if err != nil {
			return nil, err
		}
		rows, err := q.OutboxClaim(ctx, gen.OutboxClaimParams{OwnerToken: tok, LeaseMs: p.leaseMs, WorkerID: p.workerID, Queue: p.queue, MaxRows: p.maxRows})
		out := make([]claimedRow, len(rows))
		for i, r := range rows {
			out[i] = claimedRow{r.ID, r.Attempts, r.MaxAttempts, r.LeaseVersion, tok, runID(lease.Outbox, r.ID, r.LeaseVersion),
				deref(r.LockedUntil), r.Priority, r.RunAt}
		}
		return out, err
	},
	get: func(ctx context.Context, q *gen.Queries, id int64) (leaseRow, error) {
		r, err := q.OutboxGet(ctx, id)
		return leaseRow{r.ID, r.Queue, lease.Status(r.Status), r.Priority, r.RunAt, r.OwnerToken, r.LockedUntil, r.LeaseVersion,
			r.Attempts, r.MaxAttempts, r.ClaimedBy, r.LastError, r.FinishedAt}, err
	},
}

// inboxSeq makes (source, message_id) pairs unique across the calls of a test
// binary.
var inboxSeq atomic.Int64

var inboxTable = leaseTable{
	name: "inbox",
	enqueue: func(ctx context.Context, q *gen.Queries, s enqueueSpec) ([]int64, error) {
		if s.delayMs > 0 {
			// InboxReceive has no delay: a message is due on arrival.
			return nil, errors.New("inbox enqueue: InboxReceive takes no delay")
		}
		msgIDs := make([]string, s.n)
		for i := range msgIDs {
			// Zero-padded: InboxReceive inserts a batch in key order, so
			// ids follow the input order when the keys sort in it.
			msgIDs[i] = fmt.Sprintf("m-%012d", inboxSeq.Add(1))
		}
		rows, err := q.InboxReceive(ctx, gen.InboxReceiveParams{
			Queues:      fill(s.n, s.queue),
			Sources:     fill(s.n, "test-source"),
			MessageIds:  msgIDs,
			Topics:      fill(s.n, ""),
			Payloads:    fill(s.n, `{}`),
			Priorities:  fill(s.n, int16(0)),
			MaxAttempts: fill(s.n, s.attempts()),
		})
		ids := make([]int64, len(rows))
		for i, r := range rows {
			ids[i] = r.ID
		}
		return ids, err
	},
	claim: func(ctx context.Context, q *gen.Queries, p claimParams) ([]claimedRow, error) {
		tok, err := reclaimFirst(ctx, q, p)
		if err != nil {
			return nil, err
		}
		rows, err := q.InboxClaim(ctx, gen.InboxClaimParams{OwnerToken: tok, LeaseMs: p.leaseMs, WorkerID: p.workerID, Queue: p.queue, MaxRows: p.maxRows})
		out := make([]claimedRow, len(rows))
		for i, r := range rows {
			out[i] = claimedRow{r.ID, r.Attempts, r.MaxAttempts, r.LeaseVersion, tok, runID(lease.Inbox, r.ID, r.LeaseVersion),
				deref(r.LockedUntil), r.Priority, r.RunAt}
		}
		return out, err
	},
	get: func(ctx context.Context, q *gen.Queries, id int64) (leaseRow, error) {
		r, err := q.InboxGet(ctx, id)
		return leaseRow{r.ID, r.Queue, lease.Status(r.Status), r.Priority, r.RunAt, r.OwnerToken, r.LockedUntil, r.LeaseVersion,
			r.Attempts, r.MaxAttempts, r.ClaimedBy, r.LastError, r.FinishedAt}, err
	},
}

var timersTable = leaseTable{
	name: "timers",
	enqueue: func(ctx context.Context, q *gen.Queries, s enqueueSpec) ([]int64, error) {
		// Due times come from the Go clock; a timer due now is dated a second
		// back so that it is due by the database clock too.
		due := time.Now().Add(time.Duration(s.delayMs) * time.Millisecond)
		if s.delayMs <= 0 {
			due = due.Add(-time.Second)
		}
		rows, err := q.TimersEnqueueMany(ctx, gen.TimersEnqueueManyParams{
			Queues:      fill(s.n, s.queue),
			Topics:      fill(s.n, "test.topic"),
			Payloads:    fill(s.n, `{}`),
			DueTimes:    fill(s.n, due),
			Priorities:  fill(s.n, int16(0)),
			MaxAttempts: fill(s.n, s.attempts()),
		})
		ids := make([]int64, len(rows))
		for i, r := range rows {
			ids[i] = r.ID
		}
		return ids, err
	},
	claim: func(ctx context.Context, q *gen.Queries, p claimParams) ([]claimedRow, error) {
		tok, err := reclaimFirst(ctx, q, p)
		if err != nil {
			return nil, err
		}
		rows, err := q.TimersClaim(ctx, gen.TimersClaimParams{OwnerToken: tok, LeaseMs: p.leaseMs, WorkerID: p.workerID, Queue: p.queue, MaxRows: p.maxRows})
		out := make([]claimedRow, len(rows))
		for i, r := range rows {
			out[i] = claimedRow{r.ID, r.Attempts, r.MaxAttempts, r.LeaseVersion, tok, runID(lease.Timers, r.ID, r.LeaseVersion),
				deref(r.LockedUntil), r.Priority, r.RunAt}
		}
		return out, err
	},
	get: func(ctx context.Context, q *gen.Queries, id int64) (leaseRow, error) {
		r, err := q.TimersGet(ctx, id)
		return leaseRow{r.ID, r.Queue, lease.Status(r.Status), r.Priority, r.RunAt, r.OwnerToken, r.LockedUntil, r.LeaseVersion,
			r.Attempts, r.MaxAttempts, r.ClaimedBy, r.LastError, r.FinishedAt}, err
	},
}

// leaseEnv is one test's database and the adapter of the table under test.
type leaseEnv struct {
	t    *testing.T
	ctx  context.Context
	pool *pgxpool.Pool
	q    *gen.Queries
	tbl  leaseTable
}

func newLeaseEnv(t *testing.T, tbl leaseTable, maxConns int32) *leaseEnv {
	t.Helper()
	pool := testdb.PoolWith(t, maxConns)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	e := &leaseEnv{t: t, ctx: ctx, pool: pool, tbl: tbl}
	return e.on(t, tbl)
}

// newLeaseDB opens one database for the subtests of a test, which take their
// view of it with on. Creating a database per subtest would cost more than
// most subtests; sharing subtests run one after another and keep to their own
// table or queue.
func newLeaseDB(t *testing.T, maxConns int32) *leaseEnv {
	t.Helper()
	return newLeaseEnv(t, leaseTable{}, maxConns)
}

// on returns the view of e's database for subtest t and table tbl: its
// queries run the shared lease statements on tbl.
func (e *leaseEnv) on(t *testing.T, tbl leaseTable) *leaseEnv {
	c := *e
	c.t, c.tbl, c.q = t, tbl, gen.New(e.pool)
	if tbl.name != "" {
		db, err := lease.OnTable(e.pool, lease.Table(tbl.name))
		if err != nil {
			t.Fatal(err)
		}
		c.q = gen.New(db)
	}
	return &c
}

func (e *leaseEnv) enqueue(spec enqueueSpec) []int64 {
	e.t.Helper()
	ids, err := e.tbl.enqueue(e.ctx, e.q, spec)
	if err != nil {
		e.t.Fatalf("%s: enqueue %d rows into queue %q: %v", e.tbl.name, spec.n, spec.queue, err)
	}
	if len(ids) != spec.n {
		e.t.Fatalf("%s: enqueue returned %d ids, want %d", e.tbl.name, len(ids), spec.n)
	}
	return ids
}

func (e *leaseEnv) claim(p claimParams) []claimedRow {
	e.t.Helper()
	rows, err := e.tbl.claim(e.ctx, e.q, p)
	if err != nil {
		e.t.Fatalf("%s: claim (queue %q, worker %q, max %d): %v", e.tbl.name, p.queue, p.workerID, p.maxRows, err)
	}
	return rows
}

// claimOne claims exactly one row and fails the test when it gets another count.
func (e *leaseEnv) claimOne(p claimParams) claimedRow {
	e.t.Helper()
	p.maxRows = 1
	rows := e.claim(p)
	if len(rows) != 1 {
		e.t.Fatalf("%s: claim by %q returned %d rows, want 1", e.tbl.name, p.workerID, len(rows))
	}
	return rows[0]
}

func (e *leaseEnv) heartbeat(leaseMs int64, ids []int64, token uuid.UUID) []int64 {
	e.t.Helper()
	got, err := heartbeatRows(e.ctx, e.q, leaseMs, ids, token)
	if err != nil {
		e.t.Fatalf("%s: heartbeat %v: %v", e.tbl.name, ids, err)
	}
	return got
}

func (e *leaseEnv) complete(ends ...attemptEnd) []idStatus {
	e.t.Helper()
	got, err := completeRows(e.ctx, e.q, ends)
	if err != nil {
		e.t.Fatalf("%s: complete %+v: %v", e.tbl.name, ends, err)
	}
	return got
}

func (e *leaseEnv) reap(maxRows int32) []idStatus {
	e.t.Helper()
	got, err := reapRows(e.ctx, e.q, maxRows)
	if err != nil {
		e.t.Fatalf("%s: reap: %v", e.tbl.name, err)
	}
	return got
}

func (e *leaseEnv) get(id int64) leaseRow {
	e.t.Helper()
	r, err := e.tbl.get(e.ctx, e.q, id)
	if err != nil {
		e.t.Fatalf("%s: get %d: %v", e.tbl.name, id, err)
	}
	return r
}

// runs lists the archived attempts of item id in claim order. They are
// read from runs_all, the view over runs and the done rows, each
// of which stands for the attempt that moved it (with no token: uuid.Nil
// here), and checked against lease.Attempts, which reads them its own way.
func (e *leaseEnv) runs(id int64) []gen.Run {
	e.t.Helper()
	rows, err := e.pool.Query(e.ctx, `select run_id, work_table, item_id, queue, attempt, lease_version,
			coalesce(owner_token, '00000000-0000-0000-0000-000000000000'), worker_id, started_at, finished_at, outcome, error
		from workq.runs_all where work_table = $1 and item_id = $2 order by run_id`, e.tbl.name, id)
	if err != nil {
		e.t.Fatalf("%s: list runs of %d: %v", e.tbl.name, id, err)
	}
	rs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[gen.Run])
	if err != nil {
		e.t.Fatalf("%s: list runs of %d: %v", e.tbl.name, id, err)
	}
	atts, err := lease.Attempts(e.ctx, e.pool, lease.Table(e.tbl.name), id)
	if err != nil {
		e.t.Fatalf("%s: attempts of %d: %v", e.tbl.name, id, err)
	}
	if len(atts) != len(rs) {
		e.t.Fatalf("%s: attempts of %d: %d, runs_all has %d: %+v against %+v", e.tbl.name, id, len(atts), len(rs), atts, rs)
	}
	for i, a := range atts {
		r := rs[i]
		if a.RunID != r.RunID || a.Attempt != r.Attempt || a.LeaseVersion != r.LeaseVersion || a.Outcome != r.Outcome ||
			a.Worker != r.WorkerID || !a.StartedAt.Equal(r.StartedAt) || !a.FinishedAt.Equal(r.FinishedAt) {
			e.t.Fatalf("%s: attempt %d of %d: %+v, runs_all has %+v", e.tbl.name, i, id, a, r)
		}
	}
	return rs
}

// scalar runs a query that returns one value.
func (e *leaseEnv) scalar(dst any, sql string, args ...any) {
	e.t.Helper()
	if err := e.pool.QueryRow(e.ctx, sql, args...).Scan(dst); err != nil {
		e.t.Fatalf("%s: %s: %v", e.tbl.name, sql, err)
	}
}

// count returns count(*) of the table under test with a where clause,
// its done table's rows included (where done items move).
func (e *leaseEnv) count(where string, args ...any) int {
	e.t.Helper()
	var n int
	e.scalar(&n, fmt.Sprintf("select count(*) from (select * from workq.%[1]s union all select * from workq.%[1]s_done) t where %[2]s",
		e.tbl.name, where), args...)
	return n
}

// dbNow returns the database clock.
func (e *leaseEnv) dbNow() time.Time {
	e.t.Helper()
	var now time.Time
	e.scalar(&now, "select clock_timestamp()")
	return now
}

// waitExpired sleeps until every lease in rows has expired by the database
// clock.
func (e *leaseEnv) waitExpired(rows ...claimedRow) {
	e.t.Helper()
	var last time.Time
	for _, r := range rows {
		if r.LockedUntil.After(last) {
			last = r.LockedUntil
		}
	}
	for {
		d := last.Sub(e.dbNow())
		if d < 0 {
			return
		}
		time.Sleep(d + 5*time.Millisecond)
	}
}

func claimedIDs(rows []claimedRow) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

func sortedIDs(s []int64) []int64 {
	out := append([]int64(nil), s...)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}
