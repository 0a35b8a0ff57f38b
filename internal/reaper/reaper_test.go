package reaper_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/reaper"
	"github.com/workq/workq/internal/testdb"
)

// The reaper requeues expired leases on every table, fails the exhausted
// ones, and a second round finds nothing: it is idempotent.
func TestReaperRunOnceAllTables(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	q := gen.New(pool)
	payload := json.RawMessage(`{}`)
	// Per table: three rows with max_attempts 3 and one with max_attempts 1,
	// whose only attempt expiring must fail it.
	for i := range 4 {
		attempts := int32(3)
		if i == 3 {
			attempts = 1
		}
		if _, err := q.JobRunsEnqueue(ctx, gen.JobRunsEnqueueParams{Queue: "r", Kind: "k", Payload: payload, MaxAttempts: attempts}); err != nil {
			t.Fatal(err)
		}
		if _, err := q.OutboxEnqueue(ctx, gen.OutboxEnqueueParams{Queue: "r", Topic: "t", Payload: payload, Headers: json.RawMessage(`{}`), MaxAttempts: attempts}); err != nil {
			t.Fatal(err)
		}
		if _, err := q.InboxReceive(ctx, gen.InboxReceiveParams{Queues: []string{"r"}, Sources: []string{"s"}, MessageIds: []string{string(rune('a' + i))},
			Topics: []string{""}, Payloads: []string{string(payload)}, Priorities: []int16{0}, MaxAttempts: []int32{attempts}}); err != nil {
			t.Fatal(err)
		}
		if _, err := q.TimersEnqueue(ctx, gen.TimersEnqueueParams{Queue: "r", Topic: "t", Payload: payload, MaxAttempts: attempts}); err != nil {
			t.Fatal(err)
		}
	}
	for _, table := range lease.Tables {
		c, err := lease.New(pool, table).Claim(ctx, lease.ClaimParams{Queue: "r", Max: 10, Lease: time.Millisecond, WorkerID: "crashed"})
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Items) != 4 {
			t.Fatalf("%s: claimed %d rows, want 4", table, len(c.Items))
		}
	}
	time.Sleep(20 * time.Millisecond) // past the 1 ms leases, by any clock

	r, err := reaper.New(pool, time.Second, 2, nil) // batch 2: RunOnce must loop
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, table := range lease.Tables {
		if g := got[table]; g.Requeued != 3 || g.Failed != 1 || len(g.ByQueue) != 1 || g.ByQueue["r"] != (lease.QueueReaped{Requeued: 3, Failed: 1}) {
			t.Errorf("%s: reaped %+v, want 3 requeued and 1 failed, all of queue r", table, g)
		}
		var ready, failed, expiredRuns int
		err := pool.QueryRow(ctx, `select count(*) filter (where status = $1), count(*) filter (where status = $2 and last_error like '%no attempts left%')
			from workq.`+string(table), lease.StatusReady, lease.StatusFailed).Scan(&ready, &failed)
		if err != nil {
			t.Fatal(err)
		}
		if err := pool.QueryRow(ctx, `select count(*) from workq.runs where work_table = $1 and outcome = 'expired' and worker_id = 'crashed'`, string(table)).Scan(&expiredRuns); err != nil {
			t.Fatal(err)
		}
		if ready != 3 || failed != 1 || expiredRuns != 4 {
			t.Errorf("%s: ready=%d failed=%d expired runs=%d, want 3, 1, 4", table, ready, failed, expiredRuns)
		}
	}
	again, err := r.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 0 {
		t.Fatalf("second round reaped %+v, want nothing", again)
	}
}

func TestReaperRejectsBadSettings(t *testing.T) {
	for _, tc := range []struct {
		interval time.Duration
		batch    int
	}{{0, 10}, {-time.Second, 10}, {time.Second, 0}} {
		if _, err := reaper.New(nil, tc.interval, tc.batch, nil); err == nil {
			t.Errorf("reaper.New(%s, %d) accepted", tc.interval, tc.batch)
		}
	}
}

// Defect 5: one table whose reap fails must not stop the others. The outbox
// (second in the registry) is made unreadable; the expired leases of the
// tables before and after it are reaped all the same, and the failure is
// returned and counted.
func TestReaperGoesOnPastAFailingTable(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	q := gen.New(pool)
	payload := json.RawMessage(`{}`)
	if _, err := q.JobRunsEnqueue(ctx, gen.JobRunsEnqueueParams{Queue: "r", Kind: "k", Payload: payload, MaxAttempts: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.TimersEnqueue(ctx, gen.TimersEnqueueParams{Queue: "r", Topic: "t", Payload: payload, MaxAttempts: 3}); err != nil {
		t.Fatal(err)
	}
	lapsed := map[lease.Table]int64{}
	for _, table := range []lease.Table{lease.JobRuns, lease.Timers} {
		c, err := lease.New(pool, table).Claim(ctx, lease.ClaimParams{Queue: "r", Max: 1, Lease: time.Millisecond, WorkerID: "w"})
		if err != nil || len(c.Items) != 1 {
			t.Fatalf("%s: claim: %v, %d rows; want 1", table, err, len(c.Items))
		}
		lapsed[table] = c.Items[0].ID
	}
	time.Sleep(20 * time.Millisecond) // past the 1 ms leases, by any clock
	if _, err := pool.Exec(ctx, "alter table workq.outbox rename to outbox_unreachable"); err != nil {
		t.Fatal(err)
	}
	r, err := reaper.New(pool, time.Second, 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.RunOnce(ctx)
	if err == nil || !strings.Contains(err.Error(), "outbox") {
		t.Errorf("RunOnce error %v, want the outbox's failure", err)
	}
	if got[lease.JobRuns].Requeued != 1 || got[lease.Timers].Requeued != 1 {
		t.Errorf("reaped %+v; want job_runs and timers each requeued 1 despite the outbox failing", got)
	}
	if r.Errors() != 1 {
		t.Errorf("reaper counted %d failed tables, want 1", r.Errors())
	}
	for table, id := range lapsed {
		var st lease.Status
		if err := pool.QueryRow(ctx, "select status from workq."+string(table)+" where id = $1", id).Scan(&st); err != nil {
			t.Fatal(err)
		}
		if st != lease.StatusReady {
			t.Errorf("%s %d: status %s after the reap, want %s", table, id, st, lease.StatusReady)
		}
	}
}
