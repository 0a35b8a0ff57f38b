package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// insert writes one item of table on queue with kind (the topic on the
// tables that have one) and returns its id.
func insert(t *testing.T, pool *pgxpool.Pool, table lease.Table, queue, kind string) int64 {
	t.Helper()
	stmts := map[lease.Table]string{
		lease.JobRuns: `insert into workq.job_runs (queue, kind, payload) values ($1, $2, '{"n":1}') returning id`,
		lease.Outbox:  `insert into workq.outbox (queue, topic, payload) values ($1, $2, '{"n":1}') returning id`,
		lease.Inbox: `insert into workq.inbox (queue, topic, source, message_id, payload, payload_hash)
			values ($1, $2, 'src', gen_random_uuid()::text, '{"n":1}', '\x00') returning id`,
		lease.Timers: `insert into workq.timers (queue, topic, payload, due_time, run_at) values ($1, $2, '{"n":1}', now(), now()) returning id`,
	}
	var id int64
	if err := pool.QueryRow(context.Background(), stmts[table], queue, kind).Scan(&id); err != nil {
		t.Fatalf("insert %s: %v", table, err)
	}
	return id
}

// setStatus moves an item to a finished status the way a completion does.
func setStatus(t *testing.T, pool *pgxpool.Pool, table lease.Table, id int64, status lease.Status) {
	t.Helper()
	_, err := pool.Exec(context.Background(), fmt.Sprintf(
		`update workq.%s set status = $2::smallint, finished_at = now(), last_error = case when $2::smallint = 3 then 'boom' end where id = $1`, table), id, int16(status))
	if err != nil {
		t.Fatalf("set status: %v", err)
	}
}

func status(t *testing.T, pool *pgxpool.Pool, table lease.Table, id int64) (lease.Status, string) {
	t.Helper()
	var s int16
	var lastErr *string
	if err := pool.QueryRow(context.Background(), fmt.Sprintf(`select status, last_error from workq.%s where id = $1`, table), id).Scan(&s, &lastErr); err != nil {
		t.Fatalf("status of %s %d: %v", table, id, err)
	}
	if lastErr == nil {
		return lease.Status(s), ""
	}
	return lease.Status(s), *lastErr
}

func TestActionsOnEveryTable(t *testing.T) {
	for _, table := range lease.Tables {
		t.Run(string(table), func(t *testing.T) {
			ctx := context.Background()
			pool := testdb.Pool(t)
			ready := insert(t, pool, table, "q1", "k.one")
			ready2 := insert(t, pool, table, "q1", "k.one")
			failed := insert(t, pool, table, "q1", "k.two")
			setStatus(t, pool, table, failed, lease.StatusFailed)
			done := insert(t, pool, table, "q2", "k.one")
			setStatus(t, pool, table, done, lease.StatusDone)
			by := admin.Actor{Name: "test:ops", Reason: "customer asked"}

			// Cancel acts on ready (and running, below) items only.
			r, err := admin.Cancel(ctx, pool, table, by, ready, failed, done)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(r.Applied, []int64{ready}) || !slices.Equal(r.Skipped, []int64{failed, done}) || len(r.Requested) != 0 {
				t.Fatalf("cancel: %+v", r)
			}
			st, lastErr := status(t, pool, table, ready)
			if st != lease.StatusCancelled || lastErr != "cancelled by test:ops: customer asked" {
				t.Fatalf("cancelled item: status %v, last_error %q", st, lastErr)
			}
			it, err := admin.Get(ctx, pool, table, ready)
			if err != nil {
				t.Fatal(err)
			}
			if it.Status != "cancelled" || it.State != "cancelled" {
				t.Fatalf("cancelled item reads status %q state %q, want cancelled/cancelled", it.Status, it.State)
			}
			page, err := admin.List(ctx, pool, table, admin.Filter{Status: "cancelled"})
			if err != nil || len(page.Items) != 1 || page.Items[0].ID != ready {
				t.Fatalf("list --status cancelled: %+v, %v", page, err)
			}
			atts, err := admin.Attempts(ctx, pool, table, ready)
			if err != nil {
				t.Fatal(err)
			}
			if len(atts) != 1 || atts[0].Outcome != "cancelled" || atts[0].Worker != "test:ops" || atts[0].Error != "customer asked" {
				t.Fatalf("archive after cancel: %+v", atts)
			}

			// Retry acts on failed and cancelled items only (and undoes the cancel).
			r, err = admin.Retry(ctx, pool, table, by, ready, failed, done, ready2)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(r.Applied, []int64{ready, failed}) || !slices.Equal(r.Skipped, []int64{done, ready2}) {
				t.Fatalf("retry: %+v", r)
			}
			for _, id := range []int64{ready, failed} {
				if st, _ := status(t, pool, table, id); st != lease.StatusReady {
					t.Fatalf("retried %d is %v", id, st)
				}
			}

			// Delete acts on finished items only.
			r, err = admin.Delete(ctx, pool, table, ready, done)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(r.Applied, []int64{done}) || !slices.Equal(r.Skipped, []int64{ready}) {
				t.Fatalf("delete: %+v", r)
			}
			if _, err := admin.Get(ctx, pool, table, done); !errors.Is(err, admin.ErrNotFound) {
				t.Fatalf("get of a deleted item: %v, want ErrNotFound", err)
			}
		})
	}
}

