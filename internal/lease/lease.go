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
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/workqtype"
)

// Status is a work row's state.
type Status int16

// States of a work row.
const (
	StatusReady      Status = 0
	StatusInProgress Status = 1
	StatusDone       Status = 2
	StatusFailed     Status = 3
	StatusCancelled  Status = 4 // ended by a cancel (Engine.Cancel), whatever the handler did
	// StatusPending is a workflow's task whose dependencies have not all
	// ended (job runs only): never claimed; it becomes ready, or is
	// cancelled, when they end.
	StatusPending Status = -1
)

// Finished reports whether s is a terminal state (done, failed, cancelled).
func (s Status) Finished() bool { return s >= StatusDone }

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
	case StatusCancelled:
		return "cancelled"
	case StatusPending:
		return "pending"
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
	// Cancelled ends the attempt and the item as cancelled. An attempt
	// whose cancel was requested (Engine.Cancel on a running item) ends
	// cancelled whatever outcome its completion carries.
	Cancelled Outcome = "cancelled"
)

// ErrLeaseLost means the caller no longer holds the lease on an item: it
// expired and was reaped or reclaimed, or another owner holds it now.
var ErrLeaseLost = workqtype.ErrLeaseLost

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
	Metadata      json.RawMessage // job_runs: a JSON object of strings or nil (EnqueueOpts.Metadata and the enqueuing span's trace context)
	LimitKey      string          // job_runs: the key per-key limits and fair claims count by ("": none)
	Headers       json.RawMessage // outbox
	PartitionKey  string          // outbox
	MessageID     string          // outbox (uuid) and inbox
	CorrelationID string          // outbox
	Topic         string          // outbox, timers, inbox (optional)
	DueTime       time.Time       // timers
}

// ClaimParams says what to claim.
type ClaimParams struct {
	Queue    string
	Max      int           // at most this many rows (the queue's limit W may give fewer)
	Lease    time.Duration // lease TTL
	WorkerID string        // recorded on the rows and in the run archive
	Options  ClaimOptions  // table-specific; tables without them ignore them
	// Resume, when set, lets the claim start reading its claim index at
	// the point instead of at the queue's start, skipping the entries that
	// earlier claims left dead: job runs read the point's priority from
	// Resume.RunAt on (higher and lower priorities still in full), timers
	// and the inbox (claimed in run_at order) from Resume.RunAt on. A ready
	// row that sorts before the point is not claimed by such a claim: the
	// caller must claim without a point often enough (the worker: at least
	// once a second, and after any claim that was not full). The outbox
	// ignores it. ResumeFrom computes one.
	Resume *ResumePoint
	// Flow is the claim loop's flow-control state for the queue, kept
	// between claims (nil: the claim asks whether the queue is under flow
	// control after every empty claim). See FlowCursor.
	Flow *FlowCursor
	// Into, when its capacity holds the claim, is the slice the claimed
	// items are written into (what it held is overwritten): a caller done
	// with an earlier claim's items passes them back here, and the claim
	// allocates no slice of its own (about 370 bytes an item). Job runs'
	// claims use it, but for those of a queue under flow control; the other
	// tables' claims allocate.
	Into []Item
}

// ResumePoint is where a claim may start reading a priority's ready rows
// (ClaimParams.Resume).
type ResumePoint struct {
	Priority int16
	RunAt    time.Time // database clock
}

// ResumeFrom returns the resume point of table's claim after one that took
// items: where that claim started reading (claims return rows in id order,
// not claim order), moved margin earlier so that rows committed a little
// late by transactions that began before it are still read. For job runs
// that is the highest priority taken and that priority's earliest run_at;
// for timers and the inbox the earliest run_at. Nil without items, or for a
// table whose claim takes no resume point (the outbox).
func ResumeFrom(table Table, items []Item, margin time.Duration) *ResumePoint {
	d, err := lookup(table)
	if err != nil || d.resume == resumeNone || len(items) == 0 {
		return nil
	}
	p := ResumePoint{Priority: items[0].Priority, RunAt: items[0].RunAt}
	for _, it := range items[1:] {
		switch {
		case d.resume == resumeByPriority && it.Priority > p.Priority:
			p = ResumePoint{Priority: it.Priority, RunAt: it.RunAt}
		case (d.resume == resumeByRunAt || it.Priority == p.Priority) && it.RunAt.Before(p.RunAt):
			p.RunAt = it.RunAt
		}
	}
	if d.resume == resumeByRunAt {
		p.Priority = 0
	}
	p.RunAt = p.RunAt.Add(-margin)
	return &p
}

