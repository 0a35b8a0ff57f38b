package test

// The history checker of the fault-injection suite (issue 11), in one place
// for every scenario: a test-only log of every lease event on the database
// clock, the webhook receiver that plays every handler and records when each
// ran, and the checks run over both after a scenario.
//
//   - Lease events: row triggers on job_runs and outbox write every claim,
//     heartbeat and end (completion or reap) to fault_history, in the same
//     transaction as the change and stamped with clock_timestamp() and with
//     now(), the time the statement's own checks read (locked_until <=
//     now() for a reap; leases and due times are set from it), so a
//     rolled-back or crashed change leaves no event. The run archive (runs) says how each attempt ended.
//   - Worker statements that changed nothing: a statement trigger logs every
//     LeaseComplete and LeaseHeartbeat with the rows it changed and the
//     session's application_name to fault_statements, so a late completion
//     or heartbeat that the database rejected is on record.
//   - Handler runs: every job and outbox message of a scenario is a webhook
//     to the receiver, which notes per request the item, the attempt, the
//     partition key, when the request arrived and when it ended (answered,
//     or cancelled because the worker dropped the connection). It stamps
//     them on its own clock and converts them to the database clock by an
//     offset measured by round trips (its uncertainty, half the shortest
//     round trip, is the checks' tolerance): an insert per event would
//     load the machine and could not be written while the database is down
//     (scenario 2), and under libfaketime the two clocks differ by hours
//     (scenario 7).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/publish"
)

// historySQL creates the log and its triggers in a scenario's database.
var historySQL = []string{
	`create table fault_history (
		seq           bigserial primary key,
		at            timestamptz not null default clock_timestamp(),
		stmt_at       timestamptz not null default now(), -- what the statement's own time checks read
		tbl           text not null,
		item_id       bigint not null,
		queue         text not null,
		event         text not null, -- claim, heartbeat, end, other
		old_status    smallint not null,
		new_status    smallint not null,
		lease_version bigint not null,
		attempts      integer not null,
		max_attempts  integer not null,
		token         text,          -- the lease's owner token (the new one for a claim)
		locked_until  timestamptz,   -- after a claim or heartbeat; before an end
		run_at        timestamptz not null,
		claimed_by    text,
		partition_key text,
		app           text not null default current_setting('application_name'))`,
	// One row per statement and table: a completion both updates rows and
	// deletes the done ones it moves to job_runs_done, and each part's
	// statement trigger adds its rows to the statement's one row.
	`create table fault_statements (
		seq       bigserial primary key,
		at        timestamptz not null default clock_timestamp(),
		xid       bigint not null default txid_current(),
		stmt_at   timestamptz not null default statement_timestamp(),
		tbl       text not null,
		statement text not null,
		rows      bigint not null,
		app       text not null default current_setting('application_name'),
		unique (xid, stmt_at, tbl, statement))`,
	`create table fault_handler (
		tbl           text not null,
		item_id       bigint,
		message_id    uuid,
		attempt       integer not null,
		partition_key text,
		started_at    timestamptz not null,
		ended_at      timestamptz not null,
		outcome       text not null)`,
	`create function fault_history_row() returns trigger language plpgsql as $$
	declare
		ev text;
		pk text;
	begin
		if old.status = -1 then
			-- a workflow's pending task: released to ready, or cancelled
			-- because a dependency failed (00026's trigger)
			ev := case new.status when 0 then 'release' when 4 then 'depcancel' else 'other' end;
		elsif old.status = 0 and new.status = 1 then
			ev := 'claim';
		elsif old.status = 1 and new.status = 1 then
			if new.owner_token is not distinct from old.owner_token and new.locked_until is not distinct from old.locked_until then
				return null;
			end if;
			ev := case when new.owner_token is distinct from old.owner_token then 'retoken' else 'heartbeat' end;
		elsif old.status = 1 then
			ev := 'end';
		elsif old.status = new.status and old.lease_version = new.lease_version then
			return null;
		else
			ev := 'other';
		end if;
		if TG_TABLE_NAME = 'outbox' then
			pk := new.partition_key;
		end if;
		insert into fault_history (tbl, item_id, queue, event, old_status, new_status, lease_version, attempts,
			max_attempts, token, locked_until, run_at, claimed_by, partition_key)
		values (TG_TABLE_NAME, new.id, new.queue, ev, old.status, new.status, new.lease_version, new.attempts,
			new.max_attempts, case when ev = 'claim' then new.owner_token else old.owner_token end::text,
			case when ev = 'end' then old.locked_until else new.locked_until end, new.run_at, new.claimed_by, pk);
		return null;
	end $$`,
	`create function fault_statement_log() returns trigger language plpgsql as $$
	declare
		name text := substring(current_query() from '-- name: (\w+)');
	begin
		if name in ('LeaseComplete', 'LeaseHeartbeat') then
			insert into fault_statements (tbl, statement, rows) select TG_TABLE_NAME, name, count(*) from changed
			on conflict (xid, stmt_at, tbl, statement) do update set rows = fault_statements.rows + excluded.rows;
		end if;
		return null;
	end $$`,
	// A completion that ends a job run done moves its row to job_runs_done:
	// the delete of a row in progress is that attempt's end (nothing else
	// deletes one), logged as the update to done would have been.
	`create function fault_history_moved() returns trigger language plpgsql as $$
	begin
		if old.status <> 1 then
			return null;
		end if;
		insert into fault_history (tbl, item_id, queue, event, old_status, new_status, lease_version, attempts,
			max_attempts, token, locked_until, run_at, claimed_by)
		values (TG_TABLE_NAME, old.id, old.queue, 'end', 1, 2, old.lease_version, old.attempts,
			old.max_attempts, old.owner_token::text, old.locked_until, old.run_at, old.claimed_by);
		return null;
	end $$`,
	`create trigger fault_history after update on workq.job_runs for each row execute function fault_history_row()`,
	`create trigger fault_history_moved after delete on workq.job_runs for each row execute function fault_history_moved()`,
	`create trigger fault_statements_moved after delete on workq.job_runs referencing old table as changed
		for each statement execute function fault_statement_log()`,
	`create trigger fault_history after update on workq.outbox for each row execute function fault_history_row()`,
	`create trigger fault_statements after update on workq.job_runs referencing new table as changed
		for each statement execute function fault_statement_log()`,
	`create trigger fault_statements after update on workq.outbox referencing new table as changed
		for each statement execute function fault_statement_log()`,
}

