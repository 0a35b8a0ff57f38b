package test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
)

// namedQuery returns the text of query name from db/queries/<file>.sql with
// its sqlc parameters numbered the way sqlc numbers them (in order of first
// appearance), and the parameter names in that order. EXPLAIN then plans the
// statement the application runs, not a hand-written look-alike.
func namedQuery(t *testing.T, file, name string) (string, []string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "db", "queries", file+".sql"))
	if err != nil {
		t.Fatalf("read queries: %v", err)
	}
	var body []string
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "-- name: ") {
			if in {
				break
			}
			in = strings.HasPrefix(line, "-- name: "+name+" ")
			continue
		}
		if in && !strings.HasPrefix(strings.TrimSpace(line), "--") {
			body = append(body, line)
		}
	}
	if len(body) == 0 {
		t.Fatalf("query %s not found in db/queries/%s.sql", name, file)
	}
	sql := strings.TrimSuffix(strings.TrimSpace(strings.Join(body, "\n")), ";")
	sql = regexp.MustCompile(`sqlc\.n?arg\('(\w+)'\)`).ReplaceAllString(sql, "@$1")
	var params []string
	sql = regexp.MustCompile(`@(\w+)`).ReplaceAllStringFunc(sql, func(m string) string {
		p := m[1:]
		for i, q := range params {
			if q == p {
				return fmt.Sprintf("$%d", i+1)
			}
		}
		params = append(params, p)
		return fmt.Sprintf("$%d", len(params))
	})
	return sql, params
}

// leaseQuery is namedQuery for a shared lease statement (db/queries/lease.sql)
// with its template table name replaced by table, as package lease runs it.
func leaseQuery(t *testing.T, table, name string) (string, []string) {
	t.Helper()
	sql, params := namedQuery(t, "lease", name)
	return strings.ReplaceAll(sql, "workq_lease_table", table), params
}

// planNode is one node of EXPLAIN (FORMAT JSON) output.
type planNode struct {
	NodeType      string     `json:"Node Type"`
	Relation      string     `json:"Relation Name"`
	Index         string     `json:"Index Name"`
	Subplan       string     `json:"Subplan Name"`
	PlanRows      float64    `json:"Plan Rows"`  // the planner's estimate
	TotalCost     float64    `json:"Total Cost"` // the planner's estimate
	ActualRows    float64    `json:"Actual Rows"`
	ActualLoops   float64    `json:"Actual Loops"`
	RemovedFilter float64    `json:"Rows Removed by Filter"`
	RemovedCheck  float64    `json:"Rows Removed by Index Recheck"`
	RemovedJoin   float64    `json:"Rows Removed by Join Filter"`
	CTEName       string     `json:"CTE Name"`
	SharedHit     float64    `json:"Shared Hit Blocks"`  // with BUFFERS
	SharedRead    float64    `json:"Shared Read Blocks"` // with BUFFERS
	Plans         []planNode `json:"Plans"`
}

// buffers is how many shared buffers the plan hit or read (with BUFFERS; a
// node's counts include its children's).
func (n planNode) buffers() float64 { return n.SharedHit + n.SharedRead }

func (n planNode) walk(f func(planNode)) {
	f(n)
	for _, c := range n.Plans {
		c.walk(f)
	}
}

// subplan returns the subtree of a CTE, e.g. subplan("CTE candidates").
func (n planNode) subplan(name string) (planNode, bool) {
	var found planNode
	ok := false
	n.walk(func(x planNode) {
		if !ok && x.Subplan == name {
			found, ok = x, true
		}
	})
	return found, ok
}

func (n planNode) has(f func(planNode) bool) bool {
	hit := false
	n.walk(func(x planNode) { hit = hit || f(x) })
	return hit
}

func (n planNode) usesIndex(index string) bool {
	return n.has(func(x planNode) bool { return x.Index == index })
}

func (n planNode) seqScans(table string) bool {
	return n.has(func(x planNode) bool { return x.NodeType == "Seq Scan" && x.Relation == table })
}

// String renders the plan as an indented outline for failure messages.
func (n planNode) String() string {
	var b strings.Builder
	var rec func(planNode, int)
	rec = func(x planNode, depth int) {
		fmt.Fprintf(&b, "%s%s", strings.Repeat("  ", depth), x.NodeType)
		if x.Subplan != "" {
			fmt.Fprintf(&b, " [%s]", x.Subplan)
		}
		if x.Relation != "" {
			fmt.Fprintf(&b, " on %s", x.Relation)
		}
		if x.Index != "" {
			fmt.Fprintf(&b, " using %s", x.Index)
		}
		fmt.Fprintf(&b, " (estimate %.0f, cost %.0f)", x.PlanRows, x.TotalCost)
		if x.ActualLoops > 0 {
			fmt.Fprintf(&b, " (rows %.0f x %.0f, removed %.0f)", x.ActualRows, x.ActualLoops, x.RemovedFilter+x.RemovedCheck+x.RemovedJoin)
		}
		b.WriteByte('\n')
		for _, c := range x.Plans {
			rec(c, depth+1)
		}
	}
	rec(n, 0)
	return b.String()
}

