package maintain_test

import (
	"context"
	"testing"
	"time"

	"github.com/workq/workq/internal/maintain"
	"github.com/workq/workq/internal/testdb"
)

// Retention deletes the flow states of idle limit keys (untouched for
// longer than any rate period, neither throttled nor adapting) and ends
// the flow control a throttle alone began, once the throttle is over;
// what is still needed stays.
func TestRetentionPurgesIdleFlowStates(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	for _, sql := range []string{
		`insert into workq.flow_queues (work_table, queue) values ('job_runs', 'keys')`,
		`insert into workq.flow_limits (work_table, queue, per_key, rate) values ('job_runs', 'keys', true, 5)`,
		`insert into workq.flow_state (work_table, queue, key, updated_at) values
			('job_runs', 'keys', 'idle', now() - interval '2 days'),
			('job_runs', 'keys', 'recent', now() - interval '1 hour')`,
		`insert into workq.flow_state (work_table, queue, key, updated_at, throttled_until) values
			('job_runs', 'keys', 'throttled', now() - interval '2 days', now() + interval '1 hour')`,
		// A throttle that ended long ago put these two queues under flow
		// control; one of them is still adapting.
		`insert into workq.flow_queues (work_table, queue, auto) values ('outbox', 'over', true), ('outbox', 'adapting', true)`,
		`insert into workq.flow_state (work_table, queue, throttled_until, adapt_rate, adapt_step, adapt_at, adapt_end) values
			('outbox', 'over', now() - interval '1 hour', null, null, null, null),
			('outbox', 'adapting', now() - interval '1 second', 10, 1, now() - interval '2 seconds', 100)`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%v\n%s", err, sql)
		}
	}
	task, err := maintain.RetentionTask(pool, time.Second, maintain.Retention{Batch: 1})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := task.Run(ctx, 0); err != nil || n != 2 {
		t.Fatalf("retention round: %d rows, %v; want the idle key and the queue whose throttle is over", n, err)
	}
	var keys, queues string
	if err := pool.QueryRow(ctx, `select string_agg(key, ',' order by key) from workq.flow_state where queue = 'keys'`).Scan(&keys); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `select string_agg(queue, ',' order by queue) from workq.flow_queues`).Scan(&queues); err != nil {
		t.Fatal(err)
	}
	if keys != "recent,throttled" || queues != "adapting,keys" {
		t.Fatalf("after retention: keys %q, queues %q; want recent,throttled and adapting,keys", keys, queues)
	}
}