// installHistory creates the history log in db's database.
func installHistory(t *testing.T, db *pgxpool.Pool) {
	t.Helper()
	for _, sql := range historySQL {
		if _, err := db.Exec(context.Background(), sql); err != nil {
			t.Fatalf("install the history log: %v\n%s", err, sql)
		}
	}
}

// clockOffset is the database clock minus this process's clock, measured
// by round trips: the probe with the shortest round trip wins, and half of
// that round trip bounds the error.
type clockOffset struct {
	Offset, Uncertainty time.Duration
}

func measureClockOffset(t *testing.T, db *pgxpool.Pool) clockOffset {
	t.Helper()
	best := clockOffset{Uncertainty: time.Hour}
	for range 30 {
		t0 := time.Now()
		var dbNow time.Time
		if err := db.QueryRow(context.Background(), "select clock_timestamp()").Scan(&dbNow); err != nil {
			t.Fatalf("measure the clock offset: %v", err)
		}
		rtt := time.Since(t0)
		if rtt/2 < best.Uncertainty {
			best = clockOffset{Offset: dbNow.Sub(t0.Add(rtt / 2).Round(0)), Uncertainty: rtt / 2}
		}
	}
	return best
}

// toDB converts a time read on this process's clock to the database clock.
func (o clockOffset) toDB(local time.Time) time.Time { return local.Round(0).Add(o.Offset) }

// delivery is one webhook request, as the receiver understood it.
type delivery struct {
	Table     string // job_runs or outbox
	ItemID    int64  // job runs (from Idempotency-Key)
	MessageID string // outbox (Workq-Message-Id)
	Attempt   int
	Key       string // Workq-Partition-Key
	Body      map[string]any
}

func (d delivery) String() string {
	if d.Table == "outbox" {
		return fmt.Sprintf("outbox message %s attempt %d", d.MessageID, d.Attempt)
	}
	return fmt.Sprintf("job run %d attempt %d", d.ItemID, d.Attempt)
}

// reaction is what the receiver does with one request: wait Delay (or, with
// Hold, until the worker drops the request), then answer Status (200 when
// 0). Before runs first.
type reaction struct {
	Delay  time.Duration
	Hold   bool
	Status int
	Before func()
}

// handlerEvent is one request from arrival to its end, on the receiver's
// clock.
type handlerEvent struct {
	delivery
	Start, End time.Time
	Outcome    string // ok, error (answered non-2xx), cancelled (the worker dropped it), rejected (bad request)
}

// receiver is the webhook endpoint every handler of a scenario calls: job
// runs of kind webhook POST to /jobs, the outbox relay's webhook publisher
// to /outbox (signed; verified here).
type receiver struct {
	t      *testing.T
	srv    *http.Server
	addr   string
	secret string
	react  func(delivery) reaction

	mu       sync.Mutex
	events   []handlerEvent
	inFlight int
	maxIn    int
	open     map[*delivery]time.Time // open requests and when their answer is due
}

// fewMillis is the default reaction: answer 200 after 2-8ms, so that
// handlers are in flight long enough to be killed in.
func fewMillis(delivery) reaction {
	return reaction{Delay: time.Duration(2000+rand.IntN(6000)) * time.Microsecond}
}