func parsePlan(t *testing.T, raw []byte) planNode {
	t.Helper()
	var out []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out) != 1 {
		t.Fatalf("parse EXPLAIN output: %v (%s)", err, raw)
	}
	return out[0].Plan
}

// explainCustom plans sql with its parameters bound (a custom plan, what a
// statement gets on its first executions).
func explainCustom(t *testing.T, ctx context.Context, conn *pgx.Conn, sql string, args ...any) planNode {
	t.Helper()
	var raw []byte
	if err := conn.QueryRow(ctx, "explain (format json) "+sql, args...).Scan(&raw); err != nil {
		t.Fatalf("explain: %v\n%s", err, sql)
	}
	return parsePlan(t, raw)
}

// explainGeneric plans sql as a prepared statement forced to a generic plan
// (what a cached prepared statement may switch to after five executions).
func explainGeneric(t *testing.T, ctx context.Context, conn *pgx.Conn, sql string, literals ...string) planNode {
	t.Helper()
	name := "p_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	for _, s := range []string{
		"set plan_cache_mode = force_generic_plan",
		fmt.Sprintf("prepare %s as %s", name, sql),
	} {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	defer func() {
		_, _ = conn.Exec(ctx, "deallocate "+name)
		_, _ = conn.Exec(ctx, "reset plan_cache_mode")
	}()
	var raw []byte
	q := fmt.Sprintf("explain (format json) execute %s(%s)", name, strings.Join(literals, ", "))
	if err := conn.QueryRow(ctx, q).Scan(&raw); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return parsePlan(t, raw)
}

// argsFor lays out named values in the order of params.
func argsFor(t *testing.T, params []string, values map[string]any) []any {
	t.Helper()
	out := make([]any, len(params))
	for i, p := range params {
		v, ok := values[p]
		if !ok {
			t.Fatalf("no value for parameter %q", p)
		}
		out[i] = v
	}
	return out
}

func literalsFor(t *testing.T, params []string, values map[string]string) []string {
	t.Helper()
	out := make([]string, len(params))
	for i, p := range params {
		v, ok := values[p]
		if !ok {
			t.Fatalf("no literal for parameter %q", p)
		}
		out[i] = v
	}
	return out
}

// Per-table columns that the plan data needs besides the lease columns.
var planFillColumns = map[string][2]string{
	"job_runs": {"kind", "'k'"},
	"outbox":   {"topic, message_id", "'t', md5('m' || i)::uuid"},
	"inbox":    {"source, message_id, payload_hash", "'s', 'm' || i, '\\x00'::bytea"},
	"timers":   {"topic, due_time", "'t', now() - (200000 - i) * interval '1 second'"},
}

// fillForPlans writes 100k rows into a table: ids up to 60000 are history
// (mostly done or failed, ~3% ready and 2% in progress in queue q, a quarter
// of those leases expired), the rest a ready backlog in queue backlog.
func fillForPlans(t *testing.T, ctx context.Context, conn *pgx.Conn, table string) {
	t.Helper()
	fillRows(t, ctx, conn, table)
	if _, err := conn.Exec(ctx, "analyze workq."+table); err != nil {
		t.Fatalf("analyze %s: %v", table, err)
	}
}

// fillRows writes the rows of fillForPlans without gathering statistics.
func fillRows(t *testing.T, ctx context.Context, conn *pgx.Conn, table string) {
	t.Helper()
	cols := planFillColumns[table]
	sql := fmt.Sprintf(`
insert into workq.%[1]s (queue, %[2]s, status, priority, run_at, owner_token, locked_until, claimed_at, claimed_by,
                   attempts, lease_version, finished_at)
select case when i > 60000 then 'backlog' else 'q' end, %[3]s, st, (i %% 3)::smallint,
       now() - (200000 - i) * interval '1 second',
       case when st = 1 then md5('o' || i)::uuid end,
       case when st = 1 then now() + case when i %% 200 = 1 then interval '-1 minute' else interval '5 minutes' end end,
       case when st >= 1 then now() - interval '10 minutes' end,
       case when st >= 1 then 'w' end,
       case when st = 0 then 0 else 1 end,
       case when st = 0 then 0 else 1 end,
       case when st >= 2 then now() end
from (select i, case when i > 60000 then 0
                     when i %% 33 = 0 then 0
                     when i %% 50 = 1 then 1
                     when i %% 10 = 7 then 3
                     else 2 end::smallint as st
      from generate_series(1, 100000) i) s`, table, cols[0], cols[1])
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("fill %s: %v", table, err)
	}
}

var queryPrefix = map[string]string{"job_runs": "JobRuns", "outbox": "Outbox", "inbox": "Inbox", "timers": "Timers"}

