package jobq

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/otelx"
	"github.com/workq/workq/workqtype"
)

// CopyDB is what EnqueueManyFast runs on: a *pgxpool.Pool, a *pgx.Conn, a
// *pgxpool.Conn or a pgx.Tx all satisfy it. It is DB plus the two methods
// a COPY enqueue needs: CopyFrom, and Begin for the transaction that holds
// the COPY and its NOTIFY together.
type CopyDB interface {
	DB
	Begin(ctx context.Context) (pgx.Tx, error)
	CopyFrom(ctx context.Context, tableName pgx.Identifier, columnNames []string, rowSrc pgx.CopyFromSource) (int64, error)
}

// EnqueueManyFast adds many job runs with the COPY protocol and returns how
// many it added (always len(jobs) on success). It is the fastest bulk path:
// PostgreSQL inserts the rows in batches, without parsing, planning or
// unnesting arrays, and returns nothing per row. The rows are the ones
// EnqueueMany would write for the same jobs, column for column.
//
// Validation is EnqueueMany's (an error wrapping ErrInvalid, naming the job,
// and nothing is written), with two differences:
//   - a DedupKey or Unique is rejected: COPY has no ON CONFLICT, so a key
//     that a run holds would abort the whole batch instead of skipping that
//     job, and no RETURNING to say which jobs were duplicates. Use
//     EnqueueMany for jobs with keys.
//   - RunAt is accepted (EnqueueMany takes only Delay): COPY writes the value
//     as given, as Enqueue does.
//
// A Delay is measured on the database clock, as everywhere else: the rows
// get run_at = now() + Delay, where now() is the transaction's start time,
// read once in the same transaction before the COPY (COPY cannot compute an
// expression per row). Jobs without Delay or RunAt get the column default,
// the same now().
//
// Workers are woken as by EnqueueMany (NOTIFY workq_job_runs with each queue
// of the batch, debounced per queue by the client), and the NOTIFY is
// delivered only if the rows commit. On a pool, and on a connection that is
// not in a transaction, EnqueueManyFast runs the COPY and the NOTIFY in a
// transaction of its own; on a pgx.Tx (or a connection inside a transaction
// opened with SQL BEGIN) it runs both on that transaction, and the jobs exist
// if and only if the caller commits. Another CopyDB implementation gets a
// transaction from its Begin (a savepoint, if it wraps a transaction).
func (c *Client) EnqueueManyFast(ctx context.Context, db CopyDB, jobs []Job) (_ int64, err error) {
	if len(jobs) == 0 {
		return 0, nil
	}
	rows := make([]prepared, len(jobs))
	needClock := false // some row's run_at is now() + delay: read now() first
	explicitRunAt := false
	for i, j := range jobs {
		p, err := c.prepare(j)
		if err != nil {
			return 0, fmt.Errorf("job %d: %w", i, err)
		}
		if p.dedup != "" {
			return 0, fmt.Errorf("job %d: %w", i, workqtype.Invalid("dedup_key",
				"EnqueueManyFast takes no dedup key (COPY cannot skip a duplicate; use EnqueueMany)"))
		}
		if p.uniqueKey != nil {
			return 0, fmt.Errorf("job %d: %w", i, workqtype.Invalid("unique",
				"EnqueueManyFast takes no unique job (COPY cannot skip a duplicate; use EnqueueMany)"))
		}
		rows[i] = p
		if p.runAt != nil || p.delayMs != 0 {
			explicitRunAt = true
		}
		if p.runAt == nil {
			needClock = true
		}
	}
	needClock = needClock && explicitRunAt
	ctx, span, tc := c.startEnqueue(ctx, sameQueue(jobs), "", len(jobs))
	defer func() { otelx.End(span, err) }()
	// Debounced per queue, as the other enqueue paths; decided before any
	// statement, like theirs.
	var notify []string
	seen := map[string]bool{}
	for _, p := range rows {
		if !seen[p.queue] {
			seen[p.queue] = true
			if c.shouldNotify(p.queue) {
				notify = append(notify, p.queue)
			}
		}
	}
	run := func(tx CopyDB) (int64, error) {
		return copyJobRuns(ctx, tx, rows, notify, explicitRunAt, needClock, tc)
	}
	switch d := db.(type) {
	case pgx.Tx:
		return run(d)
	case *pgx.Conn:
		inTx, err := connInTx(d)
		if err != nil {
			return 0, err
		}
		if inTx {
			return run(d)
		}
	case *pgxpool.Conn:
		inTx, err := connInTx(d.Conn())
		if err != nil {
			return 0, err
		}
		if inTx {
			return run(d)
		}
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("enqueue %d jobs: begin: %w", len(rows), err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // a no-op after Commit
	n, err := run(tx)
	if err != nil {
		return 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("enqueue %d jobs: commit: %w", len(rows), err)
	}
	return n, nil
}

// connInTx reports whether a connection is inside a transaction that the
// caller opened with SQL (BEGIN), where a Begin of ours would not nest but
// warn, and our COMMIT would end the caller's transaction.
func connInTx(conn *pgx.Conn) (bool, error) {
	switch s := conn.PgConn().TxStatus(); s {
	case 'I':
		return false, nil
	case 'T':
		return true, nil
	case 'E':
		return false, fmt.Errorf("enqueue: the connection's transaction has failed; roll it back first")
	default:
		return false, fmt.Errorf("enqueue: the connection is busy (transaction status %q)", s)
	}
}

// copyJobRuns writes rows with COPY on tx. The columns not written take
// their defaults, as with EnqueueMany's insert (id from the identity, status
// 0, created_at and updated_at now(), limit_key null); so do payload ('{}') and priority (0)
// when every row has that value, which spares PostgreSQL a jsonb parse per
// row for jobs without a payload, and run_at (now(), what EnqueueMany writes
// as now() + 0 ms) unless some job has a Delay or RunAt.
func copyJobRuns(ctx context.Context, tx CopyDB, rows []prepared, notify []string, explicitRunAt, needClock bool, tc traceContext) (int64, error) {
	n := len(rows)
	var now time.Time
	if len(notify) > 0 || needClock {
		if notify == nil {
			notify = []string{}
		}
		start, err := gen.New(tx).JobRunsCopyStart(ctx, notify)
		if err != nil {
			return 0, fmt.Errorf("enqueue %d jobs: %w", n, err)
		}
		now = start.Now
	}
	withPayload, withPriority, withMeta, withLimitKey := false, false, tc.json != nil, false
	for i := range rows {
		withPayload = withPayload || string(rows[i].payload) != "{}"
		withPriority = withPriority || rows[i].priority != 0
		withMeta = withMeta || rows[i].meta != nil
		withLimitKey = withLimitKey || rows[i].limitKey != ""
	}
	cols := []string{"queue", "kind", "max_attempts"}
	if withPayload {
		cols = append(cols, "payload")
	}
	if withPriority {
		cols = append(cols, "priority")
	}
	if explicitRunAt {
		cols = append(cols, "run_at")
	}
	if withMeta {
		cols = append(cols, "metadata") // the job's metadata and the enqueue span's trace context
	}
	if withLimitKey {
		cols = append(cols, "limit_key") // only when some row has one: null for the others
	}
	// CopyFrom encodes each row's values before it asks for the next, so one
	// slice serves every row.
	vals := make([]any, len(cols))
	var queue, kind boxedString
	src := pgx.CopyFromSlice(n, func(i int) ([]any, error) {
		p := &rows[i]
		vals[0], vals[1], vals[2] = queue.of(p.queue), kind.of(p.kind), p.maxAttempts
		k := 3
		if withPayload {
			vals[k] = p.payload
			k++
		}
		if withPriority {
			vals[k] = p.priority
			k++
		}
		if explicitRunAt {
			if p.runAt != nil {
				vals[k] = *p.runAt
			} else {
				vals[k] = now.Add(time.Duration(p.delayMs) * time.Millisecond)
			}
			k++
		}
		if withMeta {
			vals[k] = p.metadata(tc)
			k++
		}
		if withLimitKey {
			vals[k] = p.limitKeyArg()
		}
		return vals, nil
	})
	copied, err := tx.CopyFrom(ctx, pgx.Identifier{"workq", "job_runs"}, cols, src)
	if err != nil {
		return 0, fmt.Errorf("enqueue %d jobs: %w", n, err)
	}
	if copied != int64(n) {
		return 0, fmt.Errorf("enqueue %d jobs: COPY reported %d rows", n, copied)
	}
	return copied, nil
}

// boxedString puts a string into an interface once for a run of equal
// strings: a COPY's row is a []any, boxing a string allocates, and the
// rows of one enqueue mostly share their queue and kind (two allocations
// a job before).
type boxedString struct {
	s string
	v any
}

func (b *boxedString) of(s string) any {
	if b.v == nil || s != b.s {
		b.s, b.v = s, s
	}
	return b.v
}