// startReceiver serves on a loopback port until the test ends.
func startReceiver(t *testing.T, react func(delivery) reaction) *receiver {
	t.Helper()
	if react == nil {
		react = fewMillis
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &receiver{t: t, addr: ln.Addr().String(), secret: "fault-suite-secret", react: react}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); _ = r.srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = r.srv.Shutdown(ctx)
		_ = r.srv.Close()
		<-done
	})
	return r
}

// jobsURL is the URL job payloads name; outboxURL the relay's topic URL.
func (r *receiver) jobsURL() string   { return "http://" + r.addr + "/jobs" }
func (r *receiver) outboxURL() string { return "http://" + r.addr + "/outbox" }

// workerArgs are the flags that let a worker call the receiver: the
// webhook allow-list and the outbox relay's topic.
func (r *receiver) workerArgs(topic string) []string {
	return []string{"--webhook-allow", r.addr, "--outbox-webhook", topic + "=" + r.outboxURL(), "--outbox-webhook-secret", r.secret}
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	start := time.Now()
	body, err := io.ReadAll(req.Body)
	d := delivery{}
	bad := func(why string) {
		r.record(handlerEvent{delivery: d, Start: start, End: time.Now(), Outcome: "rejected"})
		r.t.Errorf("receiver: %s %s: %s", req.Method, req.URL.Path, why)
		http.Error(w, why, http.StatusBadRequest)
	}
	if err != nil {
		bad(err.Error())
		return
	}
	switch req.URL.Path {
	case "/jobs":
		d.Table = "job_runs"
		// job_runs-<id>-<created_at µs> (builtin.IdempotencyKey)
		key := req.Header.Get("Idempotency-Key")
		rest, ok := strings.CutPrefix(key, "job_runs-")
		id, _, ok2 := strings.Cut(rest, "-")
		if d.ItemID, err = strconv.ParseInt(id, 10, 64); !ok || !ok2 || err != nil {
			bad("Idempotency-Key " + key)
			return
		}
		d.Attempt, err = strconv.Atoi(req.Header.Get("X-Workq-Attempt"))
	case "/outbox":
		d.Table = "outbox"
		if verr := publish.VerifyWebhook(r.secret, req.Header, body, 0, time.Now()); verr != nil {
			bad(verr.Error())
			return
		}
		d.MessageID = req.Header.Get(publish.HeaderMessageID)
		d.Key = req.Header.Get(publish.HeaderPartitionKey)
		d.Attempt, err = strconv.Atoi(req.Header.Get(publish.HeaderAttempt))
	default:
		bad("unknown path")
		return
	}
	if err != nil || d.Attempt < 1 {
		bad("no attempt number")
		return
	}
	if len(body) > 0 && json.Unmarshal(body, &d.Body) != nil {
		bad("body is not a JSON object")
		return
	}
	re := r.react(d)
	wait := re.Delay
	if re.Hold {
		wait = 2 * time.Minute // the worker drops it long before
	}
	r.mu.Lock()
	r.inFlight++
	r.maxIn = max(r.maxIn, r.inFlight)
	if r.open == nil {
		r.open = map[*delivery]time.Time{}
	}
	r.open[&d] = time.Now().Add(wait)
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.inFlight--
		delete(r.open, &d)
		r.mu.Unlock()
	}()

	if re.Before != nil {
		re.Before()
	}
	outcome := "ok"
	timer := time.NewTimer(wait)
	select {
	case <-timer.C:
	case <-req.Context().Done():
		outcome = "cancelled"
	}
	timer.Stop()
	status := re.Status
	if status == 0 {
		status = http.StatusOK
	}
	if outcome == "ok" && status >= 300 {
		outcome = "error"
	}
	// Recorded before the answer goes out: a worker can only act on the
	// answer after the end is on record.
	r.record(handlerEvent{delivery: d, Start: start, End: time.Now(), Outcome: outcome})
	if outcome != "cancelled" {
		w.WriteHeader(status)
	}
}

func (r *receiver) record(e handlerEvent) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// snapshot returns the events so far.
func (r *receiver) snapshot() []handlerEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]handlerEvent(nil), r.events...)
}

// openFor returns a request that is open and will stay open for at least
// d more (ok false: none).
func (r *receiver) openFor(d time.Duration) (delivery, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for o, due := range r.open {
		if time.Until(due) >= d {
			return *o, true
		}
	}
	return delivery{}, false
}

// openWhere counts the open requests that match.
func (r *receiver) openWhere(match func(delivery) bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for d := range r.open {
		if match(*d) {
			n++
		}
	}
	return n
}

// countWhere counts the ended requests that match.
func (r *receiver) countWhere(match func(handlerEvent) bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if match(e) {
			n++
		}
	}
	return n
}

// inFlightNow is how many requests are open.
func (r *receiver) inFlightNow() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inFlight
}

// count returns how many requests ended with outcome (any when empty).
func (r *receiver) count(outcome string) int {
	return r.countWhere(func(e handlerEvent) bool { return outcome == "" || e.Outcome == outcome })
}

