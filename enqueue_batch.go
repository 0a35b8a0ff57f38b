package workq

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/workqtype"
)

// enqueueBatch writes a batch of jobs on db (the Client's pool in its
// schema, or the caller's transaction): in one statement, or, when a job
// has a RunAt (the batch statement takes delays only), one job at a time
// in one transaction on db (a savepoint in the caller's), all or none.
func (c *Client) enqueueBatch(ctx context.Context, db DB, jobs []jobq.Job) ([]jobq.Enqueued, error) {
	if !slices.ContainsFunc(jobs, func(j jobq.Job) bool { return !j.RunAt.IsZero() }) {
		return c.jobs.EnqueueMany(ctx, c.in(db), jobs)
	}
	for i, j := range jobs { // every job is checked before anything is written
		if err := c.jobs.Validate(j); err != nil {
			return nil, fmt.Errorf("job %d: %w", i, err)
		}
	}
	txdb, ok := db.(workqtype.TxDB)
	if !ok {
		return nil, fmt.Errorf("workq: a batch with RunAt needs a database that begins a transaction, got %T", db)
	}
	out := make([]jobq.Enqueued, len(jobs))
	err := pgx.BeginFunc(ctx, txdb, func(tx pgx.Tx) error {
		for i, j := range jobs {
			r, err := c.jobs.Enqueue(ctx, c.in(tx), j)
			if err != nil {
				return fmt.Errorf("job %d: %w", i, err)
			}
			out[i] = r
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
