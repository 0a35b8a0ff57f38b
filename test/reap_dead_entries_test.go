package test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/testdb"
)

// Issue 32: a reap steps over the in-progress index's entries of rows
// long completed without reading their heap pages again, once one reap
// has passed them. Between two vacuums job_runs_in_progress keeps an
// entry for every row a claim took; the reap runs once a second per
// queue. workq_expired_leases reads the index by an ordered index scan,
// which marks the entries of rows dead to every transaction as it passes
// (killed index tuples); the bitmap scan PostgreSQL had chosen for the
// reap read the heap page of every entry on every call (design.md §4.3).
func TestReapStepsOverTheEntriesOfCompletedRows(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn := completedRowsEntries(t, ctx, false)
	query, settings := expiredLeasesQuery(t, ctx, conn, "job_runs")
	// Shared buffers one reap's candidate query reads, under settings.
	reap := func(settings []string) float64 {
		t.Helper()
		defer withSettings(t, ctx, conn, settings)()
		plan, _ := explainAnalyzeRolledBack(t, ctx, conn, "job_runs", query, "q", int32(100))
		return plan.buffers()
	}

	bitmap := []string{"enable_indexscan=off", "enable_seqscan=off"}
	// The bitmap scan first: it marks nothing, and once the index scan has
	// marked the entries a bitmap scan steps over them too.
	b1, b2 := reap(bitmap), reap(bitmap)
	i1, i2 := reap(settings), reap(settings)
	t.Logf("shared buffers read by two reaps in a row: bitmap scan %.0f, %.0f; the function's index scan %.0f, %.0f", b1, b2, i1, i2)
	// The bitmap scan reads the completed rows' heap pages every time (the
	// contrast that shows what is measured); the index scan once.
	if b2 < b1/2 {
		t.Errorf("the bitmap scan's second reap read %.0f buffers, its first %.0f: expected about as many", b2, b1)
	}
	if i2 > b2/4 {
		t.Errorf("the index scan's second reap read %.0f buffers, more than a quarter of the bitmap scan's %.0f", i2, b2)
	}
}

// completedRowsEntries connects to a new database whose
// job_runs_in_progress holds the entries of 20,000 rows claimed and since
// completed (deleted, as a done job's row moves to job_runs_done), and of
// 10 rows still in progress, none expired, on queue q, kind k. Keyed: the
// rows have limit keys key0 to key2 (job_runs_key_running holds their
// entries too), and the table's statistics were taken while all of them
// were in progress, as an analyze can catch a burst (the keyed count plans
// a bitmap scan with those, an index-only scan with none); otherwise it
// has none. The commits are durable: a row deleted by a commit not yet
// flushed (the test server's synchronous_commit is off) cannot be hinted
// dead, nor its entry marked.
func completedRowsEntries(t *testing.T, ctx context.Context, keyed bool) *pgx.Conn {
	t.Helper()
	conn := mustConnect(t, testdb.URL(t))
	key, analyze := "null", "select"
	if keyed {
		key, analyze = "'key' || (g % 3)", "analyze workq.job_runs"
	}
	for _, s := range []string{
		`set synchronous_commit = on`,
		`insert into workq.job_runs (queue, kind, status, owner_token, locked_until, attempts, lease_version, limit_key)
		 select 'q', 'k', 1, gen_random_uuid(), now() + interval '1 hour', 1, 1, ` + key + ` from generate_series(1, 20010) g`,
		analyze,
		`delete from workq.job_runs where id <= (select min(id) + 19999 from workq.job_runs)`,
	} {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	return conn
}

// The same for a queue with a global limit W: each of its claims counts
// the queue's leases (workq_queue_budget), by an ordered index scan since
// migration 00031, so a count steps over the entries an earlier one
// passed. A bitmap scan read the heap page of every one on every claim.
func TestLimitedQueueBudgetStepsOverTheEntriesOfCompletedRows(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn := completedRowsEntries(t, ctx, false)
	if _, err := conn.Exec(ctx, `insert into workq.queue_limits (work_table, queue, max_in_progress) values ('job_runs', 'q', 15)`); err != nil {
		t.Fatal(err)
	}
	countTwice(t, "budget", 5, func() (int32, int64) { // W 15 less the 10 in progress
		return heapPagesRead(t, ctx, conn, `select workq.workq_claim_budget('job_runs', 'q', 100)`)
	})
}

// The same for a concurrency rule of a queue or of a kind under flow
// control: a flow claim counts the scope's items in progress
// (workq_flow_left) by an ordered index scan since migration 00032. A
// bitmap scan read the heap page of every entry on every claim.
func TestFlowConcurrencyCountStepsOverTheEntriesOfCompletedRows(t *testing.T) {
	for _, scope := range []struct{ name, kind string }{
		{"queue", ""},
		{"kind", "k"},
	} {
		t.Run(scope.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			conn := completedRowsEntries(t, ctx, false)
			if _, err := conn.Exec(ctx, `insert into workq.flow_queues (work_table, queue) values ('job_runs', 'q')`); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Exec(ctx, `insert into workq.flow_limits (work_table, queue, kind, concurrency) values ('job_runs', 'q', $1, 15)`, scope.kind); err != nil {
				t.Fatal(err)
			}
			countTwice(t, "room", 5, func() (int32, int64) { // concurrency 15 less the 10 in progress
				return heapPagesRead(t, ctx, conn, `select workq.workq_flow_left('job_runs', 'q', $1, '')`, scope.kind)
			})
		})
	}
}

