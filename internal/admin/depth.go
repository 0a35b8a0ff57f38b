package admin

import (
	"context"
	"fmt"
	"time"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/workqtype"
)

// Depth is one (table, queue)'s backlog, read without touching the done
// rows: Queues counts every row exactly and reads whole tables; Depths reads
// only the partial indexes of ready, in-progress and failed items, so its
// cost is the backlog and the failed items, however long the history.
type Depth struct {
	Table      lease.Table   `json:"table"`
	Queue      string        `json:"queue"`
	Ready      int64         `json:"ready"`       // ready and due
	Scheduled  int64         `json:"scheduled"`   // ready, due later
	InProgress int64         `json:"in_progress"` // leased
	OldestDue  time.Duration `json:"-"`           // how long the oldest due ready item has waited (0: none)
	Failed     int64         `json:"failed"`
}

// Depths reads the backlog of every (table, queue) that has ready,
// in-progress or failed items: lease.Engine.QueueDepth of each table and
// the failed counts (AdminFailedCounts), sorted by table and queue.
func Depths(ctx context.Context, db workqtype.DB) ([]Depth, error) {
	rows := map[[2]string]*Depth{}
	row := func(t lease.Table, q string) *Depth {
		k := [2]string{string(t), q}
		if rows[k] == nil {
			rows[k] = &Depth{Table: t, Queue: q}
		}
		return rows[k]
	}
	for _, t := range lease.Tables {
		ds, err := lease.New(db, t).QueueDepth(ctx)
		if err != nil {
			return nil, err
		}
		for _, d := range ds {
			r := row(t, d.Queue)
			r.Ready, r.Scheduled, r.InProgress, r.OldestDue = d.Ready, d.Scheduled, d.InProgress, d.OldestDue
		}
	}
	failed, err := gen.New(db).AdminFailedCounts(ctx)
	if err != nil {
		return nil, fmt.Errorf("failed counts: %w", err)
	}
	for _, f := range failed {
		row(lease.Table(f.WorkTable), f.Queue).Failed = f.Failed
	}
	return sortedRows(rows, func(d Depth) (lease.Table, string) { return d.Table, d.Queue }), nil
}

// Ended counts the attempts of one (table, queue) that ended with one
// outcome (done, retry, failed, snoozed, released, expired).
type Ended struct {
	Table   lease.Table
	Queue   string
	Outcome string
	Count   int64
}

// EndedBetween counts the attempts that ended in (after, until] by the
// database clock, from the run archive's finished_at index; operator
// actions (revived, cancelled) are not attempts. Reading consecutive
// intervals costs each archived attempt once.
func EndedBetween(ctx context.Context, db workqtype.DB, after, until time.Time) ([]Ended, error) {
	rows, err := gen.New(db).RunsEndedBetween(ctx, after, until)
	if err != nil {
		return nil, fmt.Errorf("attempts ended between %s and %s: %w", after.Format(time.RFC3339Nano), until.Format(time.RFC3339Nano), err)
	}
	out := make([]Ended, len(rows))
	for i, r := range rows {
		out[i] = Ended{Table: lease.Table(r.WorkTable), Queue: r.Queue, Outcome: r.Outcome, Count: r.Count}
	}
	return out, nil
}

// Clock is the database's now(), the clock of the run archive.
func Clock(ctx context.Context, db workqtype.DB) (time.Time, error) {
	t, err := gen.New(db).RunsClock(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("database clock: %w", err)
	}
	return t, nil
}
