package admin

import (
	"context"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/workqtype"
)

// Bounds of an action on every item a filter matches.
const (
	DefaultBulk = 10000  // most items one matching action visits when max is 0
	MaxBulk     = 100000 // most items one matching action may visit
	BulkBatch   = 1000   // items per statement (MaxIDs)
)

// BulkResult is what an action on every item matching a filter did: how
// many items it acted on and left alone, in how many batches, and where it
// stopped when it reached its cap.
type BulkResult struct {
	Applied int `json:"applied"`
	Skipped int `json:"skipped"` // matched, but not in the state the action needs (or gone)
	Batches int `json:"batches"`
	// Next is the cursor to continue from (Filter.Before of the next call)
	// when the action stopped at its cap; 0 when it visited every matching
	// item.
	Next int64 `json:"next,omitempty"`
}

// RetryMatching retries every failed item matching f (Retry), newest first,
// in batches of at most BulkBatch, visiting at most max items (0:
// DefaultBulk; at most MaxBulk). Each batch is one short statement of its
// own, never one long transaction: a batch that fails leaves the earlier
// ones done, and the result says how far it got.
func RetryMatching(ctx context.Context, db workqtype.DB, table lease.Table, by Actor, f Filter, max int) (BulkResult, error) {
	if err := by.validate(); err != nil {
		return BulkResult{}, err
	}
	return matching(ctx, db, table, f, max, func(ids []int64) (Result, error) { return Retry(ctx, db, table, by, ids...) })
}

// CancelMatching cancels every ready item matching f (Cancel), as
// RetryMatching walks them.
func CancelMatching(ctx context.Context, db workqtype.DB, table lease.Table, by Actor, f Filter, max int) (BulkResult, error) {
	if err := by.validate(); err != nil {
		return BulkResult{}, err
	}
	return matching(ctx, db, table, f, max, func(ids []int64) (Result, error) { return Cancel(ctx, db, table, by, ids...) })
}

// DeleteMatching deletes every finished item matching f (Delete), as
// RetryMatching walks them.
func DeleteMatching(ctx context.Context, db workqtype.DB, table lease.Table, f Filter, max int) (BulkResult, error) {
	return matching(ctx, db, table, f, max, func(ids []int64) (Result, error) { return Delete(ctx, db, table, ids...) })
}

// CheckBulk checks the cap of a matching action.
func CheckBulk(max int) error {
	if max < 0 || max > MaxBulk {
		return invalid("max", "max %d: want 1 to %d (0: %d)", max, MaxBulk, DefaultBulk)
	}
	return nil
}

// matching walks the pages of f from its cursor (the keyset walk of List,
// BulkBatch at a time) and runs act on each page's ids.
func matching(ctx context.Context, db workqtype.DB, table lease.Table, f Filter, max int, act func([]int64) (Result, error)) (BulkResult, error) {
	if _, err := view(table); err != nil {
		return BulkResult{}, err
	}
	if err := CheckBulk(max); err != nil {
		return BulkResult{}, err
	}
	if max == 0 {
		max = DefaultBulk
	}
	f.Limit = 0
	if err := f.Validate(); err != nil {
		return BulkResult{}, err
	}
	var r BulkResult
	visited := 0
	for {
		f.Limit = min(BulkBatch, max-visited)
		page, err := List(ctx, db, table, f)
		if err != nil {
			return r, err
		}
		if len(page.Items) > 0 {
			ids := make([]int64, len(page.Items))
			for i, it := range page.Items {
				ids[i] = it.ID
			}
			res, err := act(ids)
			if err != nil {
				return r, err
			}
			r.Applied += len(res.Applied)
			r.Skipped += len(res.Skipped)
			r.Batches++
			visited += len(ids)
		}
		if page.Next == 0 {
			return r, nil
		}
		if visited >= max {
			r.Next = page.Next
			return r, nil
		}
		f.Before = page.Next
	}
}
