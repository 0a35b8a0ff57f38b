// Package lease is the Go face of workq's lease protocol: claim a batch under
// a fresh owner token, heartbeat it, and end each attempt (ack, abandon with
// backoff, fail, snooze, release). It is one engine over the four work tables
// (outbox, inbox, timers, job_runs); the SQL itself lives in db/queries.
//
// Every call that touches in-progress rows is guarded in SQL by id, owner
// token and status; ids that a guarded call could not touch are reported as
// lost leases (ErrLeaseLost) and their work must be abandoned by the caller.
package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"

	"github.com/workq/workq/db/gen"
)

// Table names a work table.
type Table string

// The four work tables.
const (
	JobRuns Table = "job_runs"
	Outbox  Table = "outbox"
	Inbox   Table = "inbox"
	Timers  Table = "timers"
)

// Tables lists every work table.
var Tables = []Table{JobRuns, Outbox, Inbox, Timers}

// ParseTable validates a table name.
func ParseTable(s string) (Table, error) {
	for _, t := range Tables {
		if string(t) == s {
			return t, nil
		}
	}
	return "", fmt.Errorf("unknown work table %q (want one of job_runs, outbox, inbox, timers)", s)
}

// Status is a work row's state.
type Status int16

// States of a work row.
const (
	StatusReady      Status = 0
	StatusInProgress Status = 1
	StatusDone       Status = 2
	StatusFailed     Status = 3
)

func (s Status) String() string {
	switch s {
	case StatusReady:
		return "ready"
	case StatusInProgress:
		return "in_progress"
	case StatusDone:
		return "done"
	case StatusFailed:
		return "failed"
	}
	return fmt.Sprintf("status(%d)", int16(s))
}

// Outcome ends one attempt.
type Outcome string

// Attempt outcomes, as stored in runs.outcome.
const (
	Done     Outcome = "done"     // success
	Retry    Outcome = "retry"    // back to ready after a delay, or failed when attempts are exhausted
	Failed   Outcome = "failed"   // permanent failure
	Snoozed  Outcome = "snoozed"  // back to ready after a delay, attempt given back
	Released Outcome = "released" // back to ready now, attempt given back (shutdown)
)

// ErrLeaseLost means the caller no longer holds the lease on an item: it
// expired and was reaped or reclaimed, or another owner holds it now.
var ErrLeaseLost = errors.New("lease lost")

// LeaseLostError lists the ids whose lease was lost. It matches ErrLeaseLost.
type LeaseLostError struct {
	Table Table
	IDs   []int64
}

func (e *LeaseLostError) Error() string {
	return fmt.Sprintf("%s: lease lost on %d item(s): %v", e.Table, len(e.IDs), e.IDs)
}

// Is makes errors.Is(err, ErrLeaseLost) true.
func (e *LeaseLostError) Is(target error) bool { return target == ErrLeaseLost }

// Item is one claimed work row. Fields that a table does not have are zero.
type Item struct {
	Table        Table
	ID           int64
	Queue        string
	Kind         string // job_runs: kind; outbox and timers: topic; inbox: source
	Payload      json.RawMessage
	Priority     int16
	Attempt      int32 // 1 on the first attempt
	MaxAttempts  int32
	LeaseVersion int64 // fencing number: grows on every claim
	RunID        uuid.UUID
	OwnerToken   uuid.UUID
	RunAt        time.Time
	LockedUntil  time.Time
	CreatedAt    time.Time

	// Table-specific fields.
	Headers       json.RawMessage // outbox
	PartitionKey  string          // outbox
	MessageID     string          // outbox (uuid) and inbox
	CorrelationID string          // outbox
	Topic         string          // outbox, timers, inbox (optional)
	DueTime       time.Time       // timers
}

// ClaimParams says what to claim.
type ClaimParams struct {
	Queue          string
	Max            int           // at most this many rows (the queue's limit W may give fewer)
	Lease          time.Duration // lease TTL
	WorkerID       string        // recorded on the rows and in the run archive
	ReclaimExpired bool          // also reap this queue's expired leases in the same statement
}

// Claim is one claimed batch: every item shares the owner token.
type Claim struct {
	Token uuid.UUID
	Items []Item
}

// Completion ends one attempt.
type Completion struct {
	ID      int64
	Token   uuid.UUID // the owner token the attempt was claimed under
	Outcome Outcome
	Error   string        // Retry and Failed: recorded as last_error and in the run archive
	Delay   time.Duration // Retry and Snoozed: how long until the row is claimable again
}

// Applied reports the completions that took effect and the ids whose lease
// was lost.
type Applied struct {
	Status map[int64]Status // final status of every applied id
	Lost   []int64
}