// The lease statements of every table are planned on their partial indexes
// and never scan the table, on a table of 100k rows that is mostly history
// with a large ready backlog in another queue: with statistics of that
// table, and with statistics gathered while it was empty.
func TestLeasePlans(t *testing.T) {
	for _, stale := range []bool{false, true} {
		for _, tbl := range lease.Tables {
			name := string(tbl)
			if stale {
				name += "/stale statistics"
			}
			t.Run(name, func(t *testing.T) { leasePlans(t, string(tbl), stale) })
		}
	}
}

func leasePlans(t *testing.T, table string, stale bool) {
	{
		{
			t.Parallel() // each subtest has its own database; filling 100k rows is the slow part
			url := testdb.URL(t)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			conn := mustConnect(t, url)
			if stale {
				// Statistics gathered on an empty table (a fresh install, or
				// a VACUUM ANALYZE after a cleanup), then 100k rows: what
				// the planner knows is wrong by five orders of magnitude.
				if _, err := conn.Exec(ctx, "analyze workq."+table); err != nil {
					t.Fatal(err)
				}
				fillRows(t, ctx, conn, table)
			} else {
				fillForPlans(t, ctx, conn, table)
			}
			prefix := queryPrefix[table]
			claimIndex, inProgressIndex := table+"_claim", table+"_in_progress"

			claimSQL, claimParams := namedQuery(t, table, prefix+"Claim")
			resumeAt := time.Now().Add(-time.Hour)
			resumePriority := int16(0)
			claimArgs := func(queue string, resume bool) map[string]any {
				args := map[string]any{"queue": queue, "max_rows": int32(100),
					"lease_ms": int64(30_000), "worker_id": "w", "owner_token": uuid.New(),
					"after_key": "", "skip_topics": []string{}, "pass_keys": []string{}, "wake": false, "flow_grant": (*int32)(nil), // outbox's ordered-claim options
					"resume_priority": (*int16)(nil), "resume_run_at": (*time.Time)(nil)} // the resume point (job_runs, timers, inbox)
				if resume {
					args["resume_priority"], args["resume_run_at"] = &resumePriority, &resumeAt
				}
				return args
			}
			claimLits := func(resume bool) []string {
				lits := map[string]string{"queue": "'q'",
					"max_rows": "100", "lease_ms": "30000", "worker_id": "'w'",
					"owner_token": "'" + uuid.NewString() + "'", "after_key": "''", "skip_topics": "'{}'", "pass_keys": "'{}'", "wake": "false", "flow_grant": "null",
					"resume_priority": "null", "resume_run_at": "null"}
				if resume {
					lits["resume_priority"], lits["resume_run_at"] = "0", "now() - interval '1 hour'"
				}
				return literalsFor(t, claimParams, lits)
			}
			// The CTEs that read the claim index in its order: job runs read
			// three ranges (above, at and below a resume point); the outbox
			// claim's unkeyed branch is its CTE unkeyed (its keyed branch has
			// a plan test of its own, outbox/plan_test.go).
			candidateCTEs := []string{"CTE candidates"}
			switch table {
			case "job_runs":
				candidateCTEs = []string{"CTE above", "CTE resumed", "CTE below"}
			case "outbox":
				candidateCTEs = []string{"CTE unkeyed"}
			}
			plans := map[string]planNode{
				"custom":  explainCustom(t, ctx, conn, claimSQL, argsFor(t, claimParams, claimArgs("q", false))...),
				"generic": explainGeneric(t, ctx, conn, claimSQL, claimLits(false)...),
			}
			if table != "outbox" { // the outbox's claim takes no resume point
				plans["custom, resumed"] = explainCustom(t, ctx, conn, claimSQL, argsFor(t, claimParams, claimArgs("q", true))...)
				plans["generic, resumed"] = explainGeneric(t, ctx, conn, claimSQL, claimLits(true)...)
			}
			for kind, plan := range plans {
				if plan.seqScans(table) {
					t.Errorf("%s plan of %sClaim scans %s sequentially:\n%s", kind, prefix, table, plan)
				}
				for _, name := range candidateCTEs {
					cand, ok := plan.subplan(name)
					if !ok {
						t.Fatalf("%s plan of %sClaim has no %s:\n%s", kind, prefix, name, plan)
					}
					if !cand.usesIndex(claimIndex) {
						t.Errorf("%s plan: %s does not use %s:\n%s", kind, name, claimIndex, cand)
					}
					if cand.has(func(x planNode) bool { return x.NodeType == "Sort" }) {
						t.Errorf("%s plan: %s is sorted instead of read in %s order:\n%s", kind, name, claimIndex, cand)
					}
				}
			}

			// The reaper reaps every queue (queue null); a producer reaps its own.
			// The statement finds its candidates through workq_expired_leases
			// (migration 00030), so its own plan only must not scan the table;
			// the function's query, planned under the function's settings,
			// must read the in-progress index by an ordered index scan: no
			// bitmap scan (which reads the heap page of every dead entry on
			// every call and never marks one dead) and no sort.
			reapSQL, reapParams := leaseQuery(t, table, "LeaseReapExpired")
			queueQ := "q"
			for kind, plan := range map[string]planNode{
				"custom, all queues":  explainCustom(t, ctx, conn, reapSQL, argsFor(t, reapParams, map[string]any{"queue": (*string)(nil), "max_rows": int32(100)})...),
				"custom, one queue":   explainCustom(t, ctx, conn, reapSQL, argsFor(t, reapParams, map[string]any{"queue": &queueQ, "max_rows": int32(100)})...),
				"generic, all queues": explainGeneric(t, ctx, conn, reapSQL, literalsFor(t, reapParams, map[string]string{"queue": "null", "max_rows": "100"})...),
				"generic, one queue":  explainGeneric(t, ctx, conn, reapSQL, literalsFor(t, reapParams, map[string]string{"queue": "'q'", "max_rows": "100"})...),
			} {
				if plan.seqScans(table) {
					t.Errorf("%s plan of LeaseReapExpired scans %s sequentially:\n%s", kind, table, plan)
				}
			}
			for kind, plan := range expiredLeasesPlans(t, ctx, conn, table) {
				if plan.seqScans(table) || !plan.usesIndex(inProgressIndex) ||
					plan.has(func(x planNode) bool { return x.NodeType == "Sort" || strings.HasPrefix(x.NodeType, "Bitmap") }) {
					t.Errorf("%s plan of workq_expired_leases does not read %s in order by an index scan:\n%s", kind, inProgressIndex, plan)
				}
			}

			// Retention: the shared statement, except on the outbox, whose own
			// (OutboxDeleteFinished, through the lease registry) keeps failed
			// keyed messages and reads an index that leaves them out.
			delSQL, delParams := leaseQuery(t, table, "LeaseDeleteFinished")
			delName := "LeaseDeleteFinished"
			if table == "outbox" {
				delName = "OutboxDeleteFinished"
				delSQL, delParams = namedQuery(t, "outbox", delName)
			}
			del := explainCustom(t, ctx, conn, delSQL, argsFor(t, delParams, map[string]any{"older_than_ms": int64(60_000), "max_rows": int32(500)})...)
			if del.seqScans(table) || !del.usesIndex(table+"_finished") {
				t.Errorf("%s does not find old rows through %s_finished alone:\n%s", delName, table, del)
			}

			// The global limit's count in workq_claim_budget.
			budget := explainCustom(t, ctx, conn, fmt.Sprintf(
				"select count(*) from workq.%s where queue = $1 and status = 1 and locked_until > now()", table), "q")
			if budget.seqScans(table) || !budget.usesIndex(inProgressIndex) {
				t.Errorf("the live-lease count of workq_claim_budget does not use %s:\n%s", inProgressIndex, budget)
			}

			heldSQL, heldParams := leaseQuery(t, table, "LeaseHeldBy")
			held := explainCustom(t, ctx, conn, heldSQL, argsFor(t, heldParams, map[string]any{"owner_token": uuid.New()})...)
			if held.seqScans(table) || !held.usesIndex(inProgressIndex) {
				t.Errorf("LeaseHeldBy does not read the in-progress set through %s:\n%s", inProgressIndex, held)
			}

			// Heartbeat and Complete of a batch of 500 in-progress rows (ids
			// 1, 51, 101, ... hold the leases, their tokens md5('o' || id)) look
			// each row up by id: they read about one row per element, not the
			// table or the in-progress set once per element.
			var ids []int64
			var tokens, outcomes []string
			var delays []int64
			for id := int64(1); len(ids) < 500; id += 50 {
				var tok string
				if err := conn.QueryRow(ctx, "select md5('o' || $1::bigint)::uuid::text", id).Scan(&tok); err != nil {
					t.Fatal(err)
				}
				ids, tokens = append(ids, id), append(tokens, tok)
				outcomes, delays = append(outcomes, "done"), append(delays, 0)
			}
			arrayLiteral := func(xs []string) string { return "'{" + strings.Join(xs, ",") + "}'" }
			idLits, delayLits := make([]string, len(ids)), make([]string, len(ids))
			tokenOf, tokenOfLits := make([]int32, len(ids)), make([]string, len(ids))
			for i, id := range ids {
				idLits[i], delayLits[i] = fmt.Sprint(id), fmt.Sprint(delays[i])
				tokenOf[i], tokenOfLits[i] = int32(i+1), fmt.Sprint(i+1)
			}
			heartbeatLits := map[string]string{"lease_ms": "30000", "ids": arrayLiteral(idLits), "owner_tokens": arrayLiteral(tokens)}
			completeLits := map[string]string{"ids": arrayLiteral(idLits), "tokens": arrayLiteral(tokens), "token_of": arrayLiteral(tokenOfLits),
				"outcomes": arrayLiteral(outcomes), "errors": "NULL", "delays_ms": arrayLiteral(delayLits),
				"outputs": "NULL"} // no errors and no outputs, as a batch of done jobs sends (Engine.Complete)
			for _, c := range []struct {
				name     string
				args     map[string]any
				literals map[string]string
			}{
				{"LeaseHeartbeat", map[string]any{"lease_ms": int64(30_000), "ids": ids, "owner_tokens": tokens}, heartbeatLits},
				{"LeaseComplete", map[string]any{"ids": ids, "tokens": tokens, "token_of": tokenOf, "outcomes": outcomes, "errors": []string(nil), "delays_ms": delays,
					"outputs": []string(nil)}, completeLits},
			} {
				sql, params := leaseQuery(t, table, c.name)
				// Planned for these arrays, and as the generic plan a cached
				// prepared statement switches to after five executions, which
				// assumes ten elements per array: that plan once joined the
				// batch to its rows in a nested loop over a materialized scan,
				// comparing every element with every row (70-140 ms a batch of
				// 1000 in a benchmark, where a batch takes 2-10 ms). On this
				// data the old heartbeat made that loop under both statistics,
				// the old complete only at an estimate of 50 rows for the
				// batch (tried while choosing the fix: it failed here under
				// stale statistics); whether a plan tips over depends on the
				// statistics of the moment, so both are checked under both.
				for _, generic := range []bool{false, true} {
					var plan planNode
					var rows float64
					if generic {
						plan, rows = explainAnalyzeGenericRolledBack(t, ctx, conn, table, sql, literalsFor(t, params, c.literals))
					} else {
						plan, rows = explainAnalyzeRolledBack(t, ctx, conn, table, sql, argsFor(t, params, c.args)...)
					}
					// A few primary-key lookups per element (the heartbeat: lock,
					// update, and the read that tells lost from skipped).
					if plan.seqScans(table) || rows > 4*float64(len(ids)) {
						t.Errorf("%s of %d rows (generic plan %t) read %.0f rows of %s (want at most %d):\n%s", c.name, len(ids), generic, rows, table, 4*len(ids), plan)
					}
					compared := 0.0
					plan.walk(func(n planNode) { compared += n.RemovedJoin })
					if compared > 4*float64(len(ids)) {
						t.Errorf("%s of %d rows (generic plan %t) compared %.0f pairs that did not match (want at most %d):\n%s",
							c.name, len(ids), generic, compared, 4*len(ids), plan)
					}
				}
			}

			// A claim from the large backlog touches about max_rows rows of the
			// table, not the backlog.
			plan, touched := explainAnalyzeRolledBack(t, ctx, conn, table, claimSQL, argsFor(t, claimParams, claimArgs("backlog", false))...)
			if plan.seqScans(table) || touched > 1000 {
				t.Errorf("claiming 100 rows from a backlog of 40000 read %.0f rows of %s (want at most 1000):\n%s",
					touched, table, plan)
			}
		}
	}
}

