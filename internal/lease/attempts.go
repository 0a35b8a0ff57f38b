package lease

import (
	"context"
	"fmt"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/workqtype"
)

// Attempts lists the archived attempts of item id of table t in claim
// order, with operators' revives and cancels among them.
func Attempts(ctx context.Context, db workqtype.DB, t Table, id int64) ([]workqtype.Attempt, error) {
	if _, err := lookup(t); err != nil {
		return nil, err
	}
	runs, err := gen.New(db).RunsListByItem(ctx, string(t), id)
	if err != nil {
		return nil, fmt.Errorf("attempts of %s %d: %w", t, id, err)
	}
	out := make([]workqtype.Attempt, len(runs))
	for i, r := range runs {
		out[i] = workqtype.Attempt{RunID: r.RunID, Attempt: r.Attempt, LeaseVersion: r.LeaseVersion, Worker: r.WorkerID,
			StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, Outcome: r.Outcome}
		if r.Error != nil {
			out[i].Error = *r.Error
		}
	}
	return out, nil
}
