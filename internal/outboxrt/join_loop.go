package outboxrt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/workq/workq/internal/outage"
	"github.com/workq/workq/internal/startstop"
	"github.com/workq/workq/workqtype"
)

// JoinDeadlineOptions configure a JoinDeadlineLoop; zero values take the
// defaults.
type JoinDeadlineOptions struct {
	Interval time.Duration // between runs (default 1s)
	Batch    int           // joins per statement (default 500)
	Logger   *slog.Logger  // nil discards
}

// JoinDeadlineLoop runs FailExpiredJoins every interval until stopped, so
// that joins past their deadline fail and write their on-fail message. Its
// statement is idempotent and skips locked joins, so several loops (in
// several processes) may run at once. It belongs in the maintenance process
// or in `workq run`.
type JoinDeadlineLoop struct {
	db       workqtype.DB
	interval time.Duration
	batch    int
	log      *slog.Logger
	outage   *outage.Log // its rounds\' database failures, as one outage
	errors   atomic.Int64

	life startstop.Lifecycle
}

// NewJoinDeadlineLoop returns a stopped loop over db (a pool).
func NewJoinDeadlineLoop(db workqtype.DB, o JoinDeadlineOptions) (*JoinDeadlineLoop, error) {
	if o.Interval == 0 {
		o.Interval = time.Second
	}
	if o.Batch == 0 {
		o.Batch = 500
	}
	if o.Interval < 0 {
		return nil, fmt.Errorf("%w: join deadline loop: interval must be positive, got %s", workqtype.ErrInvalid, o.Interval)
	}
	if o.Batch < 1 {
		return nil, fmt.Errorf("%w: join deadline loop: batch must be at least 1, got %d", workqtype.ErrInvalid, o.Batch)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &JoinDeadlineLoop{db: db, interval: o.Interval, batch: o.Batch, log: o.Logger, outage: outage.New(o.Logger, "outbox join deadlines")}, nil
}

// Errors counts the runs that failed, over the loop's life.
func (l *JoinDeadlineLoop) Errors() int64 { return l.errors.Load() }

// RunOnce fails every expired join, a batch per statement, and returns how
// many it failed.
func (l *JoinDeadlineLoop) RunOnce(ctx context.Context) (int, error) {
	total := 0
	for {
		n, err := FailExpiredJoins(ctx, l.db, l.batch)
		total += n
		if err != nil || n < l.batch {
			return total, err
		}
	}
}

// Start runs the loop in a goroutine until Stop (or ctx ends). A loop
// starts once: starting it again, even after Stop, is an error.
func (l *JoinDeadlineLoop) Start(ctx context.Context) error {
	run, err := l.life.Begin(ctx)
	if err != nil {
		return fmt.Errorf("join deadline loop: start: %w", err)
	}
	go func() {
		defer run.Stopped()
		run.Started()
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(run.Context(), cancel)()
		l.run(ctx)
	}()
	return nil
}

func (l *JoinDeadlineLoop) run(ctx context.Context) {
	t := time.NewTicker(l.interval)
	defer t.Stop()
	for {
		n, err := l.RunOnce(ctx)
		if n > 0 {
			l.log.Info("failed joins past their deadline", "joins", n)
		}
		if err != nil && ctx.Err() == nil {
			l.errors.Add(1)
			if !l.outage.Failed(err) {
				l.log.Warn("failing expired joins; retrying next interval", "err", err)
			}
		} else if err == nil {
			l.outage.OK()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Stop stops the loop and waits for it, at most until ctx ends (then it
// returns ctx's error; the loop still ends on its own, its statement
// cancelled). Stopping a loop that is not running does nothing.
func (l *JoinDeadlineLoop) Stop(ctx context.Context) error {
	switch err := l.life.Stop(ctx); {
	case err == nil, errors.Is(err, startstop.ErrNotStarted):
		return nil
	default:
		return fmt.Errorf("join deadline loop: stop: %w", err)
	}
}