// explainAnalyzeRolledBack runs sql under EXPLAIN (ANALYZE, BUFFERS) in a transaction
// it rolls back, and returns the plan and how many rows of table its scans
// read (returned, or removed by a filter or recheck).
func explainAnalyzeRolledBack(t *testing.T, ctx context.Context, conn interface {
	Begin(context.Context) (pgx.Tx, error)
}, table, sql string, args ...any) (planNode, float64) {
	t.Helper()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var raw []byte
	if err := tx.QueryRow(ctx, "explain (analyze, buffers, format json) "+sql, args...).Scan(&raw); err != nil {
		t.Fatalf("explain analyze: %v\n%s", err, sql)
	}
	plan := parsePlan(t, raw)
	return plan, rowsRead(plan, table)
}

// explainAnalyzeGenericRolledBack is explainAnalyzeRolledBack on the
// generic plan, the one a cached prepared statement may switch to after
// five executions (it cannot see the parameters, so it assumes ten
// elements per array): sql prepared, and executed with literals.
func explainAnalyzeGenericRolledBack(t *testing.T, ctx context.Context, conn *pgx.Conn, table, sql string, literals []string) (planNode, float64) {
	t.Helper()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Roll back (undoing the statement and the setting), then drop the
	// prepared statement, which outlives the transaction.
	defer func() {
		_ = tx.Rollback(ctx)
		_, _ = conn.Exec(ctx, "deallocate generic_analyzed")
	}()
	for _, s := range []string{"set local plan_cache_mode = force_generic_plan", "prepare generic_analyzed as " + sql} {
		if _, err := tx.Exec(ctx, s); err != nil {
			t.Fatalf("%v\n%s", err, s)
		}
	}
	var raw []byte
	q := "explain (analyze, buffers, format json) execute generic_analyzed(" + strings.Join(literals, ", ") + ")"
	if err := tx.QueryRow(ctx, q).Scan(&raw); err != nil {
		t.Fatalf("explain analyze: %v\n%s", err, sql)
	}
	plan := parsePlan(t, raw)
	return plan, rowsRead(plan, table)
}

