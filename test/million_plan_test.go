package test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/testdb"
)

// The hot statements at a million ready rows per work table (issue 21):
// TestGenericPlanCosts keeps every one's generic plan below the server's
// jit_above_cost, TestClaimsAtAMillionRows keeps every claim an index scan
// that reads about its batch, not the backlog. Both run on the same data,
// built once per test process (millionData).

const (
	millionRows  = 1_000_000
	millionKeys  = 100_000 // the keyed outbox: ten messages per key
	millionQueue = "big"
	// Rows in progress besides the ready ones (leases held in the same
	// queue), so that the in-progress indexes are not empty.
	millionHeld = 10_000
	// flowKeys is the number of limit keys of the flow data.
	flowKeys = 10_000
)

// millionDB is one database of the million-row data.
type millionDB struct {
	name string // "unkeyed" or "keyed"
	url  string
}

var million struct {
	once  sync.Once
	dbs   []millionDB
	took  time.Duration
	steps []string // how long each table took
	err   error
}

// millionData returns the two databases of the million-row data, building
// them on the first call of the test process:
//
//   - "unkeyed": job_runs, outbox, inbox and timers with a million ready
//     rows each in queue big (the outbox's without partition keys, so its
//     statistics see no keyed rows: the case whose generic claim was once
//     estimated above jit_above_cost), and 10,000 rows in progress each;
//   - "keyed": the outbox with a million ready messages over 100,000
//     partition keys, every tenth key's head in flight;
//   - "flowkeys": job runs with a million ready rows over 10,000 limit
//     keys in a fair queue with a rule per key (flow_plan_test.go).
//
// Each table is written by one INSERT ... SELECT from generate_series, all
// of them at once on their own connections, then vacuumed and analyzed.
// The databases are on the package's own throwaway cluster
// (testdb.MainOwnCluster) and go with it.
func millionData(t *testing.T) []millionDB {
	t.Helper()
	built := false
	million.once.Do(func() {
		start := time.Now()
		million.dbs, million.steps, million.err = buildMillion()
		million.took, built = time.Since(start), true
	})
	if million.err != nil {
		t.Fatalf("build the million-row data: %v", million.err)
	}
	if built {
		t.Logf("million-row data built in %s (once per test process; at once: %s)",
			million.took.Round(100*time.Millisecond), strings.Join(million.steps, "; "))
	}
	return million.dbs
}