// store writes the events to fault_handler on the database clock.
func (r *receiver) store(t *testing.T, db *pgxpool.Pool, off clockOffset) {
	t.Helper()
	events := r.snapshot()
	rows := make([][]any, len(events))
	for i, e := range events {
		var item, msg, key any
		if e.ItemID != 0 {
			item = e.ItemID
		}
		if e.MessageID != "" {
			msg = e.MessageID
		}
		if e.Key != "" {
			key = e.Key
		}
		rows[i] = []any{e.Table, item, msg, e.Attempt, key, off.toDB(e.Start), off.toDB(e.End), e.Outcome}
	}
	if _, err := db.Exec(context.Background(), "truncate fault_handler"); err != nil {
		t.Fatal(err)
	}
	_, err := db.CopyFrom(context.Background(), pgx.Identifier{"fault_handler"},
		[]string{"tbl", "item_id", "message_id", "attempt", "partition_key", "started_at", "ended_at", "outcome"}, pgx.CopyFromRows(rows))
	if err != nil {
		t.Fatalf("store the receiver's %d events: %v", len(rows), err)
	}
}

// The checker's model, built from the database after a scenario.

type histEvent struct {
	Seq          int64
	At           time.Time // clock_timestamp() in the trigger
	StmtAt       time.Time // now() of the statement's transaction
	Table        string
	ItemID       int64
	Queue        string
	Event        string
	OldStatus    int16
	NewStatus    int16
	LeaseVersion int64
	Attempts     int32
	MaxAttempts  int32
	Token        *string
	LockedUntil  *time.Time
	RunAt        time.Time
	ClaimedBy    *string
	PartitionKey *string
	App          string
}

type runRow struct {
	Table        string
	ItemID       int64
	Attempt      int32
	LeaseVersion int64
	Token        string
	WorkerID     string
	Finished     time.Time
	Outcome      string
	Error        *string
}

type handlerRow struct {
	Table   string
	ItemID  int64
	Attempt int32
	Key     *string
	Start   time.Time
	End     time.Time
	Outcome string
}

type itemRow struct {
	Table       string
	ID          int64
	Queue       string
	Status      int16
	Attempts    int32
	MaxAttempts int32
	Key         *string // the outbox's partition key; a job run's limit key
	KeySeq      int64   // the outbox's order within a partition key
}

// leaseSpan is one lease: from its claim to its end, extended by
// heartbeats; valid until the earlier of its end and its expiry.
type leaseSpan struct {
	Version  int64
	Attempt  int32
	Token    string
	By       string
	App      string
	Claim    time.Time
	Expiry   time.Time  // the last locked_until a claim or heartbeat set
	End      *time.Time // the completion or reap that ended it
	EndStmt  time.Time  // that statement's now()
	Status   int16      // the row's status after the end
	Outcome  string     // from the run archive
	RunAt    time.Time  // the row's run_at after the end (when it is due again)
	Beats    int
	Events   []histEvent
	Handlers []handlerRow
}

// ExpiryAt is the lease's expiry as the database had it at t: the
// locked_until of the last claim or heartbeat before t. (A heartbeat that
// reaches the database after the worker gave up on it, held in a cut
// network, still extends the lease, though its worker no longer counts on
// it; a handler must stop within the lease it knew of.)
func (l *leaseSpan) ExpiryAt(t time.Time) time.Time {
	exp := l.Claim
	for _, e := range l.Events {
		if (e.Event == "claim" || e.Event == "heartbeat") && !e.At.After(t) {
			exp = *e.LockedUntil
		}
	}
	return exp
}

// ValidEnd is when the lease stopped being valid.
func (l *leaseSpan) ValidEnd() time.Time {
	if l.End != nil && l.End.Before(l.Expiry) {
		return *l.End
	}
	return l.Expiry
}

type itemKey struct {
	Table string
	ID    int64
}

func (k itemKey) String() string { return fmt.Sprintf("%s %d", k.Table, k.ID) }

// itemHistory is everything known about one item.
type itemHistory struct {
	itemRow
	Events   []histEvent
	Runs     []runRow
	Handlers []handlerRow
	Leases   []*leaseSpan
	// Pending: a workflow task's moves out of pending (status -1), on
	// release (to ready) or cancel by a dependency (events release and
	// depcancel).
	Pending []histEvent
}

// history is a scenario's whole record.
type history struct {
	Items      map[itemKey]*itemHistory
	Statements []statementRow
	Offset     clockOffset
}

type statementRow struct {
	At        time.Time
	Table     string
	Statement string
	Rows      int64
	App       string
}

