package test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/workq/workq/internal/jobq"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/workqtype"
)

// fastJobs is a batch that exercises every column EnqueueManyFast writes:
// two queues, payloads of each accepted Go type, priorities, max attempts
// (client default and explicit), and delays (none, whole and fractional
// milliseconds).
func fastJobs(prefix string) []jobq.Job {
	return []jobq.Job{
		{Queue: prefix + "-a", Kind: "k.one"},
		{Queue: prefix + "-b", Kind: "k.two", Payload: map[string]any{"n": 1, "s": "x"}, Priority: 5},
		{Queue: prefix + "-a", Kind: "k.three", Payload: json.RawMessage(`{"raw": [1, 2, 3]}`), MaxAttempts: 9},
		{Queue: prefix + "-a", Kind: "k.four", Payload: []byte(`{"b":true}`), Priority: -3, Delay: 1500 * time.Millisecond},
		{Kind: "k.five", Delay: 2*time.Second + 300*time.Microsecond}, // queue default, delay rounded up to 2001 ms
	}
}

// rowsOf returns every column but id of the job runs with the given ids, in
// id order, as JSON text.
func rowsOf(t *testing.T, ctx context.Context, db workqtype.DB, from, to int64) []string {
	t.Helper()
	rows, err := db.Query(ctx, `select (to_jsonb(j) - 'id')::text from workq.job_runs_all j where id between $1 and $2 order by id`, from, to)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func maxID(t *testing.T, ctx context.Context, db workqtype.DB) int64 {
	t.Helper()
	var id int64
	if err := db.QueryRow(ctx, `select coalesce(max(id), 0) from workq.job_runs_all`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// In one transaction now() is one value, so the rows EnqueueManyFast writes
// must equal EnqueueMany's for the same jobs in every column but id,
// run_at, created_at and updated_at included, whichever columns COPY
// writes (with delays in the batch it writes run_at from the transaction's
// clock; without, it leaves the column default).
func TestEnqueueManyFastRowsMatchEnqueueMany(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	// Without delays COPY leaves run_at to its default; with only default
	// payloads and priorities, those columns too.
	for _, tc := range []struct {
		name             string
		delays, defaults bool
	}{{"mixed", true, false}, {"no delays", false, false}, {"all defaults", false, true}} {
		delays := tc.delays
		t.Run(tc.name, func(t *testing.T) {
			jobs := fastJobs("same")
			for i := range jobs {
				if !tc.delays {
					jobs[i].Delay = 0
				}
				if tc.defaults {
					jobs[i].Payload, jobs[i].Priority, jobs[i].MaxAttempts = nil, 0, 0
				}
			}
			c := jobq.New(jobq.Options{MaxAttempts: 7})
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			start := maxID(t, ctx, tx)
			if _, err := c.EnqueueMany(ctx, tx, jobs); err != nil {
				t.Fatal(err)
			}
			mid := maxID(t, ctx, tx)
			n, err := c.EnqueueManyFast(ctx, tx, jobs)
			if err != nil {
				t.Fatal(err)
			}
			if n != int64(len(jobs)) {
				t.Fatalf("EnqueueManyFast returned %d, want %d", n, len(jobs))
			}
			end := maxID(t, ctx, tx)
			want, got := rowsOf(t, ctx, tx, start+1, mid), rowsOf(t, ctx, tx, mid+1, end)
			if len(want) != len(jobs) || len(got) != len(jobs) {
				t.Fatalf("EnqueueMany wrote %d rows, EnqueueManyFast %d, want %d each", len(want), len(got), len(jobs))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("job %d:\nEnqueueManyFast %s\nEnqueueMany     %s", i, got[i], want[i])
				}
			}
			// The delays really are on the rows (a guard against both paths
			// ignoring them alike).
			var delayed int
			if err := tx.QueryRow(ctx, `select count(*) from workq.job_runs_all where id > $1 and run_at = created_at + interval '1500 ms'`, mid).Scan(&delayed); err != nil {
				t.Fatal(err)
			}
			if wantDelayed := map[bool]int{true: 1, false: 0}[delays]; delayed != wantDelayed {
				t.Fatalf("%d rows with run_at = created_at + 1.5 s, want %d", delayed, wantDelayed)
			}
		})
	}
}

// RunAt, which EnqueueMany does not take, is written as Enqueue writes it.
func TestEnqueueManyFastRunAtMatchesEnqueue(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	c := jobq.New(jobq.Options{})
	at := time.Date(2031, 5, 6, 7, 8, 9, 123456789, time.UTC) // nanoseconds: both paths truncate to µs
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	job := jobq.Job{Queue: "at", Kind: "k", RunAt: at, Payload: map[string]int{"x": 1}}
	start := maxID(t, ctx, tx)
	if _, err := c.Enqueue(ctx, tx, job); err != nil {
		t.Fatal(err)
	}
	// A batch mixing RunAt, Delay and neither, after the Enqueue.
	if _, err := c.EnqueueManyFast(ctx, tx, []jobq.Job{job, {Queue: "at", Kind: "k", Delay: time.Second}, {Queue: "at", Kind: "k"}}); err != nil {
		t.Fatal(err)
	}
	rows := rowsOf(t, ctx, tx, start+1, start+4)
	if len(rows) != 4 || rows[0] != rows[1] {
		t.Fatalf("Enqueue wrote %s\nEnqueueManyFast wrote %s", rows[0], rows[1:])
	}
	var okDelay, okNow bool
	err = tx.QueryRow(ctx, `select (select run_at = created_at + interval '1 s' from workq.job_runs_all where id = $1),
		(select run_at = created_at from workq.job_runs_all where id = $2)`, start+3, start+4).Scan(&okDelay, &okNow)
	if err != nil {
		t.Fatal(err)
	}
	if !okDelay || !okNow {
		t.Fatalf("run_at of the delayed row is created_at + 1 s: %v; of the plain row created_at: %v", okDelay, okNow)
	}
}

// EnqueueManyFast takes each kind of handle: a pool and a connection not in
// a transaction (it commits a transaction of its own), a pgx.Tx and a
// connection inside an SQL BEGIN (it writes in the caller's transaction, so
// the caller's rollback removes the rows), and a pool connection.
func TestEnqueueManyFastOnEachHandle(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	c := jobq.New(jobq.Options{})
	count := func(queue string) int {
		var n int
		if err := pool.QueryRow(ctx, `select count(*) from workq.job_runs_all where queue = $1`, queue).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	jobs := func(queue string) []jobq.Job {
		return []jobq.Job{{Queue: queue, Kind: "k"}, {Queue: queue, Kind: "k", Delay: time.Minute}, {Queue: queue, Kind: "k"}}
	}
	cases := []struct {
		name     string
		run      func(queue string) (int64, error)
		wantRows int
	}{
		{"pool", func(q string) (int64, error) { return c.EnqueueManyFast(ctx, pool, jobs(q)) }, 3},
		{"pgx.Conn", func(q string) (int64, error) {
			conn := mustConnect(t, pool.Config().ConnString())
			return c.EnqueueManyFast(ctx, conn, jobs(q))
		}, 3},
		{"pgxpool.Conn", func(q string) (int64, error) {
			conn, err := pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Release()
			return c.EnqueueManyFast(ctx, conn, jobs(q))
		}, 3},
		{"pgx.Tx committed", func(q string) (int64, error) {
			var n int64
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				var err error
				n, err = c.EnqueueManyFast(ctx, tx, jobs(q))
				return err
			})
			return n, err
		}, 3},
		{"pgx.Tx rolled back", func(q string) (int64, error) {
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			n, err := c.EnqueueManyFast(ctx, tx, jobs(q))
			if rerr := tx.Rollback(ctx); rerr != nil {
				t.Fatal(rerr)
			}
			return n, err
		}, 0},
		{"pgx.Conn in SQL BEGIN, rolled back", func(q string) (int64, error) {
			conn := mustConnect(t, pool.Config().ConnString())
			if _, err := conn.Exec(ctx, "begin"); err != nil {
				t.Fatal(err)
			}
			n, err := c.EnqueueManyFast(ctx, conn, jobs(q))
			if _, rerr := conn.Exec(ctx, "rollback"); rerr != nil {
				t.Fatal(rerr)
			}
			return n, err
		}, 0},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			queue := fmt.Sprintf("handle-%d", i)
			n, err := tc.run(queue)
			if err != nil {
				t.Fatal(err)
			}
			if n != 3 {
				t.Fatalf("returned %d, want 3", n)
			}
			if got := count(queue); got != tc.wantRows {
				t.Fatalf("%d rows after the caller's end of transaction, want %d", got, tc.wantRows)
			}
		})
	}
}

