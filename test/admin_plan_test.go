package test

import (
	"context"
	"math"
	"testing"

	"github.com/workq/workq/internal/testdb"
)

// The operator's item pages (admin.List, Client.List) walk the primary key
// down from the cursor, and a page of failed items reads the table's failed
// index, on a table of 100k rows that is mostly history; a metadata filter
// reads a window of ids like an error text. The pages carry the payload
// (select *): the plan is the same. package admin runs these
// statements with custom plans (pgx.QueryExecModeExec), which is what
// explainCustom plans.
func TestAdminPagePlans(t *testing.T) {
	t.Parallel() // its own databases; filling them is the slow part
	for _, table := range []string{"job_runs", "outbox", "inbox", "timers"} {
		t.Run(table, func(t *testing.T) {
			ctx := context.Background()
			conn := mustConnect(t, testdb.URL(t))
			fillForPlans(t, ctx, conn, table)
			sql, params := namedQuery(t, table, queryPrefix[table]+"Page")
			base := map[string]any{"before_id": int64(math.MaxInt64), "queue": nil, "status": nil, "kind": nil,
				"created_after": nil, "created_before": nil, "min_id": int64(0), "error_text": nil, "metadata": nil, "max_rows": int32(51),
				"partition_key": nil, "limit_key": nil, "message_id": nil, "source": nil, "due_after": nil, "due_before": nil}
			with := func(k string, v any) map[string]any {
				m := map[string]any{}
				for key, val := range base {
					m[key] = val
				}
				m[k] = v
				return m
			}
			withAll := func(m, more map[string]any) map[string]any {
				for k, v := range more {
					m[k] = v
				}
				return m
			}
			cases := []struct {
				name, index string
				values      map[string]any
			}{
				{"newest first", table + "_pkey", base},
				{"next page", table + "_pkey", with("before_id", int64(50000))},
				{"one queue", table + "_pkey", with("queue", "q")},
				{"failed", table + "_failed", with("status", int16(3))},
				{"error text in a window of ids", table + "_pkey", withAll(with("before_id", int64(60000)), map[string]any{"min_id": int64(50001), "error_text": "timeout"})},
			}
			if table == "job_runs" {
				cases = append(cases, struct {
					name, index string
					values      map[string]any
				}{"metadata in a window of ids", table + "_pkey",
					withAll(with("before_id", int64(60000)), map[string]any{"min_id": int64(50001), "metadata": `{"tenant":"t1"}`})})
			}
			// The filters of one kind's own columns (ListParams.PartitionKey,
			// Source, DueAfter and DueBefore) walk the same index.
			// A message id: its unique index.
			for _, kv := range kindFilterPlanCases[table] {
				index := table + "_pkey"
				if kv.index != "" {
					index = kv.index
				}
				values := with(kv.key, kv.val)
				for k, v := range kv.extra {
					values[k] = v
				}
				cases = append(cases, struct {
					name, index string
					values      map[string]any
				}{kv.name, index, values})
			}
			for _, c := range cases {
				plan := explainCustom(t, ctx, conn, sql, argsFor(t, params, c.values)...)
				if !plan.usesIndex(c.index) || plan.seqScans(table) {
					t.Errorf("%s: want a scan of %s and no seq scan, got\n%s", c.name, c.index, plan)
				}
			}
		})
	}
}