// Reaped counts what ReapExpired did.
type Reaped struct {
	Requeued int `json:"requeued"`
	Failed   int `json:"failed"`
}

// Engine runs the lease protocol on one table.
type Engine struct {
	table Table
	q     *gen.Queries
}

// New returns an engine for table over db (a pool, a connection or a
// transaction).
func New(db gen.DBTX, table Table) *Engine {
	return &Engine{table: table, q: gen.New(db)}
}

// Table returns the engine's table.
func (e *Engine) Table() Table { return e.table }

func ms(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64(math.Ceil(float64(d) / float64(time.Millisecond)))
}

// Claim leases up to p.Max due rows of p.Queue under a fresh owner token.
func (e *Engine) Claim(ctx context.Context, p ClaimParams) (Claim, error) {
	if p.Max <= 0 {
		return Claim{}, nil
	}
	if p.Lease <= 0 {
		return Claim{}, fmt.Errorf("claim %s: lease must be positive, got %s", e.table, p.Lease)
	}
	// A token per claim, never per process: a worker that claims the same row
	// again must not let a late completion of its earlier attempt through.
	token, err := uuid.NewRandom()
	if err != nil {
		return Claim{}, fmt.Errorf("claim %s: mint owner token: %w", e.table, err)
	}
	items, err := e.claim(ctx, token, p)
	if err != nil {
		return Claim{}, fmt.Errorf("claim %s: %w", e.table, err)
	}
	if len(items) == 0 {
		return Claim{}, nil
	}
	return Claim{Token: token, Items: items}, nil
}

func (e *Engine) claim(ctx context.Context, token uuid.UUID, p ClaimParams) ([]Item, error) {
	lease, n := ms(p.Lease), int32(min(p.Max, math.MaxInt32))
	// Fields every row of a claim shares, and the ones derived from the row.
	item := func(id int64, attempt, maxAttempts int32, leaseVersion int64, lockedUntil *time.Time) Item {
		return Item{Table: e.table, ID: id, Queue: p.Queue, Attempt: attempt, MaxAttempts: maxAttempts,
			LeaseVersion: leaseVersion, RunID: RunID(e.table, id, leaseVersion), OwnerToken: token, LockedUntil: deref(lockedUntil)}
	}
	switch e.table {
	case JobRuns:
		rows, err := e.q.JobRunsClaim(ctx, gen.JobRunsClaimParams{OwnerToken: token, LeaseMs: lease, WorkerID: p.WorkerID, ReclaimExpired: p.ReclaimExpired, Queue: p.Queue, MaxRows: n})
		items := make([]Item, len(rows))
		for i, r := range rows {
			it := item(r.ID, r.Attempts, r.MaxAttempts, r.LeaseVersion, r.LockedUntil)
			it.Kind, it.Payload, it.Priority, it.RunAt, it.CreatedAt = r.Kind, r.Payload, r.Priority, r.RunAt, r.CreatedAt
			items[i] = it
		}
		return items, err
	case Outbox:
		rows, err := e.q.OutboxClaim(ctx, gen.OutboxClaimParams{OwnerToken: token, LeaseMs: lease, WorkerID: p.WorkerID, ReclaimExpired: p.ReclaimExpired, Queue: p.Queue, MaxRows: n})
		items := make([]Item, len(rows))
		for i, r := range rows {
			it := item(r.ID, r.Attempts, r.MaxAttempts, r.LeaseVersion, r.LockedUntil)
			it.Kind, it.Topic, it.Payload, it.Priority, it.RunAt, it.CreatedAt = r.Topic, r.Topic, r.Payload, r.Priority, r.RunAt, r.CreatedAt
			it.Headers, it.PartitionKey, it.MessageID, it.CorrelationID = r.Headers, deref(r.PartitionKey), r.MessageID.String(), deref(r.CorrelationID)
			items[i] = it
		}
		return items, err
	case Inbox:
		rows, err := e.q.InboxClaim(ctx, gen.InboxClaimParams{OwnerToken: token, LeaseMs: lease, WorkerID: p.WorkerID, ReclaimExpired: p.ReclaimExpired, Queue: p.Queue, MaxRows: n})
		items := make([]Item, len(rows))
		for i, r := range rows {
			it := item(r.ID, r.Attempts, r.MaxAttempts, r.LeaseVersion, r.LockedUntil)
			it.Kind, it.Topic, it.Payload, it.Priority, it.RunAt, it.CreatedAt = r.Source, deref(r.Topic), r.Payload, r.Priority, r.RunAt, r.CreatedAt
			it.MessageID = r.MessageID
			items[i] = it
		}
		return items, err
	case Timers:
		rows, err := e.q.TimersClaim(ctx, gen.TimersClaimParams{OwnerToken: token, LeaseMs: lease, WorkerID: p.WorkerID, ReclaimExpired: p.ReclaimExpired, Queue: p.Queue, MaxRows: n})
		items := make([]Item, len(rows))
		for i, r := range rows {
			it := item(r.ID, r.Attempts, r.MaxAttempts, r.LeaseVersion, r.LockedUntil)
			it.Kind, it.Topic, it.Payload, it.Priority, it.RunAt, it.CreatedAt = r.Topic, r.Topic, r.Payload, r.Priority, r.RunAt, r.CreatedAt
			it.DueTime = r.DueTime
			items[i] = it
		}
		return items, err
	}
	return nil, fmt.Errorf("unknown table %q", e.table)
}

