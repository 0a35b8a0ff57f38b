package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/workqtype"
)

// JobLimitKey is job run id's limit key ("" when it has none).
func JobLimitKey(ctx context.Context, db workqtype.DB, id int64) (string, error) {
	key, err := gen.New(db).FlowJobLimitKey(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("job run %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("read the limit key of job run %d: %w", id, err)
	}
	return key, nil
}

// FlowKeyUse is one limit key's use of a queue now.
type FlowKeyUse struct {
	InProgress int64 // its job runs in progress (also those whose lease expired, until reaped)
	Started    int64 // its starts in the window of the period asked for
}

// ReadFlowKey reads the use of limit key key of job-run queue queue: its
// items in progress (as workq_flow_left counts them for a concurrency per
// key) and its starts in the window of period that ends now.
func ReadFlowKey(ctx context.Context, db workqtype.DB, queue, key string, period time.Duration) (FlowKeyUse, error) {
	q := gen.New(db)
	var u FlowKeyUse
	var err error
	if u.InProgress, err = q.FlowKeyInProgress(ctx, queue, key); err != nil {
		return u, fmt.Errorf("count the key's items in progress: %w", err)
	}
	if period <= 0 {
		period = time.Second
	}
	if u.Started, err = q.FlowKeyStarts(ctx, gen.FlowKeyStartsParams{PeriodMs: period.Milliseconds(), WorkTable: string(JobRuns),
		Queue: queue, Key: key}); err != nil {
		return u, fmt.Errorf("count the key's starts: %w", err)
	}
	return u, nil
}

// ReadFlowScopeInProgress counts the items in progress of (table, queue),
// or of one kind (topic, source) of it, as a concurrency rule counts them.
func ReadFlowScopeInProgress(ctx context.Context, db workqtype.DB, table Table, queue, kind string) (int64, error) {
	n, err := gen.New(db).FlowScopeInProgress(ctx, gen.FlowScopeInProgressParams{WorkTable: string(table), Queue: queue, Kind: kind})
	if err != nil {
		return 0, fmt.Errorf("count the items in progress of %s/%s: %w", table, queue, err)
	}
	return n, nil
}
