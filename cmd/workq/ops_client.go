package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/config"
	"github.com/workq/workq/workqtype"
)

// opsClient connects to cfg's database and returns the Client the
// operator's commands read and act through (items, queues, limits): a
// producer, as `workq api`'s (apiClient): no workers, no maintenance,
// never started. done closes its pool.
func opsClient(ctx context.Context, cfg *config.Config, log *slog.Logger) (_ *workq.Client, done func(), err error) {
	c, _, done, err := opsClientDB(ctx, cfg, log)
	return c, done, err
}

// opsClientDB is opsClient with its pool in --schema, for the per-kind
// reads the Client does not have (an outbox message by its message id,
// its headers; an inbox message's source).
func opsClientDB(ctx context.Context, cfg *config.Config, log *slog.Logger) (_ *workq.Client, _ workqtype.TxDB, done func(), err error) {
	pool, done, err := connect(ctx, cfg, log, needSchema)
	if err != nil {
		return nil, nil, nil, err
	}
	c, err := newClient(pool, *cfg, log, nil, nil, true)
	if err != nil {
		done()
		return nil, nil, nil, err
	}
	return c, inSchema(cfg, pool), done, nil
}

// whenLine is the show line of when item ran or runs: a finished item's
// run_at is when it was last due, not when it ended (the generic item
// view's rule, printItem's).
func whenLine(it workq.Item) (label string, at time.Time) {
	if it.FinishedAt != nil {
		return "finished at", *it.FinishedAt
	}
	return "run at", it.RunAt
}
