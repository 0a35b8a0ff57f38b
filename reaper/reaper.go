// Package reaper requeues work whose lease expired (a worker crashed or hung)
// and fails work whose attempts are exhausted, on all four work tables. Its
// statements are idempotent and safe with several reapers running at once, so
// it needs no leader election; run it embedded or as `workq reaper`.
package reaper

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/lease"
)

// Reaper periodically reaps expired leases.
type Reaper struct {
	pool     *pgxpool.Pool
	interval time.Duration
	batch    int
	log      *slog.Logger
}

// New returns a reaper that runs every interval and handles at most batch
// rows per statement. A nil logger discards.
func New(pool *pgxpool.Pool, interval time.Duration, batch int, log *slog.Logger) (*Reaper, error) {
	if interval <= 0 {
		return nil, fmt.Errorf("reaper: interval must be positive, got %s", interval)
	}
	if batch < 1 {
		return nil, fmt.Errorf("reaper: batch must be at least 1, got %d", batch)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Reaper{pool: pool, interval: interval, batch: batch, log: log}, nil
}

// RunOnce reaps every table until no expired lease is left.
func (r *Reaper) RunOnce(ctx context.Context) (map[lease.Table]lease.Reaped, error) {
	out := map[lease.Table]lease.Reaped{}
	for _, t := range lease.Tables {
		e := lease.New(r.pool, t)
		var total lease.Reaped
		for {
			got, err := e.ReapExpired(ctx, r.batch)
			if err != nil {
				return out, err
			}
			total.Requeued += got.Requeued
			total.Failed += got.Failed
			if got.Requeued+got.Failed < r.batch {
				break
			}
		}
		if total.Requeued+total.Failed > 0 {
			out[t] = total
			r.log.Info("reaped expired leases", "table", t, "requeued", total.Requeued, "failed", total.Failed)
		}
	}
	return out, nil
}

// Run reaps every interval until ctx is cancelled. Errors are logged and the
// next round tries again.
func (r *Reaper) Run(ctx context.Context) error {
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		if _, err := r.RunOnce(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("reap failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
