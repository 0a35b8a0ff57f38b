package maintain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

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
// vain every round. Its rows are the tables it vacuumed.
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
		due, err := q.WorkTablesToVacuum(ctx, VacuumMinDead)
		if err != nil || len(due) == 0 {
			return 0, wrapDeadTuples(err)
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
		return n, errors.Join(errs...)
	}}, nil
}

func wrapDeadTuples(err error) error {
	if err != nil {
		return fmt.Errorf("read the work tables' dead tuples: %w", err)
	}
	return nil
}