func buildMillion() ([]millionDB, []string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var dbs []millionDB
	for _, name := range []string{"unkeyed", "keyed", "flowkeys"} {
		url, _, err := testdb.NewDatabase() // dropped with the cluster
		if err != nil {
			return nil, nil, err
		}
		dbs = append(dbs, millionDB{name: name, url: url})
	}
	// Sequential keys (ids, message ids, partition keys in index order)
	// append to their indexes instead of inserting at random places: the
	// fill is about a third faster. Every ready row is due (run_at up to 17
	// minutes ago).
	held := fmt.Sprintf("i > %d", millionRows)
	lease := func(cond string) string {
		return fmt.Sprintf(`case when %[1]s then 1 else 0 end::smallint,
       case when %[1]s then md5('o' || i)::uuid end,
       case when %[1]s then now() + interval '5 minutes' end,
       case when %[1]s then now() end, case when %[1]s then 'w' end,
       case when %[1]s then 1 else 0 end, case when %[1]s then 1 else 0 end`, cond)
	}
	leaseCols := "status, owner_token, locked_until, claimed_at, claimed_by, attempts, lease_version"
	due := "now() - interval '20 minutes' + i * interval '1 millisecond'"
	fills := []struct {
		db     int
		tables []string // vacuumed and analyzed after the statements
		sql    []string
	}{
		{0, []string{"job_runs"}, []string{fmt.Sprintf(`
insert into workq.job_runs (queue, kind, priority, run_at, %s)
select '%s', 'k', (i %% 3)::smallint, %s, %s
from generate_series(1, %d) i`, leaseCols, millionQueue, due, lease(held), millionRows+millionHeld)}},
		{0, []string{"outbox"}, []string{fmt.Sprintf(`
insert into workq.outbox (queue, topic, message_id, priority, run_at, %s)
select '%s', 't', lpad(to_hex(i), 32, '0')::uuid, (i %% 3)::smallint, %s, %s
from generate_series(1, %d) i`, leaseCols, millionQueue, due, lease(held), millionRows+millionHeld)}},
		{0, []string{"inbox"}, []string{fmt.Sprintf(`
insert into workq.inbox (queue, source, message_id, payload_hash, run_at, %s)
select '%s', 's', lpad(i::text, 8, '0'), '\x00'::bytea, %s, %s
from generate_series(1, %d) i`, leaseCols, millionQueue, due, lease(held), millionRows+millionHeld)}},
		{0, []string{"timers"}, []string{fmt.Sprintf(`
insert into workq.timers (queue, topic, due_time, run_at, %s)
select '%s', 't', %[3]s, %[3]s, %s
from generate_series(1, %d) i`, leaseCols, millionQueue, due, lease(held), millionRows+millionHeld)}},
		// Key k's messages are rows 10k..10k+9, key_seq 1..10; the heads
		// (key_seq 1) of keys 0, 10, 20, ... are in flight.
		{1, []string{"outbox", "outbox_key_seqs"}, []string{fmt.Sprintf(`
insert into workq.outbox (queue, topic, partition_key, key_seq, message_id, run_at, %s)
select '%s', 't', 'key-' || lpad((i / 10)::text, 6, '0'), i %% 10 + 1, lpad(to_hex(i + 1), 32, '0')::uuid, %s, %s
from generate_series(0, %d) i`, leaseCols, millionQueue, due, lease("i % 100 = 0"), millionRows-1), fmt.Sprintf(`
insert into workq.outbox_key_seqs (queue, partition_key, last_seq)
select '%s', 'key-' || lpad(k::text, 6, '0'), %d from generate_series(0, %d) k`, millionQueue, millionRows/millionKeys, millionKeys-1)}},
		// Job runs over 10,000 limit keys (a hundred each, keys
		// interleaved in claim order), 100 of the keys with one in
		// progress, in a fair queue with a rule per key: the flow claim's
		// data (flow_plan_test.go).
		{2, []string{"job_runs"}, []string{fmt.Sprintf(`
insert into workq.job_runs (queue, kind, priority, run_at, limit_key, %s)
select '%s', 'k', 0::smallint, %s, 'key-' || lpad((i %% %d)::text, 5, '0'), %s
from generate_series(1, %d) i`, leaseCols, millionQueue, due, flowKeys, lease(fmt.Sprintf("i > %d", millionRows)), millionRows+flowKeys/100), fmt.Sprintf(`
insert into workq.flow_queues (work_table, queue, fair) values ('job_runs', '%[1]s', true);
insert into workq.flow_limits (work_table, queue, per_key, rate, concurrency) values ('job_runs', '%[1]s', true, 20, 5)`, millionQueue)}},
	}
	type result struct {
		step string
		err  error
	}
	results := make(chan result, len(fills))
	for _, f := range fills {
		go func() {
			start := time.Now()
			var filled time.Duration
			err := func() error {
				conn, err := pgx.Connect(ctx, dbs[f.db].url)
				if err != nil {
					return err
				}
				defer conn.Close(ctx)
				// One transaction per table, which also truncates it: on a
				// cluster with wal_level = minimal, rows written into a
				// relation file created in the same transaction skip the WAL.
				tx, err := conn.Begin(ctx)
				if err != nil {
					return err
				}
				defer tx.Rollback(ctx)
				for _, table := range f.tables {
					if _, err := tx.Exec(ctx, "truncate workq."+table); err != nil {
						return fmt.Errorf("%s: truncate %s: %w", dbs[f.db].name, table, err)
					}
				}
				for _, sql := range f.sql {
					if _, err := tx.Exec(ctx, sql); err != nil {
						return fmt.Errorf("%s: fill %s: %w\n%s", dbs[f.db].name, f.tables[0], err, sql)
					}
				}
				if err := tx.Commit(ctx); err != nil {
					return err
				}
				filled = time.Since(start)
				for _, table := range f.tables {
					if _, err := conn.Exec(ctx, "vacuum analyze workq."+table); err != nil {
						return fmt.Errorf("%s: vacuum analyze %s: %w", dbs[f.db].name, table, err)
					}
				}
				return nil
			}()
			results <- result{fmt.Sprintf("%s %s %s, vacuum analyze %s", dbs[f.db].name, f.tables[0],
				filled.Round(100*time.Millisecond), (time.Since(start) - filled).Round(100*time.Millisecond)), err}
		}()
	}
	var steps []string
	var first error
	for range fills {
		r := <-results
		steps = append(steps, r.step)
		if r.err != nil && first == nil {
			first = r.err
		}
	}
	return dbs, steps, first
}