// Heartbeat extends the leases of ids held by token. It returns the ids it
// extended; the others are lost (expired or owned by someone else).
func (e *Engine) Heartbeat(ctx context.Context, token uuid.UUID, ids []int64, lease time.Duration) (extended, lost []int64, err error) {
	if len(ids) == 0 {
		return nil, nil, nil
	}
	switch e.table {
	case JobRuns:
		extended, err = e.q.JobRunsHeartbeat(ctx, gen.JobRunsHeartbeatParams{LeaseMs: ms(lease), Ids: ids, OwnerToken: token})
	case Outbox:
		extended, err = e.q.OutboxHeartbeat(ctx, gen.OutboxHeartbeatParams{LeaseMs: ms(lease), Ids: ids, OwnerToken: token})
	case Inbox:
		extended, err = e.q.InboxHeartbeat(ctx, gen.InboxHeartbeatParams{LeaseMs: ms(lease), Ids: ids, OwnerToken: token})
	case Timers:
		extended, err = e.q.TimersHeartbeat(ctx, gen.TimersHeartbeatParams{LeaseMs: ms(lease), Ids: ids, OwnerToken: token})
	default:
		err = fmt.Errorf("unknown table %q", e.table)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("heartbeat %s: %w", e.table, err)
	}
	return extended, missing(ids, extended), nil
}

// Complete ends many attempts in one statement; each completion is guarded by
// its own owner token, so one call can end attempts from several claims.
func (e *Engine) Complete(ctx context.Context, cs []Completion) (Applied, error) {
	if len(cs) == 0 {
		return Applied{Status: map[int64]Status{}}, nil
	}
	ids := make([]int64, len(cs))
	tokens := make([]string, len(cs)) // text: pgx encodes []uuid.UUID through driver.Valuer, far slower
	outcomes := make([]string, len(cs))
	errs := make([]string, len(cs))
	delays := make([]int64, len(cs))
	for i, c := range cs {
		switch c.Outcome {
		case Done, Retry, Failed, Snoozed, Released:
		default:
			return Applied{}, fmt.Errorf("complete %s: unknown outcome %q for id %d", e.table, c.Outcome, c.ID)
		}
		ids[i], tokens[i], outcomes[i], errs[i], delays[i] = c.ID, c.Token.String(), string(c.Outcome), c.Error, ms(c.Delay)
	}
	type row struct {
		id     int64
		status int16
	}
	var rows []row
	var err error
	switch e.table {
	case JobRuns:
		var rs []gen.JobRunsCompleteRow
		rs, err = e.q.JobRunsComplete(ctx, gen.JobRunsCompleteParams{Ids: ids, OwnerTokens: tokens, Outcomes: outcomes, Errors: errs, DelaysMs: delays})
		for _, r := range rs {
			rows = append(rows, row{r.ID, r.Status})
		}
	case Outbox:
		var rs []gen.OutboxCompleteRow
		rs, err = e.q.OutboxComplete(ctx, gen.OutboxCompleteParams{Ids: ids, OwnerTokens: tokens, Outcomes: outcomes, Errors: errs, DelaysMs: delays})
		for _, r := range rs {
			rows = append(rows, row{r.ID, r.Status})
		}
	case Inbox:
		var rs []gen.InboxCompleteRow
		rs, err = e.q.InboxComplete(ctx, gen.InboxCompleteParams{Ids: ids, OwnerTokens: tokens, Outcomes: outcomes, Errors: errs, DelaysMs: delays})
		for _, r := range rs {
			rows = append(rows, row{r.ID, r.Status})
		}
	case Timers:
		var rs []gen.TimersCompleteRow
		rs, err = e.q.TimersComplete(ctx, gen.TimersCompleteParams{Ids: ids, OwnerTokens: tokens, Outcomes: outcomes, Errors: errs, DelaysMs: delays})
		for _, r := range rs {
			rows = append(rows, row{r.ID, r.Status})
		}
	default:
		err = fmt.Errorf("unknown table %q", e.table)
	}
	if err != nil {
		return Applied{}, fmt.Errorf("complete %s: %w", e.table, err)
	}
	a := Applied{Status: make(map[int64]Status, len(rows))}
	done := make([]int64, len(rows))
	for i, r := range rows {
		a.Status[r.id] = Status(r.status)
		done[i] = r.id
	}
	a.Lost = missing(ids, done)
	return a, nil
}