// rowsRead counts the rows of table that plan's scans read (returned, or
// removed by a filter or recheck).
func rowsRead(plan planNode, table string) float64 {
	var touched float64
	plan.walk(func(x planNode) {
		if x.Relation == table && x.NodeType != "ModifyTable" {
			touched += x.ActualRows*x.ActualLoops + x.RemovedFilter + x.RemovedCheck
		}
	})
	return touched
}

// partitionsWithRows names the partitions of a table of workq's schema
// that hold rows.
func partitionsWithRows(t *testing.T, ctx context.Context, conn *pgx.Conn, table string) map[string]bool {
	t.Helper()
	rows, err := conn.Query(ctx, `select distinct tableoid::regclass::text from workq.`+table)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, n := range names {
		out[strings.TrimPrefix(n, "workq.")] = true
	}
	return out
}

// The run archive's queries on a partitioned archive the size of the
// default retention's: eight days of runs in their day partitions, three
// empty ones ahead and the DEFAULT partition, twelve partitions in all. A
// query by run id (RunsGet, RunsByIDs, and RunsListByItem's one key range)
// cannot be pruned, since a run id does not say its day: it probes the
// primary key of every partition that holds rows, a few buffers each, and
// never scans one (an empty partition may be "scanned": it has no page).
// The dashboard's finished_at ranges (RunsLastMinute, RunsEndedBetween)
// read only the partitions from their start on, of runs and of
// job_runs_done alike: today's, and the empty ones.
func TestRunsPlans(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn := mustConnect(t, testdb.URL(t))
	if _, err := conn.Exec(ctx, `
select workq.workq_runs_add_partitions(now() - interval '9 days', 10, null);
insert into workq.runs (run_id, work_table, item_id, queue, attempt, lease_version, owner_token, worker_id, started_at, finished_at, outcome)
select workq.workq_run_id(tb, i, v), tb, i, 'q', v, v, md5(i::text)::uuid, 'w', now() - interval '9 days',
       -- the same number of runs at noon UTC of each of the eight days
       -- before yesterday (over 31 s), whatever the time of day the test
       -- runs at: none in the partitions the dashboard's last minute reads,
       -- yesterday's too in a day's first minute (the time-of-day
       -- sensitive versions failed late in a UTC day, or just after
       -- midnight)
       date_trunc('day', now(), 'UTC') - interval '9 days' + (i % 8) * interval '1 day' + interval '12 hours'
         + (i / 8) * interval '10 milliseconds', 'done'
from generate_series(1, 25000) i, generate_series(1, 2) v, unnest(array['job_runs', 'outbox']) tb;
analyze workq.runs;
-- done job runs that moved, each its own last attempt (migration 00028),
-- at the same times in job_runs_done's day partitions
select workq.workq_day_partitions_add('job_runs_done', now() - interval '9 days', 10, null);
insert into workq.job_runs_done (id, queue, kind, payload, status, lease_version, attempts, max_attempts, claimed_at, claimed_by,
                                 created_at, updated_at, finished_at, run_at)
select 1000000 + i, 'q', 'k', '{}', 2, 1, 1, 25, f - interval '1 second', 'w', f - interval '2 seconds', f, f, f - interval '2 seconds'
from generate_series(1, 25000) i,
     lateral (select date_trunc('day', now(), 'UTC') - interval '9 days' + (i % 8) * interval '1 day' + interval '12 hours'
                     + (i / 8) * interval '10 milliseconds' as f) t;
analyze workq.job_runs_done`); err != nil {
		t.Fatal(err)
	}
	populatedDone := partitionsWithRows(t, ctx, conn, "job_runs_done")
	if len(populatedDone) != 8 {
		t.Fatalf("done rows in %d partitions; want 8 days of them", len(populatedDone))
	}
	// readDone lists the done table's partitions with rows that a plan reads.
	readDone := func(plan planNode) map[string]bool {
		parts := map[string]bool{}
		plan.walk(func(x planNode) {
			if populatedDone[x.Relation] {
				parts[x.Relation] = true
			}
		})
		return parts
	}
	var partitions int
	if err := conn.QueryRow(ctx, `select count(*) from workq.workq_runs_partition_list()`).Scan(&partitions); err != nil || partitions < 12 {
		t.Fatalf("%d partitions (%v); want at least 12", partitions, err)
	}
	populated := partitionsWithRows(t, ctx, conn, "runs")
	if len(populated) < 8 {
		t.Fatalf("runs in %d partitions; want 8 days of them", len(populated))
	}
	// read lists the partitions with rows that a plan reads, and whether
	// it reads each by an index scan of its primary key.
	read := func(plan planNode) (parts map[string]bool, byKey bool) {
		parts, byKey = map[string]bool{}, true
		plan.walk(func(x planNode) {
			if populated[x.Relation] {
				parts[x.Relation] = true
				byKey = byKey && strings.HasPrefix(x.NodeType, "Index") && x.Index == x.Relation+"_pkey"
			}
		})
		return parts, byKey
	}
	runID := func(tb lease.Table, id, version int64) uuid.UUID {
		t.Helper()
		u, err := lease.RunID(tb, id, version)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	anID := runID(lease.Outbox, 777, 2)
	for _, c := range []struct {
		query  string
		args   map[string]any
		probes int // index descents per partition
	}{
		{"RunsListByItem", map[string]any{"work_table": "outbox", "item_id": int64(777)}, 1},
		{"RunsGet", map[string]any{"run_id": anID}, 1},
		{"RunsByIDs", map[string]any{"run_ids": []uuid.UUID{anID, uuid.New(), runID(lease.JobRuns, 5, 1)}}, 3},
	} {
		sql, params := namedQuery(t, "runs", c.query)
		args := argsFor(t, params, c.args)
		plan := explainCustom(t, ctx, conn, sql, args...)
		if parts, byKey := read(plan); len(parts) != len(populated) || !byKey {
			t.Errorf("%s reads %d of the %d partitions with rows, all by their primary keys: %v:\n%s", c.query, len(parts), len(populated), byKey, plan)
		}
		var raw []byte
		if err := conn.QueryRow(ctx, "explain (analyze, buffers, format json) "+sql, args...).Scan(&raw); err != nil {
			t.Fatal(err)
		}
		analyzed := parsePlan(t, raw)
		// A key descent is two or three pages (the archive's keys are two
		// levels deep here), plus the heap page of a match.
		if buffers, limit := analyzed.SharedHit+analyzed.SharedRead, 3*c.probes*len(populated)+4; buffers > float64(limit) {
			t.Errorf("%s read %.0f buffers over %d partitions with rows; want at most %d:\n%s", c.query, buffers, len(populated), limit, analyzed)
		}
		t.Logf("%s: %.0f buffers over %d partitions (%d with rows)", c.query, analyzed.SharedHit+analyzed.SharedRead, partitions, len(populated))
	}
	// The dashboard's counts read the partitions of their minutes only, by
	// runs_finished. RunsEndedBetween over a second of three days ago: that
	// day's partition, where the second holds 1/31 of the rows.
	var dayAgo time.Time
	if err := conn.QueryRow(ctx, `select date_trunc('day', now(), 'UTC') - interval '3 days'`).Scan(&dayAgo); err != nil {
		t.Fatal(err)
	}
	after := dayAgo.Add(12*time.Hour + 10*time.Second)
	sql, params := namedQuery(t, "runs", "RunsEndedBetween")
	plan := explainCustom(t, ctx, conn, sql, argsFor(t, params, map[string]any{"after": after, "until": after.Add(time.Second)})...)
	byFinished := !plan.has(func(x planNode) bool { return x.NodeType == "Seq Scan" && populated[x.Relation] })
	if parts, _ := read(plan); len(parts) != 1 || !parts["runs_p"+dayAgo.UTC().Format("20060102")] || !byFinished {
		t.Errorf("RunsEndedBetween reads the partitions with rows %v; want only runs_p%s, by runs_finished:\n%s", parts, dayAgo.UTC().Format("20060102"), plan)
	}
	if parts := readDone(plan); len(parts) != 1 || !parts["job_runs_done_p"+dayAgo.UTC().Format("20060102")] {
		t.Errorf("RunsEndedBetween reads the done partitions with rows %v; want only job_runs_done_p%s:\n%s", parts, dayAgo.UTC().Format("20060102"), plan)
	}
	// It counts the done rows of that second as done attempts of job runs.
	var counted int64
	if err := conn.QueryRow(ctx, `select coalesce(sum(c.count), 0) from (`+sql+`) c where c.work_table = 'job_runs' and c.outcome = 'done'`,
		argsFor(t, params, map[string]any{"after": after, "until": after.Add(time.Second)})...).Scan(&counted); err != nil {
		t.Fatal(err)
	}
	var want int64
	if err := conn.QueryRow(ctx, `select (select count(*) from workq.runs where work_table = 'job_runs' and finished_at > $1 and finished_at <= $2)
		+ (select count(*) from workq.job_runs_done where finished_at > $1 and finished_at <= $2)`, after, after.Add(time.Second)).Scan(&want); err != nil {
		t.Fatal(err)
	}
	if counted != want || want == 0 {
		t.Errorf("RunsEndedBetween counts %d done job runs in its second, want %d (runs and done rows)", counted, want)
	}
	// RunsLastMinute: no partition that ends before its minute, by the
	// database clock (today's is read, yesterday's too in a day's first
	// minute, and the ones ahead; none of them holds rows: runs_finished's
	// use is RunsEndedBetween's check above).
	var before []string
	if err := conn.QueryRow(ctx, `select array(select p.partition_name from workq.workq_runs_partition_list() p
		where not p.is_default and p.upper_bound <= now() - interval '1 minute')`).Scan(&before); err != nil || len(before) < 8 {
		t.Fatalf("partitions before the last minute: %v, %v; want the 8 days that hold rows at least", before, err)
	}
	sql, params = namedQuery(t, "runs", "RunsLastMinute")
	plan = explainCustom(t, ctx, conn, sql, argsFor(t, params, nil)...)
	var scanned []string
	plan.walk(func(x planNode) {
		if strings.HasPrefix(x.Relation, "runs_") {
			scanned = append(scanned, x.Relation)
		}
	})
	if len(scanned) == 0 || slices.ContainsFunc(scanned, func(r string) bool { return slices.Contains(before, r) }) {
		t.Errorf("RunsLastMinute reads %v; want none of %v:\n%s", scanned, before, plan)
	}
	if parts := readDone(plan); len(parts) != 0 {
		t.Errorf("RunsLastMinute reads the done partitions with rows %v; want none (they ended days ago):\n%s", parts, plan)
	}
	// And the range holds exactly that item's runs, in claim order.
	got, err := gen.New(conn).RunsListByItem(ctx, "outbox", 777)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].LeaseVersion != 1 || got[1].LeaseVersion != 2 || got[0].ItemID != 777 || got[1].WorkTable != "outbox" {
		t.Errorf("runs of outbox 777: %+v; want its lease versions 1 and 2", got)
	}
}