// A connection whose SQL transaction has failed is refused with a clear
// error, not used (our BEGIN would only warn, and our COMMIT would end the
// caller's transaction).
func TestEnqueueManyFastRefusesFailedTransaction(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	conn := mustConnect(t, pool.Config().ConnString())
	if _, err := conn.Exec(ctx, "begin"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "select 1/0"); err == nil {
		t.Fatal("division by zero succeeded")
	}
	_, err := jobq.New(jobq.Options{}).EnqueueManyFast(ctx, conn, []jobq.Job{{Kind: "k"}})
	if err == nil || !strings.Contains(err.Error(), "transaction has failed") {
		t.Fatalf("err = %v, want one saying the transaction has failed", err)
	}
}

// A batch with one bad job is refused whole with ErrInvalid naming the job,
// and writes nothing (no row, and no NOTIFY: the listener's next
// notification is a marker sent afterwards).
func TestEnqueueManyFastValidationWritesNothing(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	listener := listen(t, ctx, pool)
	good := jobq.Job{Queue: "v", Kind: "k"}
	cases := []struct {
		name string
		bad  jobq.Job
		want string
	}{
		{"dedup key", jobq.Job{Kind: "k", DedupKey: "x"}, "no dedup key"},
		{"bad kind", jobq.Job{Kind: "no spaces"}, "kind"},
		{"empty kind", jobq.Job{}, "kind"},
		{"bad queue", jobq.Job{Queue: "a b", Kind: "k"}, "queue"},
		{"array payload", jobq.Job{Kind: "k", Payload: json.RawMessage(`[1]`)}, "JSON object"},
		{"NUL in payload", jobq.Job{Kind: "k", Payload: json.RawMessage(`{"a":"\u0000"}`)}, "NUL"},
		{"negative delay", jobq.Job{Kind: "k", Delay: -time.Second}, "negative"},
		{"run at and delay", jobq.Job{Kind: "k", Delay: time.Second, RunAt: time.Now()}, "not both"},
		{"max attempts", jobq.Job{Kind: "k", MaxAttempts: 1001}, "max attempts"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := jobq.New(jobq.Options{})
			n, err := c.EnqueueManyFast(ctx, pool, []jobq.Job{good, good, tc.bad})
			if !errors.Is(err, workqtype.ErrInvalid) || !strings.Contains(err.Error(), "job 2") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrInvalid for job 2 mentioning %q", err, tc.want)
			}
			if n != 0 {
				t.Fatalf("returned %d, want 0", n)
			}
			var rows int
			if err := pool.QueryRow(ctx, `select count(*) from workq.job_runs_all`).Scan(&rows); err != nil {
				t.Fatal(err)
			}
			if rows != 0 {
				t.Fatalf("%d rows written", rows)
			}
			if _, err := pool.Exec(ctx, `select pg_notify($1, 'marker')`, workqtype.NotifyChannel("", "job_runs")); err != nil {
				t.Fatal(err)
			}
			if got := nextNotification(t, ctx, listener); got != "marker" {
				t.Fatalf("notification %q before the marker", got)
			}
		})
	}
}