// generic is the generic plan of a prepared statement: what a connection's
// plan cache keeps after five executions when it is not dearer than the
// custom plans, planned without the parameters' values.
type generic struct {
	cost float64 // estimated total cost
	text string  // EXPLAIN's text output, for failure messages
}

// explainGenericCost prepares sql on conn, forces a generic plan
// (plan_cache_mode, on this connection only and reset after) and returns
// its estimated total cost and text. The parameters are nulls: a generic
// plan does not depend on their values.
func explainGenericCost(t *testing.T, ctx context.Context, conn *pgx.Conn, sql string, nparams int) generic {
	t.Helper()
	name := "g_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	for _, s := range []string{"set plan_cache_mode = force_generic_plan", fmt.Sprintf("prepare %s as %s", name, sql)} {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%v\n%s", err, s)
		}
	}
	defer func() {
		_, _ = conn.Exec(ctx, "deallocate "+name)
		_, _ = conn.Exec(ctx, "reset plan_cache_mode")
	}()
	nulls := strings.TrimSuffix(strings.Repeat("null, ", nparams), ", ")
	execute := fmt.Sprintf("execute %s(%s)", name, nulls)
	if nparams == 0 {
		execute = "execute " + name
	}
	var raw []byte
	if err := conn.QueryRow(ctx, "explain (format json) "+execute).Scan(&raw); err != nil {
		t.Fatalf("explain %s: %v", execute, err)
	}
	var g generic
	g.cost = parsePlan(t, raw).TotalCost
	rows, err := conn.Query(ctx, "explain "+execute)
	if err != nil {
		t.Fatalf("explain %s: %v", execute, err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("explain %s: %v", execute, err)
	}
	g.text = strings.Join(lines, "\n")
	return g
}

// jitAboveCost is the server's jit_above_cost: a plan estimated at this or
// more is JIT-compiled when it runs (with jit on, the default).
func jitAboveCost(t *testing.T, ctx context.Context, conn *pgx.Conn) float64 {
	t.Helper()
	var limit float64
	if err := conn.QueryRow(ctx, "select current_setting('jit_above_cost')::float8").Scan(&limit); err != nil {
		t.Fatalf("read jit_above_cost: %v", err)
	}
	return limit
}

// hotStatement is one statement the runtime runs all the time: name, and
// its text as the application runs it.
type hotStatement struct {
	name   string
	sql    string
	params []string
}

// hotStatements lists the hot statements of every kind: the claims, the
// lease statements of every work table (heartbeat; complete, which is also
// ack, retry or abandon, fail, release and snooze, by its outcome argument;
// the reaper's requeue of expired leases), and the enqueues.
func hotStatements(t *testing.T) []hotStatement {
	t.Helper()
	var out []hotStatement
	add := func(file, name string) {
		sql, params := namedQuery(t, file, name)
		out = append(out, hotStatement{name, sql, params})
	}
	for _, name := range []string{"JobRunsClaim", "JobRunsClaimIDs", "JobRunsEnqueue", "JobRunsEnqueueMany", "JobRunsEnqueueManyPlain",
		"JobRunsEnqueueUnique", "JobRunsEnqueueManyUnique"} {
		add("job_runs", name)
	}
	// OutboxKeyHeads is the operator's list of partition keys (outboxrt.Keys),
	// not a hot statement, but it walks the keys as OutboxClaim does.
	for _, name := range []string{"OutboxClaim", "OutboxEnqueue", "OutboxEnqueueMany", "OutboxKeyHeads"} {
		add("outbox", name)
	}
	for _, name := range []string{"InboxClaim", "InboxClaimIDs", "InboxReceive"} {
		add("inbox", name)
	}
	for _, name := range []string{"TimersClaim", "TimersClaimIDs", "TimersSchedule", "TimersScheduleMany"} {
		add("timers", name)
	}
	// The flow claim's statements (a function call each; what they run
	// inside is in flow_plan_test.go).
	for _, name := range []string{"FlowPick", "FlowGrant", "FlowStarted", "FlowIsOn", "FlowWaitMs"} {
		add("flow", name)
	}
	for _, table := range []string{"job_runs", "outbox", "inbox", "timers"} {
		for _, name := range []string{"LeaseHeartbeat", "LeaseComplete", "LeaseReapExpired"} {
			sql, params := leaseQuery(t, table, name)
			out = append(out, hotStatement{name + " on " + table, sql, params})
		}
	}
	return out
}