// Ack marks ids done. It returns a *LeaseLostError for ids it could not.
func (e *Engine) Ack(ctx context.Context, token uuid.UUID, ids ...int64) error {
	cs := make([]Completion, len(ids))
	for i, id := range ids {
		cs[i] = Completion{ID: id, Token: token, Outcome: Done}
	}
	return e.completeAll(ctx, cs)
}

// Abandon sends id back to ready after delay (typically a backoff), or to
// failed when its attempts are exhausted.
func (e *Engine) Abandon(ctx context.Context, token uuid.UUID, id int64, reason string, delay time.Duration) error {
	return e.completeAll(ctx, []Completion{{ID: id, Token: token, Outcome: Retry, Error: reason, Delay: delay}})
}

// Fail marks id failed at once, whatever attempts remain.
func (e *Engine) Fail(ctx context.Context, token uuid.UUID, id int64, reason string) error {
	return e.completeAll(ctx, []Completion{{ID: id, Token: token, Outcome: Failed, Error: reason}})
}

// Release hands ids back to ready at once without using an attempt.
func (e *Engine) Release(ctx context.Context, token uuid.UUID, ids ...int64) error {
	cs := make([]Completion, len(ids))
	for i, id := range ids {
		cs[i] = Completion{ID: id, Token: token, Outcome: Released}
	}
	return e.completeAll(ctx, cs)
}

func (e *Engine) completeAll(ctx context.Context, cs []Completion) error {
	a, err := e.Complete(ctx, cs)
	if err != nil {
		return err
	}
	if len(a.Lost) > 0 {
		return &LeaseLostError{Table: e.table, IDs: a.Lost}
	}
	return nil
}

// ReapExpired requeues up to max rows whose lease expired, failing those
// with no attempts left. Safe to run from several processes at once.
func (e *Engine) ReapExpired(ctx context.Context, max int) (Reaped, error) {
	n := int32(min(max, math.MaxInt32))
	var statuses []int16
	var err error
	switch e.table {
	case JobRuns:
		var rs []gen.JobRunsReapExpiredRow
		rs, err = e.q.JobRunsReapExpired(ctx, n)
		for _, r := range rs {
			statuses = append(statuses, r.Status)
		}
	case Outbox:
		var rs []gen.OutboxReapExpiredRow
		rs, err = e.q.OutboxReapExpired(ctx, n)
		for _, r := range rs {
			statuses = append(statuses, r.Status)
		}
	case Inbox:
		var rs []gen.InboxReapExpiredRow
		rs, err = e.q.InboxReapExpired(ctx, n)
		for _, r := range rs {
			statuses = append(statuses, r.Status)
		}
	case Timers:
		var rs []gen.TimersReapExpiredRow
		rs, err = e.q.TimersReapExpired(ctx, n)
		for _, r := range rs {
			statuses = append(statuses, r.Status)
		}
	default:
		err = fmt.Errorf("unknown table %q", e.table)
	}
	if err != nil {
		return Reaped{}, fmt.Errorf("reap %s: %w", e.table, err)
	}
	var r Reaped
	for _, s := range statuses {
		if Status(s) == StatusFailed {
			r.Failed++
		} else {
			r.Requeued++
		}
	}
	return r, nil
}

// SetLimit sets the global limit W of in-progress rows of (table, queue);
// a negative w removes the limit.
func SetLimit(ctx context.Context, db gen.DBTX, table Table, queue string, w int) error {
	q := gen.New(db)
	if w < 0 {
		if _, err := q.QueueLimitsDelete(ctx, string(table), queue); err != nil {
			return fmt.Errorf("remove limit of %s/%s: %w", table, queue, err)
		}
		return nil
	}
	if err := q.QueueLimitsSet(ctx, gen.QueueLimitsSetParams{WorkTable: string(table), Queue: queue, MaxInProgress: int32(min(w, math.MaxInt32))}); err != nil {
		return fmt.Errorf("set limit of %s/%s: %w", table, queue, err)
	}
	return nil
}

// missing returns the ids of want that are not in got.
func missing(want, got []int64) []int64 {
	if len(got) == len(want) {
		return nil
	}
	seen := make(map[int64]struct{}, len(got))
	for _, id := range got {
		seen[id] = struct{}{}
	}
	var out []int64
	for _, id := range want {
		if _, ok := seen[id]; !ok {
			out = append(out, id)
		}
	}
	return out
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
