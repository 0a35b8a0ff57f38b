package test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// The flow claim at a million ready job runs over 10,000 limit keys, in a
// fair queue with a rule per key (issue 30): workq_flow_pick is PL/pgSQL,
// so EXPLAIN of its call shows one Result node. The test checks the whole
// pick by the buffers it touches (which count the statements it runs
// inside), and the generic plans of its static statements, which PL/pgSQL
// caches as a prepared statement caches them: copies of the statements in
// migration 00024 (a change there must be made here too).
func TestFlowPickAtAMillionRows(t *testing.T) {
	dbs := millionData(t)
	var url string
	for _, db := range dbs {
		if db.name == "flowkeys" {
			url = db.url
		}
	}
	conn := mustConnect(t, url)
	ctx := context.Background()
	const batch = 1000

	t.Run("pick", func(t *testing.T) {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		var raw []byte
		started := time.Now()
		sql := fmt.Sprintf("explain (analyze, buffers, format json) select workq.workq_flow_pick('job_runs', '%s', %d, '')", millionQueue, batch)
		if err := tx.QueryRow(ctx, sql).Scan(&raw); err != nil {
			t.Fatal(err)
		}
		took := time.Since(started)
		plan := parsePlan(t, raw)
		var pick struct {
			IDs []int64 `json:"ids"`
		}
		var out []byte
		if err := tx.QueryRow(ctx, fmt.Sprintf("select workq.workq_flow_pick('job_runs', '%s', %d, 'key-05000')", millionQueue, batch)).Scan(&out); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(out, &pick); err != nil {
			t.Fatal(err)
		}
		// 10,000 keys and a batch of 1,000: a share of one per key, so a
		// thousand keys each give one row (those in progress too: their
		// concurrency is 5).
		if len(pick.IDs) != batch {
			t.Fatalf("a flow pick over 10,000 keys took %d rows, want %d", len(pick.IDs), batch)
		}
		// Per key visited: the walk's probe and due probe, its state and
		// count in progress, the take and its lock, its log, and the scan
		// for jobs without a key (batch + 16 rows): about 35 buffers
		// a key when written, never the backlog.
		if b := plan.buffers(); b > 40*batch {
			t.Errorf("a flow pick of %d touched %.0f shared buffers (want at most %d):\n%s", batch, b, 40*batch, plan)
		}
		t.Logf("flow pick of %d over %d keys: %.0f shared buffers, %s", batch, flowKeys, plan.buffers(), took.Round(time.Millisecond))
	})

	statements := []struct {
		name, sql, index string
		nparams          int
	}{
		{"key walk probe", `select j.limit_key from workq.job_runs j
			where j.queue = $1 and j.status = 0 and j.limit_key is not null and j.limit_key > $2
			order by j.limit_key limit 1`, "job_runs_key_claim", 2},
		{"key take", `select t.o, t.id, t.kind
			from unnest($2::text[], $3::integer[]) with ordinality u(key, n, o)
			cross join lateral (
				select j.id, j.kind::text as kind, u.o from workq.job_runs j
				where j.queue = $1 and j.status = 0 and j.limit_key = u.key and j.run_at <= now()
				  and not (j.kind = any($4::text[])) and not (j.id = any($5::bigint[]))
				order by j.priority desc, j.run_at, j.id
				limit u.n
				for update skip locked) t
			where u.n > 0`, "job_runs_key_claim", 5},
		{"key due probe", `select 1 from workq.job_runs j where j.queue = $1 and j.status = 0 and j.limit_key = $2 and j.run_at <= now()
			order by j.priority desc, j.run_at, j.id limit 1`, "job_runs_key_claim", 2},
		{"keyless scan", `select s.id, s.kind, s.limit_key, s.priority, s.run_at from (
			(select j.id, j.kind::text as kind, j.limit_key, j.priority, j.run_at from workq.job_runs j
			 where j.queue = $1 and j.status = 0 and j.priority = $2 and (j.run_at, j.id) > ($3, $4)
			 order by j.priority desc, j.run_at, j.id limit $5)
			union all
			(select j.id, j.kind::text, j.limit_key, j.priority, j.run_at from workq.job_runs j
			 where j.queue = $1 and j.status = 0 and j.priority < $2
			 order by j.priority desc, j.run_at, j.id limit $5)
		) s order by s.priority desc, s.run_at, s.id limit $5`, "job_runs_claim", 5},
		{"key in progress", `select count(*) from workq.job_runs where queue = $1 and status = 1 and limit_key = $2`, "job_runs_key_running", 2},
	}
	limit := jitAboveCost(t, ctx, conn)
	for _, s := range statements {
		t.Run(s.name, func(t *testing.T) {
			g := explainGenericCost(t, ctx, conn, s.sql, s.nparams)
			if g.cost >= limit {
				t.Errorf("generic plan estimated at %.0f, at or above jit_above_cost (%.0f):\n%s", g.cost, limit, g.text)
			}
			if !containsIndex(g.text, s.index) {
				t.Errorf("generic plan does not read %s:\n%s", s.index, g.text)
			}
		})
	}
}

// containsIndex says whether an EXPLAIN text reads index.
func containsIndex(plan, index string) bool {
	return strings.Contains(plan, " using "+index) || strings.Contains(plan, " on "+index)
}
