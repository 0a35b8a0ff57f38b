package admin

import (
	"context"
	"time"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/workqtype"
)

// LimitRow is one global limit W of a (table, queue), and when it was last
// set.
type LimitRow struct {
	Table     lease.Table
	Queue     string
	W         int
	UpdatedAt time.Time
}

// Limits lists every global limit W of db, sorted by table and queue.
func Limits(ctx context.Context, db workqtype.DB) ([]LimitRow, error) {
	rows, err := gen.New(db).QueueLimitsList(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]LimitRow, len(rows))
	for i, r := range rows {
		out[i] = LimitRow{Table: lease.Table(r.WorkTable), Queue: r.Queue, W: int(r.MaxInProgress), UpdatedAt: r.UpdatedAt}
	}
	return out, nil
}