// historyOpts say what a scenario expects besides the invariants.
type historyOpts struct {
	AllDone bool           // every item ended done
	Limits  map[string]int // "table/queue" -> W: at most W valid leases and W handlers at any instant
	// Rates: "table/queue" -> a rate rule its starts keep in every
	// sliding window (history_flow_test.go).
	Rates map[string]flowRate
	// KeyConcurrency: "job_runs/queue" -> at most n items of each limit
	// key in progress and at the receiver at once.
	KeyConcurrency map[string]int
}

// collectRows runs sql and hands each row, scanned by position into a T,
// to each.
func collectRows[T any](t *testing.T, db *pgxpool.Pool, sql string, each func(T)) {
	t.Helper()
	rows, err := db.Query(context.Background(), sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[T])
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	for _, r := range got {
		each(r)
	}
}

// loadHistory reads the scenario's record from db. The receiver's events
// are stored first.
func loadHistory(t *testing.T, db *pgxpool.Pool, rc *receiver, off clockOffset) *history {
	t.Helper()
	rc.store(t, db, off)
	h := &history{Items: map[itemKey]*itemHistory{}, Offset: off}
	item := func(tbl string, id int64) *itemHistory {
		k := itemKey{tbl, id}
		it := h.Items[k]
		if it == nil {
			it = &itemHistory{itemRow: itemRow{Table: tbl, ID: id, Status: -1}}
			h.Items[k] = it
		}
		return it
	}
	collectRows(t, db, `select 'job_runs', id, queue, status, attempts, max_attempts, limit_key, 0::bigint from workq.job_runs_all
		union all select 'outbox', id, queue, status, attempts, max_attempts, partition_key, coalesce(key_seq, 0) from workq.outbox`,
		func(r itemRow) { item(r.Table, r.ID).itemRow = r })
	collectRows(t, db, `select seq, at, stmt_at, tbl, item_id, queue, event, old_status, new_status, lease_version, attempts, max_attempts,
			token, locked_until, run_at, claimed_by, partition_key, app from fault_history order by at, seq`,
		func(e histEvent) { it := item(e.Table, e.ItemID); it.Events = append(it.Events, e) })
	// runs_all: a done job run that moved is its last attempt, with no
	// token (its lease version names the claim); checkLeases matches it by
	// version.
	collectRows(t, db, `select work_table, item_id, attempt, lease_version, coalesce(owner_token::text, ''), worker_id, finished_at, outcome, error
			from workq.runs_all where work_table in ('job_runs', 'outbox') order by finished_at, lease_version`,
		func(r runRow) { it := item(r.Table, r.ItemID); it.Runs = append(it.Runs, r) })
	collectRows(t, db, `select h.tbl, coalesce(h.item_id, o.id, -1), h.attempt, h.partition_key, h.started_at, h.ended_at, h.outcome
			from fault_handler h left join workq.outbox o on o.message_id = h.message_id order by h.started_at`,
		func(r handlerRow) { it := item(r.Table, r.ItemID); it.Handlers = append(it.Handlers, r) })
	collectRows(t, db, `select at, tbl, statement, rows, app from fault_statements order by at`,
		func(r statementRow) { h.Statements = append(h.Statements, r) })
	return h
}

// violation is one broken rule, about one item (or a key or queue).
type violation struct {
	item *itemHistory // nil for a rule about several items
	what string
}

// check rebuilds every lease and runs every rule; a failing rule fails t
// and prints the offending items' histories.
func (h *history) check(t *testing.T, o historyOpts) {
	t.Helper()
	vs := h.violations(o)
	if len(vs) == 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "history check: %d violations\n", len(vs))
	shown := map[*itemHistory]bool{}
	for i, v := range vs {
		if i == 30 {
			fmt.Fprintf(&b, "... and %d more\n", len(vs)-i)
			break
		}
		if v.item != nil {
			fmt.Fprintf(&b, "- %s: %s\n", itemKey{v.item.Table, v.item.ID}, v.what)
		} else {
			fmt.Fprintf(&b, "- %s\n", v.what)
		}
	}
	b.WriteString("offending histories (database clock):\n")
	n := 0
	for _, v := range vs {
		if v.item == nil || shown[v.item] || n == 10 {
			continue
		}
		shown[v.item] = true
		n++
		b.WriteString(v.item.format())
	}
	t.Error(b.String())
}

// violations rebuilds every lease and returns every broken rule.
func (h *history) violations(o historyOpts) []violation {
	var vs []violation
	add := func(it *itemHistory, format string, args ...any) {
		vs = append(vs, violation{it, fmt.Sprintf(format, args...)})
	}
	eps := h.Offset.Uncertainty
	keys := make([]itemKey, 0, len(h.Items))
	for k := range h.Items {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].Table < keys[j].Table || keys[i].Table == keys[j].Table && keys[i].ID < keys[j].ID
	})
	for _, k := range keys {
		it := h.Items[k]
		if it.Status < 0 {
			add(it, "events or handler runs for an item that is not in the table")
			continue
		}
		it.Leases, it.Pending = nil, nil
		h.checkLeases(it, add)
		h.checkItem(it, o, eps, add)
	}
	h.checkKeys(keys, eps, add)
	for qk, w := range o.Limits {
		h.checkLimit(qk, w, eps, add)
	}
	for qk, r := range o.Rates {
		h.checkRate(qk, r, add)
	}
	for qk, n := range o.KeyConcurrency {
		h.checkKeyConcurrency(qk, n, eps, add)
	}
	return vs
}

