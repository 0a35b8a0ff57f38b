package test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workq/workq/internal/testdb"
)

// The timer claim reads only due timers: with 100k timers due in the future
// and a few due now in the same queue, it reads the due ones from the claim
// index (run_at <= now() bounds the index scan) and never the future ones.
// TimersNextDue reads one index entry, TimersCancelOne one row by key.
func TestTimersPlansWithManyFutureTimers(t *testing.T) {
	url := testdb.URL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn := mustConnect(t, url)
	const due = 10
	if _, err := conn.Exec(ctx, `
insert into workq.timers (queue, topic, due_time, run_at)
select 'q', 't', d, d from (
    select case when i <= $1 then now() - i * interval '1 second'
                else now() + i * interval '1 second' end as d
    from generate_series(1, 100000) i) s`, due); err != nil {
		t.Fatalf("fill timers: %v", err)
	}
	if _, err := conn.Exec(ctx, "analyze workq.timers"); err != nil {
		t.Fatal(err)
	}

	claimSQL, claimParams := namedQuery(t, "timers", "TimersClaim")
	plan, touched := explainAnalyzeRolledBack(t, ctx, conn, "timers", claimSQL, argsFor(t, claimParams, map[string]any{
		"queue": "q", "max_rows": int32(100), "lease_ms": int64(30_000), "worker_id": "w", "owner_token": uuid.New(),
		"resume_run_at": (*time.Time)(nil), // no resume point: the claim reads from the queue's start
	})...)
	if plan.seqScans("timers") {
		t.Errorf("TimersClaim scans timers sequentially:\n%s", plan)
	}
	cand, ok := plan.subplan("CTE candidates")
	if !ok {
		t.Fatalf("TimersClaim plan has no CTE candidates:\n%s", plan)
	}
	if !cand.usesIndex("timers_claim") {
		t.Errorf("candidates do not use timers_claim:\n%s", cand)
	}
	// The due rows, each read twice (candidates, then the update by id).
	if touched > 2*due+2 {
		t.Errorf("claiming %d due timers among 100k future ones read %.0f rows of timers (want at most %d):\n%s",
			due, touched, 2*due+2, plan)
	}

	nextSQL, nextParams := namedQuery(t, "timers", "TimersNextDue")
	plan, touched = explainAnalyzeRolledBack(t, ctx, conn, "timers", nextSQL, argsFor(t, nextParams, map[string]any{"queue": "q"})...)
	if !plan.usesIndex("timers_claim") || touched > 1 {
		t.Errorf("TimersNextDue read %.0f rows (want 1 from timers_claim):\n%s", touched, plan)
	}

	cancelSQL, cancelParams := namedQuery(t, "timers", "TimersCancelOne")
	plan, touched = explainAnalyzeRolledBack(t, ctx, conn, "timers", cancelSQL, argsFor(t, cancelParams, map[string]any{"id": int64(50_000)})...)
	if plan.seqScans("timers") || touched > 2 {
		t.Errorf("TimersCancelOne read %.0f rows of timers (want the one row, by key):\n%s", touched, plan)
	}
}
