package maintain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/workqtype"
)

// VacuumMinDead is the fewest dead tuples for which VacuumTask vacuums a
// work table (and only when they are also a fifth of its live rows, as
// autovacuum's default scale factor): below it autovacuum's own round is
// soon enough.
const VacuumMinDead = 10_000

// VacuumTask returns the task "vacuum": every round it reads the work
// tables' dead tuples (pg_stat_user_tables) and vacuums each that has at
// least VacuumMinDead of them and a fifth of its live rows. A queue's work
// table is small and changes fast: every job leaves two dead versions (its
// claim and its end), tens of thousands a second under load, while
// autovacuum visits a database once a minute (autovacuum_naptime) and
// then scans a heap grown to hold a minute of them. Vacuumed every few
// seconds the heap and its indexes stay the size of seconds of work, so
// claims and the reaper read fewer dead entries.
//
// VACUUM (SKIP_LOCKED, TRUNCATE false) passes over a table that another
// vacuum holds (autovacuum's) and never takes the exclusive lock that
// giving the heap's tail back needs (autovacuum still does); a table this
// role does not own is left to autovacuum. While a transaction that began
// before the task's last vacuum of a table holds its snapshot (a long
// transaction, a prepared one), no vacuum can remove more than that one
// did: the table is passed over until it ends, rather than vacuumed in
// vain every round. Each round also summarizes the new block ranges of the
// done tables' BRIN indexes (summarizeDoneBrin). Its rows are the tables
// it vacuumed.
func VacuumTask(db workqtype.DB, every time.Duration, log *slog.Logger) (Task, error) {
	if every <= 0 {
		return Task{}, fmt.Errorf("%w: vacuum task: interval must be positive, got %s", ErrInvalid, every)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var mu sync.Mutex
	lastStart := map[string]time.Time{} // by the database clock
	heldBack := map[string]bool{}       // logged as held back
	return Task{Name: "vacuum", Every: every, Run: func(ctx context.Context, _ int64) (int64, error) {
		q := gen.New(db)
		summarized, serr := summarizeDoneBrin(ctx, q)
		if summarized > 0 {
			log.Debug("summarized the done tables' new block ranges", "ranges", summarized)
		}
		due, err := q.WorkTablesToVacuum(ctx, VacuumMinDead)
		if err != nil || len(due) == 0 {
			return 0, errors.Join(serr, wrapDeadTuples(err))
		}
		oldest, err := q.OldestSnapshotStart(ctx)
		if err != nil {
			return 0, fmt.Errorf("read the oldest snapshot's start: %w", err)
		}
		mu.Lock()
		defer mu.Unlock()
		var n int64
		var errs []error
		for _, t := range due {
			if !slices.Contains(lease.Tables, lease.Table(t.WorkTable)) {
				continue // the query lists the work tables only
			}
			if last, ok := lastStart[t.WorkTable]; ok && oldest.Before(last) {
				if !heldBack[t.WorkTable] {
					heldBack[t.WorkTable] = true
					log.Info("vacuum: a transaction older than the last vacuum holds the cleanup horizon back; the table waits for it to end "+
						"(docs/operations.md, Long transactions and autovacuum)", "table", t.WorkTable, "dead", t.Dead, "transaction_start", oldest)
				}
				continue
			}
			delete(heldBack, t.WorkTable)
			start := time.Now()
			clock, err := q.RunsClock(ctx)
			if err == nil {
				_, err = db.Exec(ctx, "vacuum (skip_locked, truncate false) workq."+t.WorkTable)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("vacuum %s: %w", t.WorkTable, err))
				continue
			}
			lastStart[t.WorkTable] = clock
			n++
			log.Debug("vacuumed a work table", "table", t.WorkTable, "dead", t.Dead, "live", t.Live, "took", time.Since(start))
		}
		return n, errors.Join(append(errs, serr)...)
	}}, nil
}

// summarizeDoneBrin summarizes the block ranges that done rows filled since
// the last vacuum in the BRIN (finished_at) indexes of the done tables'
// current partitions, and returns how many ranges. A range not summarized
// matches every search, so without this the dashboard's counts of the last
// seconds read every page a day's done rows filled since that partition's
// last vacuum (autovacuum's insert threshold is a fifth of the partition).
// An index whose table another vacuum holds is left for the next round.
func summarizeDoneBrin(ctx context.Context, q *gen.Queries) (int64, error) {
	idx, err := q.DoneBrinIndexes(ctx)
	if err != nil {
		return 0, fmt.Errorf("list the done tables' BRIN indexes: %w", err)
	}
	var n int64
	for _, ix := range idx {
		r, err := q.DoneBrinSummarize(ctx, summarizeLockTimeout.Milliseconds(), ix.IndexOid)
		var pgErr *pgconn.PgError
		switch {
		case errors.As(err, &pgErr) && pgErr.Code == "55P03": // lock_not_available: a vacuum holds the table
			continue
		case err != nil:
			return n, fmt.Errorf("summarize %s: %w", ix.IndexName, err)
		}
		n += r.Summarized
	}
	return n, nil
}

// summarizeLockTimeout bounds the wait for a done partition that another
// vacuum holds (a round never waits out autovacuum).
const summarizeLockTimeout = 200 * time.Millisecond

func wrapDeadTuples(err error) error {
	if err != nil {
		return fmt.Errorf("read the work tables' dead tuples: %w", err)
	}
	return nil
}