// checkLeases rebuilds the item's leases from its events: a claim opens one
// (only after the previous one stopped being valid), a heartbeat extends
// the open lease of its token (never one that had expired), an end closes
// it (a reap only once it expired) with the one run archived for it.
func (h *history) checkLeases(it *itemHistory, add func(*itemHistory, string, ...any)) {
	var open *leaseSpan
	runs := map[string]runRow{} // by lease version and token
	for _, r := range it.Runs {
		runs[fmt.Sprint(r.LeaseVersion, r.Token)] = r
	}
	used := map[string]bool{}
	for _, e := range it.Events {
		if e.Attempts > e.MaxAttempts {
			add(it, "attempts %d over max %d at %s", e.Attempts, e.MaxAttempts, ts(e.At))
		}
		switch e.Event {
		case "claim":
			if open != nil {
				add(it, "claimed at %s while lease v%d was not ended", ts(e.At), open.Version)
			}
			if n := len(it.Leases); n > 0 {
				if prev := it.Leases[n-1]; e.At.Before(prev.ValidEnd()) {
					add(it, "claimed (v%d, %s) at %s while lease v%d of %s was valid until %s: two holders at once",
						e.LeaseVersion, str(e.ClaimedBy), ts(e.At), prev.Version, prev.By, ts(prev.ValidEnd()))
				}
			}
			if e.Token == nil || e.LockedUntil == nil {
				add(it, "claim at %s without a token or lease end", ts(e.At))
				continue
			}
			open = &leaseSpan{Version: e.LeaseVersion, Attempt: e.Attempts, Token: *e.Token, By: str(e.ClaimedBy), App: e.App,
				Claim: e.At, Expiry: *e.LockedUntil, Events: []histEvent{e}}
			it.Leases = append(it.Leases, open)
		case "heartbeat":
			if open == nil || e.Token == nil || *e.Token != open.Token {
				add(it, "heartbeat at %s of a lease that is not the open one", ts(e.At))
				continue
			}
			if !open.Expiry.After(e.StmtAt) {
				add(it, "heartbeat at %s (statement from %s) extended lease v%d, which had expired at %s",
					ts(e.At), ts(e.StmtAt), open.Version, ts(open.Expiry))
			}
			open.Expiry = *e.LockedUntil
			open.Beats++
			open.Events = append(open.Events, e)
		case "end":
			if open == nil || e.Token == nil || *e.Token != open.Token {
				add(it, "end at %s of a lease that is not the open one", ts(e.At))
				continue
			}
			at := e.At
			open.End, open.EndStmt, open.Status, open.RunAt = &at, e.StmtAt, e.NewStatus, e.RunAt
			open.Events = append(open.Events, e)
			k := fmt.Sprint(open.Version, open.Token)
			r, ok := runs[k]
			if moved := fmt.Sprint(open.Version, ""); !ok && runs[moved].Outcome == "done" {
				// a done row that moved: its lease version names the claim
				k, r, ok = moved, runs[moved], true
			}
			if !ok {
				add(it, "lease v%d ended at %s without a run archived", open.Version, ts(at))
			}
			used[k] = true
			open.Outcome = r.Outcome
			if r.Outcome == "expired" && open.Expiry.After(e.StmtAt) {
				add(it, "lease v%d reaped by a statement from %s, before it expired at %s", open.Version, ts(e.StmtAt), ts(open.Expiry))
			}
			open = nil
		case "release", "depcancel":
			if open != nil {
				add(it, "%s at %s while lease v%d was open", e.Event, ts(e.At), open.Version)
			}
			it.Pending = append(it.Pending, e)
		default:
			add(it, "unexpected %s event at %s (status %d -> %d)", e.Event, ts(e.At), e.OldStatus, e.NewStatus)
		}
	}
	for _, r := range it.Runs {
		if !used[fmt.Sprint(r.LeaseVersion, r.Token)] {
			add(it, "run archived (attempt %d, %s by %s) for no lease end on record", r.Attempt, r.Outcome, r.WorkerID)
		}
	}
}

