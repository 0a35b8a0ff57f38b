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
// role does not own is left to autovacuum. A vacuum that leaves half of
// the table's dead tuples or more (a transaction or a standby holds the
// cleanup horizon back, and no vacuum can remove them) is not repeated on
// that table for a minute, then two, up to ten, until one removes them:
// the task never spins on a table it cannot clean. Its rows are the
// tables it vacuumed.
func VacuumTask(db workqtype.DB, every time.Duration, log *slog.Logger) (Task, error) {
	if every <= 0 {
		return Task{}, fmt.Errorf("%w: vacuum task: interval must be positive, got %s", ErrInvalid, every)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	type held struct {
		until   time.Time
		backoff time.Duration
	}
	var mu sync.Mutex
	heldBack := map[string]held{} // tables a vacuum could not clean
	return Task{Name: "vacuum", Every: every, Run: func(ctx context.Context, _ int64) (int64, error) {
		q := gen.New(db)
		due, err := q.WorkTablesToVacuum(ctx, VacuumMinDead)
		if err != nil {
			return 0, fmt.Errorf("read the work tables' dead tuples: %w", err)
		}
		mu.Lock()
		defer mu.Unlock()
		var n int64
		var errs []error
		for _, t := range due {
			if !slices.Contains(lease.Tables, lease.Table(t.WorkTable)) {
				continue // the query lists the work tables only
			}
			if time.Now().Before(heldBack[t.WorkTable].until) {
				continue
			}
			start := time.Now()
			if _, err := db.Exec(ctx, "vacuum (skip_locked, truncate false) workq."+t.WorkTable); err != nil {
				errs = append(errs, fmt.Errorf("vacuum %s: %w", t.WorkTable, err))
				continue
			}
			n++
			took := time.Since(start)
			left, err := q.WorkTablesToVacuum(ctx, max(VacuumMinDead, t.Dead/2))
			if err != nil {
				errs = append(errs, fmt.Errorf("read the work tables' dead tuples: %w", err))
				continue
			}
			if !slices.ContainsFunc(left, func(l gen.WorkTablesToVacuumRow) bool { return l.WorkTable == t.WorkTable }) {
				delete(heldBack, t.WorkTable)
				log.Debug("vacuumed a work table", "table", t.WorkTable, "dead", t.Dead, "live", t.Live, "took", took)
				continue
			}
			h := heldBack[t.WorkTable]
			h.backoff = min(max(2*h.backoff, time.Minute), 10*time.Minute)
			h.until = time.Now().Add(h.backoff)
			heldBack[t.WorkTable] = h
			log.Info("vacuum left most of a work table's dead tuples: a transaction or a standby holds the cleanup horizon back "+
				"(docs/operations.md, Long transactions and autovacuum)", "table", t.WorkTable, "dead_before", t.Dead, "took", took, "next_try_in", h.backoff)
		}
		return n, errors.Join(errs...)
	}}, nil
}