// The NOTIFY travels with the rows: on a pool it is delivered (once per
// queue of the batch); in the caller's transaction only at its commit, and
// never after a rollback. Notifications arrive in commit order, so a marker
// sent from another session shows what was (not) delivered before it,
// without waiting for an absence.
func TestEnqueueManyFastNotifiesOnlyWithTheRows(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	listener := listen(t, ctx, pool)
	marker := func() {
		t.Helper()
		if _, err := pool.Exec(ctx, `select pg_notify($1, 'marker')`, workqtype.NotifyChannel("", "job_runs")); err != nil {
			t.Fatal(err)
		}
	}
	batch := func(q string) []jobq.Job {
		return []jobq.Job{{Queue: q + "-a", Kind: "k"}, {Queue: q + "-b", Kind: "k"}, {Queue: q + "-a", Kind: "k"}}
	}

	t.Run("pool", func(t *testing.T) {
		if _, err := jobq.New(jobq.Options{}).EnqueueManyFast(ctx, pool, batch("pool")); err != nil {
			t.Fatal(err)
		}
		marker()
		got := map[string]int{}
		for n := nextNotification(t, ctx, listener); n != "marker"; n = nextNotification(t, ctx, listener) {
			got[n]++
		}
		if len(got) != 2 || got["pool-a"] != 1 || got["pool-b"] != 1 {
			t.Fatalf("notifications %v, want one each for pool-a and pool-b", got)
		}
	})
	t.Run("transaction committed", func(t *testing.T) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if _, err := jobq.New(jobq.Options{}).EnqueueManyFast(ctx, tx, batch("commit")); err != nil {
			t.Fatal(err)
		}
		marker() // before the commit: nothing of ours may precede it
		if got := nextNotification(t, ctx, listener); got != "marker" {
			t.Fatalf("notification %q delivered before the enqueue committed", got)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		got := map[string]int{nextNotification(t, ctx, listener): 1}
		got[nextNotification(t, ctx, listener)]++
		if got["commit-a"] != 1 || got["commit-b"] != 1 {
			t.Fatalf("after commit: notifications %v, want one each for commit-a and commit-b", got)
		}
	})
	t.Run("transaction rolled back", func(t *testing.T) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := jobq.New(jobq.Options{}).EnqueueManyFast(ctx, tx, batch("rollback")); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		marker()
		if got := nextNotification(t, ctx, listener); got != "marker" {
			t.Fatalf("notification %q delivered for a rolled-back enqueue", got)
		}
	})
}

// listen returns a connection that listens on the job-run channel.
func listen(t *testing.T, ctx context.Context, pool *pgxpool.Pool) *pgx.Conn {
	t.Helper()
	conn := mustConnect(t, pool.Config().ConnString())
	if _, err := conn.Exec(ctx, "listen "+workqtype.NotifyChannel("", "job_runs")); err != nil {
		t.Fatal(err)
	}
	return conn
}

// nextNotification returns the payload of the listener's next notification;
// the timeout only turns a missing notification into a failure.
func nextNotification(t *testing.T, ctx context.Context, conn *pgx.Conn) string {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	n, err := conn.WaitForNotification(wctx)
	if err != nil {
		t.Fatalf("waiting for a notification: %v", err)
	}
	return n.Payload
}