// ClaimOptions are the claim options only some tables have. The zero value
// is every table's default claim.
type ClaimOptions struct {
	// AfterKey (outbox): the ordered claim visits partition keys after this
	// one first, then wraps around, so that keys late in sort order are not
	// starved when there are more claimable keys than one claim takes.
	AfterKey string
	// SkipTopics (outbox): a finally failed message of one of these topics
	// does not block its partition key; by default it does.
	SkipTopics []string
	// PassKeys (outbox): partition keys the claim leaves alone, handed over
	// to the queue's other claimers.
	PassKeys []string
	// Wake (outbox): the claim wakes the queue's claimers when it commits
	// (NOTIFY, as a new message does), so that another one takes a key
	// just added to PassKeys.
	Wake bool
}

// Claim is one claimed batch: every item shares the owner token.
type Claim struct {
	Token uuid.UUID
	Items []Item
}

// Held names one lease a caller holds: an item and the token of its claim.
type Held struct {
	ID    int64
	Token uuid.UUID
}

// Completion ends one attempt.
type Completion struct {
	ID      int64
	Token   uuid.UUID // the owner token the attempt was claimed under
	RunID   uuid.UUID // the attempt's run id (Item.RunID); Resolve needs it
	Outcome Outcome
	Error   string        // Retry and Failed: recorded as last_error and in the run archive
	Delay   time.Duration // Retry and Snoozed: how long until the row is claimable again
	// Output is what the handler returned (JSON, nil for none): stored
	// with the item (its output column) when the completion ends it done.
	Output []byte
}

// Applied reports the completions that took effect and the ids whose lease
// was lost.
type Applied struct {
	Status map[int64]Status // final status of every applied id
	Lost   []int64
}

// Reaped counts what ReapExpired did.
type Reaped struct {
	Requeued  int `json:"requeued"`
	Failed    int `json:"failed"`
	Cancelled int `json:"cancelled"` // their cancel had been requested
	// ByQueue splits the counts per queue (nil when nothing was reaped).
	ByQueue map[string]QueueReaped `json:"-"`
}

// QueueReaped counts the reaped items of one queue.
type QueueReaped struct {
	Requeued  int
	Failed    int
	Cancelled int
}

// Add adds o's counts to r.
func (r *Reaped) Add(o Reaped) {
	r.Requeued += o.Requeued
	r.Failed += o.Failed
	r.Cancelled += o.Cancelled
	for q, c := range o.ByQueue {
		if r.ByQueue == nil {
			r.ByQueue = map[string]QueueReaped{}
		}
		t := r.ByQueue[q]
		t.Requeued += c.Requeued
		t.Failed += c.Failed
		t.Cancelled += c.Cancelled
		r.ByQueue[q] = t
	}
}

// LocalTTL is how long, on its own monotonic clock, the holder of a lease
// may rely on it after sending the statement that set or extended it. The
// database set locked_until to at least (send time + ttl) on its own clock,
// so only durations measured by the holder matter, never the offset between
// the two clocks. The tenth of ttl kept back covers a difference in clock
// rate and gives a cancelled handler time to stop before another worker can
// claim the item.
func LocalTTL(ttl time.Duration) time.Duration { return ttl - ttl/10 }

// Engine runs the lease protocol on one table.
type Engine struct {
	table Table
	def   *tableDef
	err   error // the table is not registered: every call returns it
	q     *gen.Queries
	db    workqtype.DB // what q runs on: flow claims begin their transaction on it
}

// New returns an engine for table over db (a pool, a connection or a
// transaction). For a table that is not registered every call returns an
// error wrapping ErrUnknownTable.
func New(db workqtype.DB, table Table) *Engine {
	d, err := lookup(table)
	if err != nil {
		return &Engine{table: table, err: err}
	}
	return &Engine{table: table, def: d, q: gen.New(onTable{db: db, def: d}), db: db}
}

// ClaimByID leases one ready item by id, as a claim does (a fresh owner
// token, lease_version + 1, attempts + 1), and returns its lease fields;
// the table's own fields (kind, payload...) are left zero. ok is false when
// the item is not ready. The runtime never uses it (it claims by queue):
// package workqtest does, to run one handler on an item the caller's
// transaction has just written.
func (e *Engine) ClaimByID(ctx context.Context, id int64, ttl time.Duration, workerID string) (it Item, ok bool, err error) {
	return e.ClaimByIDAttempt(ctx, id, ttl, workerID, 0)
}

