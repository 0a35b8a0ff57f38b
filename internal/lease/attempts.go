package lease

import (
	"context"
	"fmt"
	"slices"

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
	out := make([]workqtype.Attempt, len(runs), len(runs)+1)
	for i, r := range runs {
		out[i] = workqtype.Attempt{RunID: r.RunID, Attempt: r.Attempt, LeaseVersion: r.LeaseVersion, Worker: r.WorkerID,
			StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, Outcome: r.Outcome}
		if r.Error != nil {
			out[i].Error = *r.Error
		}
	}
	// An item that ended done and moved is its own last attempt: the
	// completion archived no run for it (migration 00028).
	if _, moves, err := DoneTable(t); err != nil || !moves {
		return out, err
	}
	onT, err := OnTable(db, t)
	if err != nil {
		return nil, err
	}
	done, err := gen.New(onT).LeaseDoneRuns(ctx, []int64{id})
	if err != nil {
		return nil, fmt.Errorf("attempts of %s %d: %w", t, id, err)
	}
	for _, r := range done {
		if slices.ContainsFunc(out, func(a workqtype.Attempt) bool { return a.RunID == r.RunID }) {
			continue // also in runs: moved by a worker from before migration 00028
		}
		out = append(out, workqtype.Attempt{RunID: r.RunID, Attempt: r.Attempts, LeaseVersion: r.LeaseVersion, Worker: r.WorkerID,
			StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, Outcome: string(Done)})
	}
	return out, nil
}