// checkItem: one terminal state, attempts within max, done only after its
// handler finished, and every handler run inside its own lease.
func (h *history) checkItem(it *itemHistory, o historyOpts, eps time.Duration, add func(*itemHistory, string, ...any)) {
	terminal, counted := 0, int32(0)
	for _, l := range it.Leases {
		if l.End != nil && l.Status >= 2 {
			terminal++
		}
		switch l.Outcome {
		case "done", "retry", "failed", "expired":
			counted++
		}
	}
	for _, e := range it.Pending {
		if e.Event == "depcancel" {
			terminal++
		}
	}
	for _, e := range it.Events {
		if e.OldStatus >= 2 {
			add(it, "left its terminal state %d at %s (%s)", e.OldStatus, ts(e.At), e.Event)
		}
	}
	if terminal > 1 {
		add(it, "%d terminal ends", terminal)
	}
	if counted > it.MaxAttempts {
		add(it, "%d attempts used, max %d", counted, it.MaxAttempts)
	}
	if it.Attempts > it.MaxAttempts {
		add(it, "attempts %d over max %d", it.Attempts, it.MaxAttempts)
	}
	if o.AllDone && it.Status != 2 {
		add(it, "status %d at the end, want done", it.Status)
	}
	if it.Status >= 2 && terminal != 1 {
		add(it, "status %d but %d terminal ends on record", it.Status, terminal)
	}
	// Each handler run belongs to the latest lease of its attempt claimed
	// before it started, and ends while that lease is valid.
	for _, hr := range it.Handlers {
		var l *leaseSpan
		for _, c := range it.Leases {
			if c.Attempt == hr.Attempt && !c.Claim.After(hr.Start.Add(eps)) {
				l = c
			}
		}
		if l == nil {
			add(it, "handler run of attempt %d (%s-%s) without a lease claimed before it", hr.Attempt, ts(hr.Start), ts(hr.End))
			continue
		}
		l.Handlers = append(l.Handlers, hr)
		end := hr.End.Add(-eps)
		if exp := l.ExpiryAt(end); !end.Before(exp) || l.End != nil && end.After(*l.End) {
			add(it, "handler run of attempt %d ended (%s) at %s, after its lease v%d stopped being valid (expiry then %s, ended %s)",
				hr.Attempt, hr.Outcome, ts(hr.End), l.Version, ts(exp), tsp(l.End))
		}
	}
	for _, l := range it.Leases {
		if l.Outcome != "done" {
			continue
		}
		finished := false
		for _, hr := range l.Handlers {
			finished = finished || hr.Outcome == "ok" && !hr.End.Add(-eps).After(*l.End)
		}
		if !finished {
			add(it, "done (lease v%d, attempt %d, by %s) at %s without a handler run of that attempt that finished before",
				l.Version, l.Attempt, l.By, ts(*l.End))
		}
	}
}

// checkKeys: a partition key has at most one message in flight at any
// instant (in the database and at the receiver), and its messages are
// first claimed in write order, each after the one before it was done.
func (h *history) checkKeys(keys []itemKey, eps time.Duration, add func(*itemHistory, string, ...any)) {
	byKey := map[string][]*itemHistory{}
	for _, k := range keys {
		if it := h.Items[k]; it.Table == "outbox" && it.Key != nil {
			qk := it.Queue + "/" + *it.Key
			byKey[qk] = append(byKey[qk], it)
		}
	}
	for qk, items := range byKey {
		// In progress: from the claim to the end (not the expiry: the row is
		// in flight until a completion or reap ends it).
		leases, handlers := spansOf(items, eps, func(l *leaseSpan) time.Time {
			if l.End != nil {
				return *l.End
			}
			return time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
		})
		for _, c := range []struct {
			what  string
			spans []span
		}{{"in progress", leases}, {"at the receiver", handlers}} {
			sort.Slice(c.spans, func(i, j int) bool { return c.spans[i].start.Before(c.spans[j].start) })
			for i, s := range c.spans {
				for _, p := range c.spans[:i] {
					if p.it != s.it && s.start.Before(p.end) {
						add(s.it, "key %s: %s at %s while %s %d was until %s", qk, c.what, ts(s.start), p.it.Table, p.it.ID, ts(p.end))
					}
				}
			}
		}
		sort.Slice(items, func(i, j int) bool {
			return items[i].KeySeq < items[j].KeySeq || items[i].KeySeq == items[j].KeySeq && items[i].ID < items[j].ID
		})
		for i := 1; i < len(items); i++ {
			prev, cur := items[i-1], items[i]
			var done *time.Time
			for _, l := range prev.Leases {
				if l.Outcome == "done" {
					done = l.End
				}
			}
			if len(cur.Leases) > 0 && (done == nil || cur.Leases[0].Claim.Before(*done)) {
				add(cur, "key %s: first claimed at %s before message %d before it in write order was done (%v)",
					qk, ts(cur.Leases[0].Claim), prev.ID, done)
			}
		}
	}
}

// span is one item's lease or handler run, from start to end.
type span struct {
	it         *itemHistory
	start, end time.Time
}

// spansOf returns the items' leases (from the claim to leaseEnd) and
// handler runs (shortened by the clock offset's uncertainty eps).
func spansOf(items []*itemHistory, eps time.Duration, leaseEnd func(*leaseSpan) time.Time) (leases, handlers []span) {
	for _, it := range items {
		for _, l := range it.Leases {
			leases = append(leases, span{it, l.Claim, leaseEnd(l)})
		}
		for _, hr := range it.Handlers {
			handlers = append(handlers, span{it, hr.Start, hr.End.Add(-eps)})
		}
	}
	return leases, handlers
}

