package admin

import (
	"context"
	"fmt"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/workqtype"
)

// Limit reads the global limit W of (table, queue): ok is false when it
// has none. A bad table or queue name is an error wrapping ErrInvalid.
func Limit(ctx context.Context, db workqtype.DB, table lease.Table, queue string) (w int, ok bool, err error) {
	if err := lease.CheckLimit(table, queue, 0); err != nil {
		return 0, false, err
	}
	limits, err := gen.New(db).QueueLimitsList(ctx)
	if err != nil {
		return 0, false, fmt.Errorf("read limit of %s/%s: %w", table, queue, err)
	}
	for _, l := range limits {
		if l.WorkTable == string(table) && l.Queue == queue {
			return int(l.MaxInProgress), true, nil
		}
	}
	return 0, false, nil
}

// CheckActor reports what Retry, Cancel and their matching forms would
// reject about by (an error wrapping ErrInvalid), without touching a
// database.
func CheckActor(by Actor) error { return by.validate() }
