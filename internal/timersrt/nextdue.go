package timersrt

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/topicproc"
	"github.com/workq/workq/workqtype"
)

// NewProcessor returns the timers' Processor without handlers: it routes
// due timers to handlers by topic. A handler sees the timer's due time as
// job.DueTime and its topic as job.Topic. The worker also wakes at each
// queue's next due time when that comes before its next poll (NextDue), so
// a timer starts within milliseconds of falling due.
func NewProcessor() *topicproc.Processor { return topicproc.New(lease.Timers, NextDue) }

// NextDue returns how long, on the database clock, until the earliest ready
// timer of queue is due (zero or negative: one is due already); ok is false
// when the queue has no ready timer. It reads one entry of the claim index.
func NextDue(ctx context.Context, db workqtype.DB, queue string) (wait time.Duration, ok bool, err error) {
	ms, err := gen.New(db).TimersNextDue(ctx, queue)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return time.Duration(ms) * time.Millisecond, true, nil
}
