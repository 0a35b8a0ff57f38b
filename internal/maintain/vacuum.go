package maintain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
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
// claims and the reaper read fewer dead entries. VACUUM (SKIP_LOCKED)
// passes over a table that another vacuum holds (autovacuum's), and a
// table this role does not own is left to autovacuum. Its rows are the
// tables it vacuumed.
func VacuumTask(db workqtype.DB, every time.Duration, log *slog.Logger) (Task, error) {
	if every <= 0 {
		return Task{}, fmt.Errorf("%w: vacuum task: interval must be positive, got %s", ErrInvalid, every)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return Task{Name: "vacuum", Every: every, Run: func(ctx context.Context, _ int64) (int64, error) {
		due, err := gen.New(db).WorkTablesToVacuum(ctx, VacuumMinDead)
		if err != nil {
			return 0, fmt.Errorf("read the work tables' dead tuples: %w", err)
		}
		var n int64
		var errs []error
		for _, t := range due {
			if !slices.Contains(lease.Tables, lease.Table(t.WorkTable)) {
				continue // the query lists the work tables only
			}
			start := time.Now()
			if _, err := db.Exec(ctx, "vacuum (skip_locked) workq."+t.WorkTable); err != nil {
				errs = append(errs, fmt.Errorf("vacuum %s: %w", t.WorkTable, err))
				continue
			}
			n++
			log.Debug("vacuumed a work table", "table", t.WorkTable, "dead", t.Dead, "live", t.Live, "took", time.Since(start))
		}
		return n, errors.Join(errs...)
	}}, nil
}