// The same for a rule per key with a concurrency: a keyed flow claim
// (workq_flow_pick) counts the in-progress rows of every key it visits,
// by an index scan since migration 00033. A bitmap scan, which statistics
// taken during a burst chose, read the heap page of every entry of those
// keys on every claim.
func TestFlowKeyCountStepsOverTheEntriesOfCompletedRows(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn := completedRowsEntries(t, ctx, true)
	for _, s := range []string{
		// Ready rows of the three keys, for the claim to visit them.
		`insert into workq.job_runs (queue, kind, limit_key) select 'q', 'k', 'key' || (g % 3) from generate_series(1, 30) g`,
		`insert into workq.flow_queues (work_table, queue) values ('job_runs', 'q')`,
		`insert into workq.flow_limits (work_table, queue, per_key, concurrency) values ('job_runs', 'q', true, 15)`,
	} {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	countTwice(t, "picks", 10, func() (int32, int64) { // each key has room for 11 or 12
		return heapPagesRead(t, ctx, conn, `select jsonb_array_length(workq.workq_flow_pick('job_runs', 'q', 10, '')->'ids')`)
	})
}

// heapPagesRead runs query, which returns one integer, in a transaction it
// rolls back, and returns its answer and the heap pages of job_runs it
// read.
func heapPagesRead(t *testing.T, ctx context.Context, conn *pgx.Conn, query string, args ...any) (n int32, heapBlocks int64) {
	t.Helper()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// The backend's pending counts, which also hold earlier transactions'
	// until they are reported: the query's are the difference.
	fetched := func() (c int64) {
		t.Helper()
		if err := tx.QueryRow(ctx, `select pg_stat_get_xact_blocks_fetched('workq.job_runs'::regclass)`).Scan(&c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	before := fetched()
	if err := tx.QueryRow(ctx, query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n, fetched() - before
}

// countTwice runs count, which answers what and the heap pages it read,
// twice in a row as two claims would: both answers must be want, and the
// second must step over the entries the first passed (a quarter of its
// pages at most, of at least 100: the completed rows' entries are read).
func countTwice(t *testing.T, what string, want int32, count func() (n int32, heapBlocks int64)) {
	t.Helper()
	n1, h1 := count()
	n2, h2 := count()
	t.Logf("two claims' %s %d and %d; heap pages read by their counts %d and %d", what, n1, n2, h1, h2)
	if n1 != want || n2 != want {
		t.Errorf("%s %d and %d, want %d", what, n1, n2, want)
	}
	if h1 < 100 || h2 > h1/4 {
		t.Errorf("the counts read %d and then %d heap pages: want the second to step over the entries the first marked", h1, h2)
	}
}