// checkLimit: at every claim of the queue at most w leases are valid, and
// at every handler start at most w handlers of the queue run.
func (h *history) checkLimit(qk string, w int, eps time.Duration, add func(*itemHistory, string, ...any)) {
	table, queue, _ := strings.Cut(qk, "/")
	var items []*itemHistory
	for _, it := range h.Items {
		if it.Table == table && it.Queue == queue {
			items = append(items, it)
		}
	}
	leases, handlers := spansOf(items, eps, (*leaseSpan).ValidEnd)
	for _, c := range []struct {
		what  string
		spans []span
	}{{"valid leases", leases}, {"handlers running", handlers}} {
		worst := 0
		for _, s := range c.spans {
			n := 0
			for _, o := range c.spans {
				if !o.start.After(s.start) && o.end.After(s.start) {
					n++
				}
			}
			if n > w && n > worst {
				worst = n
				add(s.it, "%s: %d %s at %s, limit %d", qk, n, c.what, ts(s.start), w)
			}
		}
	}
}

// format prints an item's whole history, oldest first.
func (it *itemHistory) format() string {
	type line struct {
		at   time.Time
		text string
	}
	var ls []line
	for _, e := range it.Events {
		ls = append(ls, line{e.At, fmt.Sprintf("%-9s v%d attempt %d/%d status %d->%d by %s (%s) token %s until %s (statement %s)",
			e.Event, e.LeaseVersion, e.Attempts, e.MaxAttempts, e.OldStatus, e.NewStatus, str(e.ClaimedBy), e.App,
			short(e.Token), tsp(e.LockedUntil), ts(e.StmtAt))})
	}
	for _, r := range it.Runs {
		ls = append(ls, line{r.Finished, fmt.Sprintf("run       v%d attempt %d %s by %s token %s: %s",
			r.LeaseVersion, r.Attempt, r.Outcome, r.WorkerID, short(&r.Token), str(r.Error))})
	}
	for _, hr := range it.Handlers {
		ls = append(ls, line{hr.Start, fmt.Sprintf("handler   attempt %d %s, ended %s", hr.Attempt, hr.Outcome, ts(hr.End))})
	}
	sort.SliceStable(ls, func(i, j int) bool { return ls[i].at.Before(ls[j].at) })
	var b strings.Builder
	key := ""
	if it.Key != nil {
		key = " key " + *it.Key
	}
	fmt.Fprintf(&b, "%s %d (queue %s%s, status %d, attempts %d/%d):\n", it.Table, it.ID, it.Queue, key, it.Status, it.Attempts, it.MaxAttempts)
	for _, l := range ls {
		fmt.Fprintf(&b, "  %s %s\n", ts(l.at), l.text)
	}
	return b.String()
}

func ts(t time.Time) string { return t.UTC().Format("15:04:05.000000") }

func tsp(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return ts(*t)
}

func short(s *string) string {
	if s == nil || len(*s) < 8 {
		return str(s)
	}
	return (*s)[:8]
}

// answeredReruns returns the items with a handler run that started after
// an earlier run of the same item had been answered (ok): work that was
// finished and done again, because its completion never reached the
// database before its lease ended.
func (h *history) answeredReruns() []*itemHistory {
	var out []*itemHistory
	for _, it := range h.Items {
		for i, hr := range it.Handlers {
			if hr.Outcome == "ok" && slices.ContainsFunc(it.Handlers[i+1:], func(later handlerRow) bool { return later.Start.After(hr.End) }) {
				out = append(out, it)
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Table < out[j].Table || out[i].Table == out[j].Table && out[i].ID < out[j].ID
	})
	return out
}

// summary counts what a scenario did, for its log and docs/reliability.md.
type historySummary struct {
	Items, Leases, Heartbeats, Handlers int
	Outcomes                            map[string]int
	Duplicates                          int // handler runs beyond one per item
}

func (h *history) summary() historySummary {
	s := historySummary{Outcomes: map[string]int{}}
	for _, it := range h.Items {
		s.Items++
		s.Leases += len(it.Leases)
		s.Handlers += len(it.Handlers)
		if len(it.Handlers) > 1 {
			s.Duplicates += len(it.Handlers) - 1
		}
		for _, l := range it.Leases {
			s.Heartbeats += l.Beats
			s.Outcomes[l.Outcome]++
		}
	}
	return s
}

func (s historySummary) String() string {
	return fmt.Sprintf("%d items, %d leases (%v), %d heartbeats, %d handler runs (%d beyond one per item)",
		s.Items, s.Leases, s.Outcomes, s.Heartbeats, s.Handlers, s.Duplicates)
}
