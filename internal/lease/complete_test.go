package lease_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
)

// A retry that has no attempt left ends the item failed: its run_at must not
// move to the backoff time it will never be claimed at (a failed item
// showing a RUN AT after it ended), while a retry with attempts left is due
// after its delay, on every table.
func TestExhaustedRetryKeepsRunAt(t *testing.T) {
	inserts := map[lease.Table]string{
		lease.JobRuns: `insert into workq.job_runs (queue, kind, payload, max_attempts) values ('q', 'k', '{}', $1) returning id`,
		lease.Outbox:  `insert into workq.outbox (queue, topic, payload, max_attempts) values ('q', 't', '{}', $1) returning id`,
		lease.Inbox: `insert into workq.inbox (queue, topic, source, message_id, payload, payload_hash, max_attempts)
			values ('q', 't', 'src', gen_random_uuid()::text, '{}', '\x00', $1) returning id`,
		lease.Timers: `insert into workq.timers (queue, topic, payload, due_time, run_at, max_attempts) values ('q', 't', '{}', now(), now(), $1) returning id`,
	}
	cases := []struct {
		name        string
		maxAttempts int32
		wantStatus  lease.Status
		wantFuture  bool // run_at an hour ahead (the retry's delay)
	}{
		{"attempts left: due after the delay", 2, lease.StatusReady, true},
		{"no attempt left: failed, run_at unchanged", 1, lease.StatusFailed, false},
	}
	for _, table := range lease.Tables {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%s", table, c.name), func(t *testing.T) {
				ctx := context.Background()
				pool := testdb.Pool(t)
				var id int64
				if err := pool.QueryRow(ctx, inserts[table], c.maxAttempts).Scan(&id); err != nil {
					t.Fatal(err)
				}
				e := lease.New(pool, table)
				it, ok, err := e.ClaimByID(ctx, id, time.Minute, "w1")
				if err != nil || !ok {
					t.Fatalf("claim: %v %v", ok, err)
				}
				a, err := e.Complete(ctx, []lease.Completion{{ID: id, Token: it.OwnerToken, Outcome: lease.Retry, Error: "boom", Delay: time.Hour}})
				if err != nil || a.Status[id] != c.wantStatus {
					t.Fatalf("complete: %+v, %v; want status %v", a, err, c.wantStatus)
				}
				var future, finished bool
				err = pool.QueryRow(ctx, fmt.Sprintf(`select run_at > now() + interval '30 minutes', finished_at is not null and run_at <= finished_at
					from workq.%s where id = $1`, table), id).Scan(&future, &finished)
				if err != nil {
					t.Fatal(err)
				}
				if future != c.wantFuture {
					t.Errorf("run_at an hour ahead: %v, want %v", future, c.wantFuture)
				}
				if c.wantStatus == lease.StatusFailed && !finished {
					t.Errorf("a failed item's run_at is after its finished_at (or finished_at is unset)")
				}
			})
		}
	}
}