// ClaimByIDAttempt is ClaimByID starting attempt number attempt (at
// least; an item that has used more starts its next one), as though the
// attempts before it had been used: a test runs a handler on its third
// attempt without failing it twice. attempt is not checked against the
// item's max attempts.
func (e *Engine) ClaimByIDAttempt(ctx context.Context, id int64, ttl time.Duration, workerID string, attempt int32) (it Item, ok bool, err error) {
	if e.err != nil {
		return Item{}, false, fmt.Errorf("claim by id: %w", e.err)
	}
	token := uuid.New()
	r, err := e.q.LeaseClaimByID(ctx, gen.LeaseClaimByIDParams{OwnerToken: token, LeaseMs: ms(ttl), WorkerID: workerID, ID: id, MinAttempt: attempt})
	if errors.Is(err, pgx.ErrNoRows) {
		return Item{}, false, nil
	}
	if err != nil {
		return Item{}, false, fmt.Errorf("claim %s %d: %w", e.table, id, err)
	}
	it = Item{Table: e.table, ID: r.ID, Queue: r.Queue, Priority: r.Priority, Attempt: r.Attempts, MaxAttempts: r.MaxAttempts,
		LeaseVersion: r.LeaseVersion, RunID: runID(e.def.code, r.ID, r.LeaseVersion), OwnerToken: token, RunAt: r.RunAt,
		CreatedAt: r.CreatedAt}
	if r.LockedUntil != nil {
		it.LockedUntil = *r.LockedUntil
	}
	return it, true, nil
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
//
// When it returns an error other than for bad parameters, the returned
// Claim still carries the token: the statement may have committed without
// the caller seeing it (a timeout, a lost connection), and then the token
// holds rows nobody will run. ReleaseClaim(token) gives them back at once,
// without using an attempt.
func (e *Engine) Claim(ctx context.Context, p ClaimParams) (Claim, error) {
	if e.err != nil {
		return Claim{}, fmt.Errorf("claim: %w", e.err)
	}
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
	items, err := e.claimQueue(ctx, claimArgs{
		table: e.table, code: e.def.code, token: token, queue: p.Queue,
		max: int32(min(p.Max, math.MaxInt32)), leaseMs: ms(p.Lease), workerID: p.WorkerID, opts: p.Options, resume: p.Resume,
		into: p.Into,
	}, p.Flow)
	if err != nil {
		return Claim{Token: token}, fmt.Errorf("claim %s: %w", e.table, err)
	}
	if len(items) == 0 {
		return Claim{}, nil
	}
	return Claim{Token: token, Items: items}, nil
}

// Heartbeat extends many leases in one statement, each guarded by its own
// token. It returns the ids it extended and the ids whose lease is lost for
// certain (another token holds the row, or the lease expired by the database
// clock). An id in neither list was locked by a concurrent statement (a
// completion, a reap, or an earlier heartbeat still running on the server)
// and was skipped: its fate is that statement's. Beat reports cancel
// requests as well.
func (e *Engine) Heartbeat(ctx context.Context, held []Held, ttl time.Duration) (extended, lost []int64, err error) {
	b, err := e.Beat(ctx, held, ttl)
	return b.Extended, b.Lost, err
}

// Beats is what one heartbeat found (Engine.Beat).
type Beats struct {
	Extended []int64 // leases extended
	Lost     []int64 // leases lost for certain
	// CancelRequested are the held items (extended or not) whose cancel
	// was requested (Engine.Cancel on a running item): the holder should
	// stop the handler; whatever it completes with, the attempt ends
	// cancelled.
	CancelRequested []int64
}

// Beat is Heartbeat that also reports the held items whose cancel was
// requested: the fallback for a cancel notification the holder missed.
func (e *Engine) Beat(ctx context.Context, held []Held, ttl time.Duration) (Beats, error) {
	var b Beats
	if e.err != nil {
		return b, fmt.Errorf("heartbeat: %w", e.err)
	}
	if len(held) == 0 {
		return b, nil
	}
	ids := make([]int64, len(held))
	tokens := make([]string, len(held)) // text: pgx encodes []uuid.UUID through driver.Valuer, far slower
	for i, h := range held {
		ids[i], tokens[i] = h.ID, h.Token.String()
	}
	rows, err := e.q.LeaseHeartbeat(ctx, gen.LeaseHeartbeatParams{LeaseMs: ms(ttl), Ids: ids, OwnerTokens: tokens})
	if err != nil {
		return b, fmt.Errorf("heartbeat %s: %w", e.table, err)
	}
	for _, r := range rows {
		switch {
		case r.Extended:
			b.Extended = append(b.Extended, r.ID)
		case r.Lost:
			b.Lost = append(b.Lost, r.ID)
		}
		if r.CancelRequested {
			b.CancelRequested = append(b.CancelRequested, r.ID)
		}
	}
	return b, nil
}

// Complete ends many attempts in one statement; each completion is guarded by
// its own owner token, so one call can end attempts from several claims. An
// attempt (id and token) is completed at most once per call: a second
// completion of one is refused before anything is written.
func (e *Engine) Complete(ctx context.Context, cs []Completion) (Applied, error) {
	if e.err != nil {
		return Applied{}, fmt.Errorf("complete: %w", e.err)
	}
	if len(cs) == 0 {
		return Applied{Status: map[int64]Status{}}, nil
	}
	if err := distinctAttempts(cs); err != nil {
		return Applied{}, fmt.Errorf("complete %s: %w", e.table, err)
	}
	arg := gen.LeaseCompleteParams{
		Ids: make([]int64, len(cs)), TokenOf: make([]int32, len(cs)), Outcomes: make([]string, len(cs)),
		DelaysMs: make([]int64, len(cs)),
	}
	var tokens tokenSet
	for i, c := range cs {
		switch c.Outcome {
		case Done, Retry, Failed, Snoozed, Released, Cancelled:
		default:
			return Applied{}, fmt.Errorf("complete %s: unknown outcome %q for id %d", e.table, c.Outcome, c.ID)
		}
		arg.Ids[i], arg.TokenOf[i], arg.Outcomes[i], arg.DelaysMs[i] = c.ID, tokens.of(c.Token), string(c.Outcome), ms(c.Delay)
		// The errors and outputs are sent only when one of the batch has
		// one: the statement pads a null array with nulls, and reads a null
		// as none (most batches are all done, with neither).
		if c.Error != "" {
			if arg.Errors == nil {
				arg.Errors = make([]string, len(cs))
			}
			arg.Errors[i] = c.Error
		}
		if c.Output != nil {
			if arg.Outputs == nil {
				arg.Outputs = make([]string, len(cs))
			}
			arg.Outputs[i] = string(c.Output)
		}
	}
	arg.Tokens = tokens.list
	row, err := e.q.LeaseComplete(ctx, arg)
	if err == nil && len(row.Ids) != len(row.Statuses) {
		err = fmt.Errorf("%d ids applied but %d statuses", len(row.Ids), len(row.Statuses))
	}
	if err != nil {
		return Applied{}, fmt.Errorf("complete %s: %w", e.table, err)
	}
	a := Applied{Status: make(map[int64]Status, len(row.Ids))}
	for i, id := range row.Ids {
		a.Status[id] = Status(row.Statuses[i])
	}
	a.Lost = missing(arg.Ids, row.Ids)
	return a, nil
}

// tokenSet lists the distinct owner tokens of a completion batch, which
// names each completion's by its position in the list, from 1 (the
// statement's tokens and token_of). A batch holds the completions of a few
// claims, each claim's in a run: the last token found is tried first, the
// list searched while it is short, a map kept once it is not.
type tokenSet struct {
	list []uuid.UUID
	last int32
	at   map[uuid.UUID]int32
}

func (t *tokenSet) of(token uuid.UUID) int32 {
	if t.last > 0 && t.list[t.last-1] == token {
		return t.last
	}
	switch {
	case t.at != nil:
		if n, ok := t.at[token]; ok {
			t.last = n
			return n
		}
	default:
		if i := slices.Index(t.list, token); i >= 0 {
			t.last = int32(i + 1)
			return t.last
		}
	}
	t.list = append(t.list, token)
	t.last = int32(len(t.list))
	if t.at == nil && len(t.list) > 16 {
		t.at = make(map[uuid.UUID]int32, 2*len(t.list))
		for i, u := range t.list {
			t.at[u] = int32(i + 1)
		}
	} else if t.at != nil {
		t.at[token] = t.last
	}
	return t.last
}

// distinctAttempts refuses a batch that lists one attempt (id and token)
// twice: a caller's mistake, which the statement would apply once. Ids are
// distinct in nearly every batch, so they are checked by id alone first
// (a map of int64 keys, about half the cost of one of id and token), and
// only an id listed again under another token (an item lost and claimed
// again meanwhile, both completions flushed together) is looked at
// further.
func distinctAttempts(cs []Completion) error {
	if len(cs) < 2 {
		return nil
	}
	byID := make(map[int64]uuid.UUID, len(cs))
	var again []Completion
	for _, c := range cs {
		t, seen := byID[c.ID]
		switch {
		case !seen:
			byID[c.ID] = c.Token
		case t == c.Token:
			return fmt.Errorf("id %d appears twice under token %s", c.ID, c.Token)
		default:
			again = append(again, c)
		}
	}
	for i, c := range again {
		for _, o := range again[:i] {
			if o.ID == c.ID && o.Token == c.Token {
				return fmt.Errorf("id %d appears twice under token %s", c.ID, c.Token)
			}
		}
	}
	return nil
}

// Resolve finds out which of cs were applied although a Complete reported
// them lost. That happens when Complete is retried after an error whose
// statement had in fact committed: the retry finds the tokens gone. The run
// archive settles it, because the statement that ends an attempt writes the
// attempt's run row, or moves the item's row to the done table, where it
// stands for that run: a run with the completion's run id and token that a
// completion (not the reaper) wrote, or a done row with its run id, means
// cs ended as asked, and the outcome gives the status it left. The ids not
// in the result were lost.
func (e *Engine) Resolve(ctx context.Context, cs []Completion) (map[int64]Status, error) {
	if e.err != nil {
		return nil, fmt.Errorf("resolve: %w", e.err)
	}
	if len(cs) == 0 {
		return map[int64]Status{}, nil
	}
	byRun := make(map[uuid.UUID]Completion, len(cs))
	runIDs := make([]uuid.UUID, 0, len(cs))
	for _, c := range cs {
		if c.RunID == uuid.Nil {
			return nil, fmt.Errorf("resolve %s: completion of id %d has no run id", e.table, c.ID)
		}
		byRun[c.RunID] = c
		runIDs = append(runIDs, c.RunID)
	}
	rows, err := e.q.RunsByIDs(ctx, runIDs)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", e.table, err)
	}
	out := make(map[int64]Status, len(rows))
	for _, r := range rows {
		c, ok := byRun[r.RunID]
		if !ok || r.OwnerToken != c.Token {
			continue
		}
		switch Outcome(r.Outcome) {
		case Done:
			out[c.ID] = StatusDone
		case Failed:
			out[c.ID] = StatusFailed
		case Cancelled:
			out[c.ID] = StatusCancelled
		case Retry, Snoozed, Released:
			out[c.ID] = StatusReady
		}
		// "expired": the reaper ended the attempt, so the completion was lost.
	}
	if len(out) == len(cs) || !e.def.movesDone {
		return out, nil
	}
	ids := make([]int64, 0, len(cs)-len(out))
	for _, c := range cs {
		if _, ok := out[c.ID]; !ok {
			ids = append(ids, c.ID)
		}
	}
	moved, err := e.q.LeaseDoneRuns(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", e.table, err)
	}
	// A moved row keeps no token, but its run id names one claim (the lease
	// version is unique to it), and only that claim's token moves the row.
	for _, r := range moved {
		if c, ok := byRun[r.RunID]; ok {
			out[c.ID] = StatusDone
		}
	}
	return out, nil
}