// No hot statement's generic plan is estimated at jit_above_cost or more,
// at a million ready rows per table. A plan estimated above it is
// JIT-compiled on every execution, tens of milliseconds each time whatever
// the statement's real cost: a generic OutboxClaim estimated at 250,000
// (its walk over partition keys, on an outbox without keys) took about 50
// ms a claim, a third of the outbox's usual throughput (design.md 4.2b).
// pgx prepares every statement, and a prepared statement may switch to its
// generic plan after five executions.
func TestGenericPlanCosts(t *testing.T) {
	start := time.Now()
	dbs := millionData(t)
	stmts := hotStatements(t)
	for _, db := range dbs {
		t.Run(db.name, func(t *testing.T) {
			ctx := context.Background()
			conn := mustConnect(t, db.url)
			limit := jitAboveCost(t, ctx, conn)
			for _, s := range stmts {
				g := explainGenericCost(t, ctx, conn, s.sql, len(s.params))
				if g.cost >= limit {
					t.Errorf("%s: the generic plan is estimated at %.0f, at or above jit_above_cost (%.0f): PostgreSQL would JIT-compile it on every execution:\n%s",
						s.name, g.cost, limit, g.text)
				} else if testing.Verbose() {
					t.Logf("%-30s generic plan estimated at %8.0f (jit_above_cost %.0f)", s.name, g.cost, limit)
				}
			}
		})
	}
	t.Logf("took %s", time.Since(start).Round(100*time.Millisecond))
}

// millionClaim is one claim of TestClaimsAtAMillionRows.
type millionClaim struct {
	name, db, table, file, query string
	index                        string // the index the candidates are read from
	resume                       bool
}

