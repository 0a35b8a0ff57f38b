package test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/workq/workq/internal/testdb"
)

// The inbox's own statements use its indexes on a table of 100k rows, with
// fresh statistics and with statistics gathered while it was empty: the
// receive finds stored keys by the unique (source, message_id) index, one
// probe per input row, never by a scan; the de-duplication window deletes
// by inbox_finished; lookups and listing use their indexes.
func TestInboxPlans(t *testing.T) {
	for _, stale := range []bool{false, true} {
		name := "fresh statistics"
		if stale {
			name = "stale statistics"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			conn := mustConnect(t, testdb.URL(t))
			if stale {
				if _, err := conn.Exec(ctx, "analyze workq.inbox"); err != nil {
					t.Fatal(err)
				}
				fillRows(t, ctx, conn, "inbox")
			} else {
				fillForPlans(t, ctx, conn, "inbox")
			}
			// A batch of 500: half stored keys, half new ones.
			const n = 500
			var queues, sources, ids, topics, payloads []string
			var prios []int16
			var attempts []int32
			for i := range n {
				id := fmt.Sprintf("m%d", 1000+i)
				if i%2 == 1 {
					id = fmt.Sprintf("new-%d", i)
				}
				queues, sources, ids = append(queues, "q"), append(sources, "s"), append(ids, id)
				topics, payloads = append(topics, "t"), append(payloads, `{"k": 1}`)
				prios, attempts = append(prios, 0), append(attempts, 4)
			}
			for _, c := range []struct {
				query, index string
				args         map[string]any
			}{
				{"InboxReceive", "inbox_source_message", map[string]any{
					"queues": queues, "sources": sources, "message_ids": ids, "topics": topics, "payloads": payloads,
					"priorities": prios, "max_attempts": attempts, "notify": true}},
				{"InboxLookup", "inbox_source_message", map[string]any{"sources": sources[:5], "message_ids": ids[:5]}},
				{"InboxDeleteProcessed", "inbox_finished", map[string]any{"older_than_ms": int64(-3_600_000), "max_rows": int32(1000)}},
			} {
				sql, params := namedQuery(t, "inbox", c.query)
				plan := explainCustom(t, ctx, conn, sql, argsFor(t, params, c.args)...)
				if plan.seqScans("inbox") || !plan.usesIndex(c.index) {
					t.Errorf("%s does not use %s:\n%s", c.query, c.index, plan)
				}
			}
		})
	}
}