// ErrClaimInFlight means a failed claim's server process has not finished
// with it, so what the claim will have taken is not known yet: the process
// was ended and is going, or it runs a statement. Call ReleaseClaim again
// shortly.
var ErrClaimInFlight = errors.New("the claim's server process has not finished with it")

// ClaimBackend names the server process of a claim's connection: its PID
// (pgconn.PgConn.PID) and the connection's local TCP address, which the
// server sees as the process's client_addr and client_port on a direct
// connection (an invalid Addr when not known, or not TCP).
type ClaimBackend struct {
	PID  uint32
	Addr netip.Addr
	Port int
}

// ReleaseClaim gives back, without using an attempt, every row that token
// still holds: the remedy for a claim whose result the caller never saw
// (Claim). backend is the server process that ran the claim (a zero PID if
// unknown); the caller must have closed that connection, as a client that
// gave up on a statement does. Giving up does not stop the statement on
// the server: the process may be running it, blocked on a client that is
// gone (where a cancel is ignored), or, loaded, may not have read it yet and
// show as idle, then run it and commit. So while the process is still the
// caller's connection's (its client address and port are backend's),
// ReleaseClaim ends it, which settles the claim: a statement the process
// has not read never runs, one it runs aborts, one that committed stays.
// A process it cannot identify as the caller's (a pooler's, or one seen
// through NAT, or over a Unix socket) it leaves alone: while it runs a
// statement the claim may be that statement (the client's own cancel
// request asked it to stop), and once idle it counts as settled. Until the
// claim is settled it returns ErrClaimInFlight and the caller calls again.
// It returns how many rows it released. Call it outside a transaction:
// within one, the server's view of its processes does not change.
func (e *Engine) ReleaseClaim(ctx context.Context, token uuid.UUID, backend ClaimBackend) (int, error) {
	if e.err != nil {
		return 0, fmt.Errorf("release claim: %w", e.err)
	}
	if backend.PID != 0 {
		pid := int32(backend.PID)
		if backend.Addr.IsValid() && backend.Port > 0 {
			ended, err := e.q.BackendTerminateOwn(ctx, gen.BackendTerminateOwnParams{Pid: pid, Port: int32(backend.Port), Addr: backend.Addr})
			if err != nil {
				return 0, fmt.Errorf("release claim on %s: end the claim's server process: %w", e.table, err)
			}
			if ended {
				return 0, ErrClaimInFlight
			}
		}
		st, err := e.q.BackendState(ctx, pid)
		if err != nil {
			return 0, fmt.Errorf("release claim on %s: %w", e.table, err)
		}
		if st.Active {
			return 0, ErrClaimInFlight
		}
	}
	rows, err := e.q.LeaseHeldBy(ctx, token)
	if err != nil {
		return 0, fmt.Errorf("release claim on %s: %w", e.table, err)
	}
	if len(rows) == 0 {
		return 0, nil
	}
	cs := make([]Completion, len(rows))
	for i, r := range rows {
		cs[i] = Completion{ID: r.ID, Token: token, RunID: runID(e.def.code, r.ID, r.LeaseVersion), Outcome: Released}
	}
	a, err := e.Complete(ctx, cs)
	if err != nil {
		return 0, fmt.Errorf("release claim: %w", err)
	}
	return len(a.Status), nil
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

// ReapExpired requeues up to max rows of queue ("" for every queue) whose
// lease expired, failing those with no attempts left. Safe to run from
// several processes at once.
func (e *Engine) ReapExpired(ctx context.Context, queue string, max int) (Reaped, error) {
	if e.err != nil {
		return Reaped{}, fmt.Errorf("reap: %w", e.err)
	}
	var q *string
	if queue != "" {
		q = &queue
	}
	rows, err := e.q.LeaseReapExpired(ctx, q, int32(min(max, math.MaxInt32)))
	if err != nil {
		return Reaped{}, fmt.Errorf("reap %s: %w", e.table, err)
	}
	var r Reaped
	if len(rows) > 0 {
		r.ByQueue = map[string]QueueReaped{}
	}
	for _, row := range rows {
		c := r.ByQueue[row.Queue]
		switch Status(row.Status) {
		case StatusFailed:
			r.Failed++
			c.Failed++
		case StatusCancelled:
			r.Cancelled++
			c.Cancelled++
		default:
			r.Requeued++
			c.Requeued++
		}
		r.ByQueue[row.Queue] = c
	}
	return r, nil
}

// StateCount is how many items of one queue are in one state.
type StateCount struct {
	Queue   string
	Status  Status
	Expired bool // in progress with an expired lease (not yet reaped)
	Count   int64
}

// CountByState counts the table's items per queue and state.
func (e *Engine) CountByState(ctx context.Context) ([]StateCount, error) {
	if e.err != nil {
		return nil, fmt.Errorf("count: %w", e.err)
	}
	rows, err := e.q.LeaseCountByState(ctx)
	if err != nil {
		return nil, fmt.Errorf("count %s: %w", e.table, err)
	}
	out := make([]StateCount, len(rows))
	for i, r := range rows {
		out[i] = StateCount{Queue: r.Queue, Status: Status(r.Status), Expired: r.Expired, Count: r.Count}
	}
	return out, nil
}

// DeleteFinished deletes up to max done, failed or cancelled items that finished more
// than olderThan ago, and returns how many it deleted (retention). On the
// outbox, failed messages with a partition key are kept: they may be
// blocking their key; and the partition-key counters of keys idle for as
// long are deleted too (outbox.DeleteFinished), and counted.
func (e *Engine) DeleteFinished(ctx context.Context, olderThan time.Duration, max int) (int64, error) {
	if e.err != nil {
		return 0, fmt.Errorf("delete finished: %w", e.err)
	}
	del := e.q.LeaseDeleteFinished
	if e.def.deleteFinished != nil {
		del = func(ctx context.Context, olderThanMs int64, maxRows int32) (int64, error) {
			return e.def.deleteFinished(ctx, e.q, olderThanMs, maxRows)
		}
	}
	n, err := del(ctx, ms(olderThan), int32(min(max, math.MaxInt32)))
	if err != nil {
		return 0, fmt.Errorf("delete finished %s: %w", e.table, err)
	}
	return n, nil
}

// Revive puts failed and cancelled items back to ready with their attempts
// reset, due now, and archives the action in the run archive (outcome
// "revived", with actor as the worker and reason as the error). It returns
// the ids it revived; ids in another state (ready, in progress, done, or
// gone) are left alone and not returned.
func (e *Engine) Revive(ctx context.Context, actor, reason string, ids ...int64) ([]int64, error) {
	if e.err != nil {
		return nil, fmt.Errorf("revive: %w", e.err)
	}
	if strings.TrimSpace(actor) == "" {
		return nil, fmt.Errorf("revive %s: actor must not be empty", e.table)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	got, err := e.q.LeaseRevive(ctx, gen.LeaseReviveParams{Ids: ids, Actor: actor, Reason: reason})
	if err != nil {
		return nil, fmt.Errorf("revive %s: %w", e.table, err)
	}
	return got, nil
}

// MaxLimit is the highest limit W SetLimit takes.
const MaxLimit = math.MaxInt32

// CheckLimit reports what SetLimit would reject (an error wrapping
// ErrInvalid), without touching a database.
func CheckLimit(table Table, queue string, w int) error {
	if err := checkQueue("set limit", table, queue); err != nil {
		return err
	}
	if w > MaxLimit {
		return fmt.Errorf("set limit of %s/%s: %w", table, queue, workqtype.Invalid("limit", fmt.Sprintf("W must be a whole number from 0 to %d, got %d", MaxLimit, w)))
	}
	return nil
}

// SetLimit sets the global limit W of in-progress rows of (table, queue),
// 0 to MaxLimit; a negative w removes the limit. A bad table, queue name or
// W is an error wrapping ErrInvalid, and nothing is written.
func SetLimit(ctx context.Context, db workqtype.DB, table Table, queue string, w int) error {
	if err := CheckLimit(table, queue, w); err != nil {
		return err
	}
	q := gen.New(db)
	if w < 0 {
		if _, err := q.QueueLimitsDelete(ctx, string(table), queue); err != nil {
			return fmt.Errorf("remove limit of %s/%s: %w", table, queue, err)
		}
		return nil
	}
	if err := q.QueueLimitsSet(ctx, gen.QueueLimitsSetParams{WorkTable: string(table), Queue: queue, MaxInProgress: int32(w)}); err != nil {
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

// Depth is how many items of one queue wait and run, for metrics.
type Depth struct {
	Queue      string
	Ready      int64         // ready items that are due
	Scheduled  int64         // ready items due later (a delay, a backoff, a timer)
	InProgress int64         // items in progress (leased)
	OldestDue  time.Duration // how long the oldest due ready item has been due (0: none is due)
}

// QueueDepth counts, per queue, the table's ready (due), scheduled (ready,
// due later) and in-progress items and the age of its oldest due ready item, in one statement that reads the
// ready and in-progress sets through their partial indexes and never the
// finished rows: its cost grows with the backlog, not with the history.
func (e *Engine) QueueDepth(ctx context.Context) ([]Depth, error) {
	if e.err != nil {
		return nil, fmt.Errorf("queue depth: %w", e.err)
	}
	depth := e.q.LeaseQueueDepth
	if e.def.depth != nil {
		depth = func(ctx context.Context) ([]gen.LeaseQueueDepthRow, error) { return e.def.depth(ctx, e.q) }
	}
	rows, err := depth(ctx)
	if err != nil {
		return nil, fmt.Errorf("queue depth of %s: %w", e.table, err)
	}
	out := make([]Depth, len(rows))
	for i, r := range rows {
		out[i] = Depth{Queue: r.Queue, Ready: r.Ready, Scheduled: r.Scheduled, InProgress: r.InProgress,
			OldestDue: time.Duration(r.OldestReadySeconds * float64(time.Second))}
	}
	return out, nil
}

// StuckCount is how many items of a queue are in progress past a bound.
type StuckCount struct {
	Queue       string
	Count       int64
	OldestClaim time.Time
}

// Stuck counts, per queue, the table's items in progress that were claimed
// more than olderThan ago: a worker holding an item far past its lease (a
// hung handler that still heartbeats, or a lease nothing expires).
func (e *Engine) Stuck(ctx context.Context, olderThan time.Duration) ([]StuckCount, error) {
	if e.err != nil {
		return nil, fmt.Errorf("stuck: %w", e.err)
	}
	rows, err := e.q.LeaseStuck(ctx, ms(olderThan))
	if err != nil {
		return nil, fmt.Errorf("stuck items of %s: %w", e.table, err)
	}
	out := make([]StuckCount, len(rows))
	for i, r := range rows {
		out[i] = StuckCount{Queue: r.Queue, Count: r.Count, OldestClaim: r.OldestClaim}
	}
	return out, nil
}

// CancelResult says what Engine.Cancel did.
type CancelResult struct {
	// Now are the ready items it cancelled at once (status cancelled, the
	// action archived with outcome "cancelled").
	Now []int64
	// Requested are the running items whose cancel it requested: their
	// holder was notified (NOTIFY on the schema's cancel channel, CancelChannel)
	// and its heartbeat reports it too; the statement that ends the attempt
	// ends it cancelled, whatever the handler returns.
	Requested []int64
}

// IDs are every id it acted on, in no particular order.
func (c CancelResult) IDs() []int64 { return append(append([]int64{}, c.Now...), c.Requested...) }

// CancelChannel is the notification channel's table part for cancel
// requests: the payload is "<table>:<id>" on workqtype.NotifyChannel(CancelChannel).
const CancelChannel = "cancel"

// Cancel cancels the ready and in-progress items among ids. A ready item
// ends cancelled at once, with last_error "cancelled by <actor>[: reason]",
// and the action is archived in the run archive (outcome "cancelled", actor
// as the worker, reason as the error). A running item gets its cancel
// requested (that last_error, and a notification to its holder): it ends
// cancelled when its attempt ends (the holder's completion, whatever the
// handler returned, or the reap of its lease), and that attempt is archived
// as cancelled. Finished and missing ids are left alone and not returned.
// Revive undoes a cancel.
func (e *Engine) Cancel(ctx context.Context, actor, reason string, ids ...int64) (CancelResult, error) {
	var c CancelResult
	if e.err != nil {
		return c, fmt.Errorf("cancel: %w", e.err)
	}
	if strings.TrimSpace(actor) == "" {
		return c, fmt.Errorf("cancel %s: %w", e.table, workqtype.Invalid("actor", "actor must not be empty"))
	}
	if len(ids) == 0 {
		return c, nil
	}
	rows, err := e.q.LeaseCancel(ctx, gen.LeaseCancelParams{Ids: ids, Actor: actor, Reason: reason})
	if err != nil {
		return c, fmt.Errorf("cancel %s: %w", e.table, err)
	}
	for _, r := range rows {
		if r.Requested {
			c.Requested = append(c.Requested, r.ID)
		} else {
			c.Now = append(c.Now, r.ID)
		}
	}
	return c, nil
}

// ErrNotFound is returned by Engine.Status for an item that does not exist.
var ErrNotFound = fmt.Errorf("item %w", workqtype.ErrNotFound)

// Status reads one item's state, and whether a cancel was requested while
// it runs; ErrNotFound when there is no such item.
func (e *Engine) Status(ctx context.Context, id int64) (st Status, cancelRequested bool, err error) {
	if e.err != nil {
		return 0, false, fmt.Errorf("status: %w", e.err)
	}
	r, err := e.q.LeaseStatus(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, fmt.Errorf("%w: %s %d", ErrNotFound, e.table, id)
	}
	if err != nil {
		return 0, false, fmt.Errorf("status %s %d: %w", e.table, id, err)
	}
	return Status(r.Status), r.CancelRequested, nil
}

// Statuses reads the status of each of ids that exists; an id with no
// item is missing from the map.
func (e *Engine) Statuses(ctx context.Context, ids ...int64) (map[int64]Status, error) {
	if e.err != nil {
		return nil, fmt.Errorf("statuses: %w", e.err)
	}
	out := make(map[int64]Status, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := e.q.LeaseStatuses(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("statuses of %s: %w", e.table, err)
	}
	for _, r := range rows {
		out[r.ID] = Status(r.Status)
	}
	return out, nil
}

// Delete deletes the finished (done, failed or cancelled) items among ids and returns
// the ids it deleted; ready and in-progress items are left alone. Their
// archived attempts stay in the run archive until its own retention. On the
// outbox, deleting a failed message that blocks its partition key lets the
// key's next message go.
func (e *Engine) Delete(ctx context.Context, ids ...int64) ([]int64, error) {
	if e.err != nil {
		return nil, fmt.Errorf("delete: %w", e.err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	got, err := e.q.LeaseDelete(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("delete %s: %w", e.table, err)
	}
	return got, nil
}

// QueueStats are one (table, queue)'s counts by state.
type QueueStats struct {
	Queue           string
	Ready           int64         // ready and due
	Scheduled       int64         // ready, not due yet
	InProgress      int64         // including Expired
	Expired         int64         // in progress with an expired lease, not yet reaped
	ClaimedRecently int64         // in progress, claimed in the last minute
	Done            int64         //
	Failed          int64         //
	Cancelled       int64         //
	Pending         int64         // a workflow's tasks waiting for their dependencies (job runs only)
	OldestReadyAge  time.Duration // how long the oldest due ready item has waited (database clock); 0 when none
}

// QueueStats counts the table's items per queue and state. It reads the
// whole table: for operators, not for every metrics scrape.
func (e *Engine) QueueStats(ctx context.Context) ([]QueueStats, error) {
	if e.err != nil {
		return nil, fmt.Errorf("queue stats: %w", e.err)
	}
	rows, err := e.q.LeaseQueueStats(ctx)
	if err != nil {
		return nil, fmt.Errorf("queue stats %s: %w", e.table, err)
	}
	out := make([]QueueStats, len(rows))
	for i, r := range rows {
		out[i] = QueueStats{Queue: r.Queue, Ready: r.Ready, Scheduled: r.Scheduled, InProgress: r.InProgress,
			Expired: r.Expired, ClaimedRecently: r.ClaimedRecently, Done: r.Done, Failed: r.Failed, Cancelled: r.Cancelled, Pending: r.Pending,
			OldestReadyAge: time.Duration(r.OldestReadyAgeMs) * time.Millisecond}
	}
	return out, nil
}