// Every claim takes a batch of 1,000 from a million ready rows through its
// claim index, as a custom plan and as a generic one: no sequential scan of
// the work table, no sort, it reads a small multiple of the batch, not the
// backlog, and its estimate stays below jit_above_cost. The keyed outbox
// claim walks partition keys (outbox_ordered), passing over the keys in
// flight.
func TestClaimsAtAMillionRows(t *testing.T) {
	start := time.Now()
	dbs := millionData(t)
	urls := map[string]string{}
	for _, db := range dbs {
		urls[db.name] = db.url
	}
	const batch = 1000
	claims := []millionClaim{
		{name: "JobRunsClaim", db: "unkeyed", table: "job_runs", file: "job_runs", query: "JobRunsClaim", index: "job_runs_claim"},
		{name: "JobRunsClaim, resumed", db: "unkeyed", table: "job_runs", file: "job_runs", query: "JobRunsClaim", index: "job_runs_claim", resume: true},
		{name: "OutboxClaim, unkeyed", db: "unkeyed", table: "outbox", file: "outbox", query: "OutboxClaim", index: "outbox_claim"},
		{name: "OutboxClaim, keyed", db: "keyed", table: "outbox", file: "outbox", query: "OutboxClaim", index: "outbox_ordered"},
		{name: "InboxClaim", db: "unkeyed", table: "inbox", file: "inbox", query: "InboxClaim", index: "inbox_claim"},
		{name: "InboxClaim, resumed", db: "unkeyed", table: "inbox", file: "inbox", query: "InboxClaim", index: "inbox_claim", resume: true},
		{name: "TimersClaim", db: "unkeyed", table: "timers", file: "timers", query: "TimersClaim", index: "timers_claim"},
		{name: "TimersClaim, resumed", db: "unkeyed", table: "timers", file: "timers", query: "TimersClaim", index: "timers_claim", resume: true},
	}
	conns := map[string]*pgx.Conn{}
	for name, url := range urls {
		conns[name] = mustConnect(t, url)
	}
	ctx := context.Background()
	for _, c := range claims {
		t.Run(c.name, func(t *testing.T) {
			conn := conns[c.db]
			sql, params := namedQuery(t, c.file, c.query)
			// A resume point at the queue's first ready row reads the same
			// rows as a full claim, through the resumed range.
			resumeAt := time.Now().Add(-time.Hour)
			args := map[string]any{"queue": millionQueue, "max_rows": int32(batch), "lease_ms": int64(30_000), "worker_id": "w",
				"owner_token": uuid.New(), "after_key": "", "skip_topics": []string{}, "pass_keys": []string{}, "wake": false, "flow_grant": (*int32)(nil),
				"resume_priority": (*int16)(nil), "resume_run_at": (*time.Time)(nil)}
			lits := map[string]string{"queue": "'" + millionQueue + "'", "max_rows": fmt.Sprint(batch), "lease_ms": "30000", "worker_id": "'w'",
				"owner_token": "'" + uuid.NewString() + "'", "after_key": "''", "skip_topics": "'{}'", "pass_keys": "'{}'", "wake": "false", "flow_grant": "null",
				"resume_priority": "null", "resume_run_at": "null"}
			if c.resume {
				prio := int16(2) // job_runs: the highest priority of the data
				args["resume_priority"], args["resume_run_at"] = &prio, &resumeAt
				lits["resume_priority"], lits["resume_run_at"] = "2", "now() - interval '1 hour'"
			}
			for _, isGeneric := range []bool{false, true} {
				var plan planNode
				var read float64
				started := time.Now()
				if isGeneric {
					plan, read = explainAnalyzeGenericRolledBack(t, ctx, conn, c.table, sql, literalsFor(t, params, lits))
				} else {
					plan, read = explainAnalyzeRolledBack(t, ctx, conn, c.table, sql, argsFor(t, params, args)...)
				}
				took := time.Since(started)
				kind := "custom"
				if isGeneric {
					kind = "generic"
				}
				// The custom plan as well: JIT applies to any plan, and
				// the first five executions of a prepared statement are
				// custom.
				if limit := jitAboveCost(t, ctx, conn); plan.TotalCost >= limit {
					t.Errorf("%s plan is estimated at %.0f, at or above jit_above_cost (%.0f):\n%s", kind, plan.TotalCost, limit, plan)
				}
				if plan.ActualRows != batch {
					t.Errorf("%s plan claimed %.0f rows, want %d:\n%s", kind, plan.ActualRows, batch, plan)
				}
				if plan.seqScans(c.table) {
					t.Errorf("%s plan scans %s sequentially:\n%s", kind, c.table, plan)
				}
				if !plan.usesIndex(c.index) {
					t.Errorf("%s plan does not read %s:\n%s", kind, c.index, plan)
				}
				if plan.has(func(n planNode) bool { return n.NodeType == "Sort" }) {
					t.Errorf("%s plan sorts:\n%s", kind, plan)
				}
				// Unkeyed: the candidates, the reserve's count (up to half
				// the batch) and the update by id. Keyed: per claimed key the
				// walk's probe, its head, the lock and the update, and two
				// probes per key in flight passed over.
				if read > 5*batch {
					t.Errorf("%s plan read %.0f rows of %s to claim %d (want at most %d):\n%s", kind, read, c.table, batch, 5*batch, plan)
				}
				t.Logf("%s plan: read %.0f rows of %s, %d shared buffers, %s", kind, read, c.table, int(plan.buffers()), took.Round(time.Millisecond))
			}
		})
	}
	t.Logf("took %s", time.Since(start).Round(100*time.Millisecond))
}