// The completion's move of done rows must stay free of row values: the
// done row comes from workq_done_rows, a set-returning SQL function in
// FROM over a row constructor, which PostgreSQL inlines as a subquery and
// pulls up at plan time. Were the function no longer inlinable (a SET
// clause, volatility, strictness, a body that is not a single select), it
// would be called per row as a function scan, forming the row and taking
// it apart again, and nothing else would fail. EXPLAIN VERBOSE names the
// function only when it is called.
func TestCompleteDoneRowIsInlined(t *testing.T) {
	ctx := context.Background()
	conn := mustConnect(t, testdb.URL(t))
	sql, params := leaseQuery(t, string(lease.JobRuns), "LeaseComplete")
	args := argsFor(t, params, map[string]any{"ids": []int64{1}, "tokens": []string{uuid.NewString()}, "token_of": []int32{1},
		"outcomes": []string{"done"}, "errors": []string{""}, "delays_ms": []int64{0}, "outputs": []string{`{"a":1}`}})
	rows, err := conn.Query(ctx, "explain (verbose) "+sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan, "\n")
	if !strings.Contains(text, "Insert on workq.job_runs_done") {
		t.Fatalf("no insert into job_runs_done in the plan:\n%s", text)
	}
	if strings.Contains(text, "workq_done_row") { // workq_done_rows, or the older workq_done_row
		t.Errorf("the done row's function is called, not inlined:\n%s", text)
	}
}

