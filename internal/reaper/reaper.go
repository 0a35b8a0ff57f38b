// Package reaper requeues work whose lease expired (a worker crashed or hung)
// and fails work whose attempts are exhausted, on every work table. Its
// statements are idempotent and safe with several reapers running at once, so
// it needs no leader election; run it embedded or as `workq reaper`.
package reaper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/outage"
	"github.com/workq/workq/workqtype"
)

// Reaper periodically reaps expired leases.
type Reaper struct {
	db       workqtype.DB
	interval time.Duration
	batch    int
	log      *slog.Logger
	outage   *outage.Log // unless the caller's context carries one (a maintenance task)
	tables   []lease.Table
	errors   atomic.Int64
}

// New returns a reaper on db (a pool; for another workq schema than the
// default, one wrapped for it) that runs every interval and handles at
// most batch rows per statement. A nil logger discards.
func New(db workqtype.DB, interval time.Duration, batch int, log *slog.Logger) (*Reaper, error) {
	if interval <= 0 {
		return nil, fmt.Errorf("reaper: interval must be positive, got %s", interval)
	}
	if batch < 1 {
		return nil, fmt.Errorf("reaper: batch must be at least 1, got %d", batch)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Reaper{db: db, interval: interval, batch: batch, log: log, outage: outage.New(log, "reaper"), tables: lease.Tables}, nil
}

// Errors counts the tables whose reap failed, over the reaper's life.
func (r *Reaper) Errors() int64 { return r.errors.Load() }

// RunOnce reaps every table until no expired lease is left. A table whose
// reap fails is logged and counted, and the other tables are still reaped;
// the returned error joins every table's failure.
func (r *Reaper) RunOnce(ctx context.Context) (map[lease.Table]lease.Reaped, error) {
	out := map[lease.Table]lease.Reaped{}
	var errs []error
	for _, t := range r.tables {
		total, err := r.reapTable(ctx, t)
		if total.Requeued+total.Failed > 0 {
			out[t] = total
			r.log.Info("reaped expired leases", "table", t, "requeued", total.Requeued, "failed", total.Failed)
		}
		if err != nil {
			if ctx.Err() != nil {
				return out, ctx.Err()
			}
			r.errors.Add(1)
			if !outage.FromContext(ctx, r.outage).Failed(err, "table", t) {
				r.log.Warn("reap failed; the other tables are reaped all the same", "table", t, "err", err)
			}
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		outage.FromContext(ctx, r.outage).OK()
	}
	return out, errors.Join(errs...)
}

func (r *Reaper) reapTable(ctx context.Context, t lease.Table) (lease.Reaped, error) {
	e := lease.New(r.db, t)
	var total lease.Reaped
	for {
		got, err := e.ReapExpired(ctx, "", r.batch)
		if err != nil {
			return total, err
		}
		total.Add(got)
		if got.Requeued+got.Failed < r.batch {
			return total, nil
		}
	}
}

// Run reaps every interval until ctx is cancelled. Errors are logged and
// counted, and the next round tries again.
func (r *Reaper) Run(ctx context.Context) error {
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		_, _ = r.RunOnce(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