func TestListFiltersAndPages(t *testing.T) {
	for _, table := range lease.Tables {
		t.Run(string(table), func(t *testing.T) {
			ctx := context.Background()
			pool := testdb.Pool(t)
			var want []int64 // q1, k.one, newest first
			for i := 0; i < 7; i++ {
				want = append([]int64{insert(t, pool, table, "q1", "k.one")}, want...)
				insert(t, pool, table, "q2", "k.one")
				insert(t, pool, table, "q1", "k.two")
			}
			failed := insert(t, pool, table, "q1", "k.one")
			setStatus(t, pool, table, failed, lease.StatusFailed)

			f := admin.Filter{Queue: "q1", Kind: "k.one", Status: "ready", Limit: 3}
			var got []int64
			for pages := 0; ; pages++ {
				p, err := admin.List(ctx, pool, table, f)
				if err != nil {
					t.Fatal(err)
				}
				for _, it := range p.Items {
					got = append(got, it.ID)
					if len(it.Payload) == 0 || !json.Valid(it.Payload) {
						t.Fatalf("list item %d carries no payload (%q): a page has every item's payload", it.ID, it.Payload)
					}
				}
				// Items written while paging never shift a later page.
				insert(t, pool, table, "q1", "k.one")
				if p.Next == 0 {
					break
				}
				if pages > 5 {
					t.Fatal("paging does not end")
				}
				f.Before = p.Next
			}
			if !slices.Equal(got, want) {
				t.Fatalf("pages gave %v, want %v", got, want)
			}

			p, err := admin.List(ctx, pool, table, admin.Filter{Status: "failed"})
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Items) != 1 || p.Items[0].ID != failed || p.Items[0].LastError != "boom" {
				t.Fatalf("failed items: %+v", p.Items)
			}
			p, err = admin.List(ctx, pool, table, admin.Filter{CreatedAfter: time.Now().Add(time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Items) != 0 {
				t.Fatalf("items created in the future: %d", len(p.Items))
			}
		})
	}
}

func TestBadRequestsWriteNothing(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	id := insert(t, pool, lease.JobRuns, "q1", "k")
	by := admin.Actor{Name: "test"}
	many := make([]int64, admin.MaxIDs+1)
	for i := range many {
		many[i] = int64(i + 1)
	}
	cases := []struct {
		name string
		call func() error
	}{
		{"unknown table", func() error { _, err := admin.Cancel(ctx, pool, "jobs", by, id); return err }},
		{"no ids", func() error { _, err := admin.Cancel(ctx, pool, lease.JobRuns, by); return err }},
		{"zero id", func() error { _, err := admin.Cancel(ctx, pool, lease.JobRuns, by, id, 0); return err }},
		{"id twice", func() error { _, err := admin.Cancel(ctx, pool, lease.JobRuns, by, id, id); return err }},
		{"too many ids", func() error { _, err := admin.Delete(ctx, pool, lease.JobRuns, many...); return err }},
		{"no actor", func() error { _, err := admin.Cancel(ctx, pool, lease.JobRuns, admin.Actor{Name: " "}, id); return err }},
		{"bad queue", func() error { _, err := admin.List(ctx, pool, lease.JobRuns, admin.Filter{Queue: "a b"}); return err }},
		{"bad status", func() error { _, err := admin.List(ctx, pool, lease.JobRuns, admin.Filter{Status: "gone"}); return err }},
		{"bad limit", func() error {
			_, err := admin.List(ctx, pool, lease.JobRuns, admin.Filter{Limit: admin.MaxLimit + 1})
			return err
		}},
		{"bad cursor", func() error { _, err := admin.List(ctx, pool, lease.JobRuns, admin.Filter{Before: -1}); return err }},
		{"empty time range", func() error {
			now := time.Now()
			_, err := admin.List(ctx, pool, lease.JobRuns, admin.Filter{CreatedAfter: now, CreatedBefore: now})
			return err
		}},
		{"bad id", func() error { _, err := admin.Get(ctx, pool, lease.JobRuns, -3); return err }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			if !errors.Is(err, admin.ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
		})
	}
	if st, _ := status(t, pool, lease.JobRuns, id); st != lease.StatusReady {
		t.Fatalf("a rejected request changed the item: %v", st)
	}
}

func TestQueues(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	insert(t, pool, lease.Outbox, "hooks", "t")
	late := insert(t, pool, lease.Outbox, "hooks", "t")
	if _, err := pool.Exec(ctx, `update workq.outbox set run_at = now() + interval '1 hour' where id = $1`, late); err != nil {
		t.Fatal(err)
	}
	old := insert(t, pool, lease.Outbox, "hooks", "t")
	if _, err := pool.Exec(ctx, `update workq.outbox set run_at = now() - interval '90 seconds' where id = $1`, old); err != nil {
		t.Fatal(err)
	}
	failed := insert(t, pool, lease.Outbox, "hooks", "t")
	setStatus(t, pool, lease.Outbox, failed, lease.StatusFailed)
	// One finished attempt in the archive, as a completion writes it.
	if _, err := pool.Exec(ctx, `insert into workq.runs (run_id, work_table, item_id, queue, attempt, lease_version, owner_token, worker_id, started_at, finished_at, outcome)
		values (workq.workq_run_id('outbox', $1, 1), 'outbox', $1, 'hooks', 1, 1, $2, 'w', now() - interval '2 seconds', now(), 'failed')`, failed, uuid.New()); err != nil {
		t.Fatal(err)
	}
	if _, err := lease.Pause(ctx, pool, lease.Outbox, "hooks", "test", "deploy"); err != nil {
		t.Fatal(err)
	}
	if err := lease.SetLimit(ctx, pool, lease.Timers, "slow", 2); err != nil {
		t.Fatal(err)
	}
	qs, err := admin.Queues(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 2 {
		t.Fatalf("queues: %+v", qs)
	}
	h := qs[0]
	if h.Table != lease.Outbox || h.Queue != "hooks" || h.Ready != 2 || h.Scheduled != 1 || h.Failed != 1 || !h.Paused ||
		h.PausedBy != "test" || h.PauseReason != "deploy" || h.Limit != nil {
		t.Fatalf("outbox/hooks: %+v", h)
	}
	if age := time.Duration(h.OldestReadyAge); age < 89*time.Second || age > 10*time.Minute {
		t.Fatalf("oldest ready age %v, want about 90s", age)
	}
	if h.CompletionsPerSecond != 1.0/60 || h.ClaimsPerSecond != 1.0/60 {
		t.Fatalf("rates: claims %v completions %v, want 1/60 each", h.ClaimsPerSecond, h.CompletionsPerSecond)
	}
	s := qs[1]
	if s.Table != lease.Timers || s.Queue != "slow" || s.Limit == nil || *s.Limit != 2 || s.Ready != 0 {
		t.Fatalf("timers/slow: %+v", s)
	}
}

// Cancelling a running item on any table requests it: the row stays in
// progress with cancel_requested_at, the holder's heartbeat reports it, a
// NOTIFY on workq_cancel names it, and the holder's completion ends it
// cancelled whatever its outcome (a retry here), archived as cancelled. A
// second holder-less request is idempotent; counts and retention see it.
func TestCancelRunningOnEveryTable(t *testing.T) {
	for _, table := range lease.Tables {
		t.Run(string(table), func(t *testing.T) {
			ctx := context.Background()
			pool := testdb.Pool(t)
			id := insert(t, pool, table, "q1", "k.one")
			e := lease.New(pool, table)
			it, ok, err := e.ClaimByID(ctx, id, time.Minute, "w1")
			if err != nil || !ok {
				t.Fatalf("claim: %v %v", ok, err)
			}
			conn, err := pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Release()
			if _, err := conn.Exec(ctx, "listen workq_cancel"); err != nil {
				t.Fatal(err)
			}
			by := admin.Actor{Name: "test:ops", Reason: "stop it"}
			for range 2 {
				r, err := admin.Cancel(ctx, pool, table, by, id)
				if err != nil || !slices.Equal(r.Applied, []int64{id}) || !slices.Equal(r.Requested, []int64{id}) {
					t.Fatalf("cancel of a running item: %+v, %v", r, err)
				}
			}
			nctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			n, err := conn.Conn().WaitForNotification(nctx)
			cancel()
			if err != nil || n.Payload != fmt.Sprintf("%s:%d", table, id) {
				t.Fatalf("notification: %+v, %v", n, err)
			}
			if st, _ := status(t, pool, table, id); st != lease.StatusInProgress {
				t.Fatalf("a running item's cancel changed its status to %v", st)
			}
			beats, err := e.Beat(ctx, []lease.Held{{ID: id, Token: it.OwnerToken}}, time.Minute)
			if err != nil || !slices.Equal(beats.Extended, []int64{id}) || !slices.Equal(beats.CancelRequested, []int64{id}) {
				t.Fatalf("heartbeat: %+v, %v", beats, err)
			}
			a, err := e.Complete(ctx, []lease.Completion{{ID: id, Token: it.OwnerToken, Outcome: lease.Retry, Error: "context canceled"}})
			if err != nil || a.Status[id] != lease.StatusCancelled {
				t.Fatalf("completion: %+v, %v", a, err)
			}
			st, lastErr := status(t, pool, table, id)
			if st != lease.StatusCancelled || lastErr != "cancelled by test:ops: stop it" {
				t.Fatalf("after completion: %v %q", st, lastErr)
			}
			atts, err := admin.Attempts(ctx, pool, table, id)
			if err != nil || len(atts) != 1 || atts[0].Outcome != "cancelled" || atts[0].Attempt != 1 || atts[0].Worker != "w1" {
				t.Fatalf("archive: %+v, %v", atts, err)
			}
			qs, err := admin.Queues(ctx, pool)
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range qs {
				if q.Table == table && q.Queue == "q1" && q.Cancelled != 1 {
					t.Fatalf("queue counts: %+v", q)
				}
			}
			// Finished: cancel skips it; retention deletes it.
			if r, err := admin.Cancel(ctx, pool, table, by, id); err != nil || !slices.Equal(r.Skipped, []int64{id}) {
				t.Fatalf("cancel of a cancelled item: %+v, %v", r, err)
			}
			if _, err := pool.Exec(ctx, fmt.Sprintf("update workq.%s set finished_at = now() - interval '1 day' where id = $1", table), id); err != nil {
				t.Fatal(err)
			}
			deleted, err := e.DeleteFinished(ctx, time.Hour, 100)
			if err != nil || deleted != 1 {
				t.Fatalf("retention: %d, %v", deleted, err)
			}
		})
	}
}