// expiredLeasesQuery is workq_expired_leases's query on table (its text
// from workq_expired_leases_query) and the function's own settings
// (pg_proc.proconfig, name=value), which must rule out the bitmap and the
// sequential scan.
func expiredLeasesQuery(t *testing.T, ctx context.Context, conn *pgx.Conn, table string) (query string, settings []string) {
	t.Helper()
	if err := conn.QueryRow(ctx, `select workq.workq_expired_leases_query($1),
		(select proconfig from pg_proc where oid = 'workq.workq_expired_leases(text, text, integer)'::regprocedure)`, table).Scan(&query, &settings); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"enable_bitmapscan=off", "enable_seqscan=off"} {
		if !slices.Contains(settings, want) {
			t.Fatalf("workq_expired_leases's settings %v lack %s", settings, want)
		}
	}
	return query, settings
}

// withSettings sets the session's settings (proconfig entries,
// name=value) and returns what resets them.
func withSettings(t *testing.T, ctx context.Context, conn *pgx.Conn, settings []string) (reset func()) {
	t.Helper()
	var names []string
	for _, kv := range settings {
		name, value, _ := strings.Cut(kv, "=")
		if _, err := conn.Exec(ctx, "select set_config($1, $2, false)", name, value); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	return func() {
		for _, name := range names {
			_, _ = conn.Exec(ctx, "reset "+pgx.Identifier{name}.Sanitize())
		}
	}
}

// expiredLeasesPlans plans workq_expired_leases's query on table under the
// function's own settings, for one queue and for all, custom and generic.
func expiredLeasesPlans(t *testing.T, ctx context.Context, conn *pgx.Conn, table string) map[string]planNode {
	t.Helper()
	query, settings := expiredLeasesQuery(t, ctx, conn, table)
	defer withSettings(t, ctx, conn, settings)()
	queue := "q"
	return map[string]planNode{
		"custom, all queues":  explainCustom(t, ctx, conn, query, (*string)(nil), int32(100)),
		"custom, one queue":   explainCustom(t, ctx, conn, query, &queue, int32(100)),
		"generic, all queues": explainGeneric(t, ctx, conn, query, "null", "100"),
		"generic, one queue":  explainGeneric(t, ctx, conn, query, "'q'", "100"),
	}
}
