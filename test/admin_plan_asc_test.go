package test

import (
	"context"
	"math"
	"testing"

	"github.com/workq/workq/internal/testdb"
)

// The oldest-first item pages (<Table>PageAsc; Client.List with
// OldestFirst) walk the same indexes up that the newest-first pages walk
// down, on the 100k-row table of TestAdminPagePlans: the primary key from
// the cursor, the failed index for failed items, and never a seq scan,
// with a queue and a state too (a ready backlog in another queue, a
// failed page of one queue).
func TestAdminPageAscPlans(t *testing.T) {
	t.Parallel() // its own databases; filling them is the slow part
	for _, table := range []string{"job_runs", "outbox", "inbox", "timers"} {
		t.Run(table, func(t *testing.T) {
			ctx := context.Background()
			conn := mustConnect(t, testdb.URL(t))
			fillForPlans(t, ctx, conn, table)
			sql, params := namedQuery(t, table, queryPrefix[table]+"PageAsc")
			base := map[string]any{"after_id": int64(0), "queue": nil, "status": nil, "kind": nil,
				"created_after": nil, "created_before": nil, "max_id": int64(math.MaxInt64), "error_text": nil, "metadata": nil, "max_rows": int32(51),
				"partition_key": nil, "limit_key": nil, "message_id": nil, "source": nil, "due_after": nil, "due_before": nil}
			with := func(kv ...any) map[string]any {
				m := map[string]any{}
				for key, val := range base {
					m[key] = val
				}
				for i := 0; i < len(kv); i += 2 {
					m[kv[i].(string)] = kv[i+1]
				}
				return m
			}
			cases := []struct {
				name, index string // index "": any, but no seq scan
				values      map[string]any
			}{
				{"oldest first", table + "_pkey", base},
				{"next page", table + "_pkey", with("after_id", int64(50000))},
				{"one queue", table + "_pkey", with("queue", "q")},
				{"failed", table + "_failed", with("status", int16(3))},
				{"one queue, failed", table + "_failed", with("queue", "q", "status", int16(3))},
				{"one queue, ready", "", with("queue", "q", "status", int16(0))},
				{"the backlog queue, ready", "", with("queue", "backlog", "status", int16(0))},
				{"one queue, done", "", with("queue", "q", "status", int16(2))},
				{"error text in a window of ids", table + "_pkey", with("after_id", int64(50000), "max_id", int64(60000), "error_text", "timeout")},
			}
			if table == "job_runs" {
				cases = append(cases, struct {
					name, index string
					values      map[string]any
				}{"metadata in a window of ids", table + "_pkey", with("after_id", int64(50000), "max_id", int64(60000), "metadata", `{"tenant":"t1"}`)})
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
				if (c.index != "" && !plan.usesIndex(c.index)) || plan.seqScans(table) {
					t.Errorf("%s: want a scan of %s and no seq scan, got\n%s", c.name, c.index, plan)
				} else if testing.Verbose() {
					t.Logf("%s:\n%s", c.name, plan)
				}
			}
		})
	}
}
