package workq

import (
	"context"
	"fmt"

	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/shardlist"
	"github.com/workq/workq/workqtype"
)

// Caps of RetryMatching, CancelMatching and DeleteMatching.
const (
	DefaultMatchingMax = 10000  // items one call visits when max is 0
	MaxMatchingMax     = 100000 // most items one call may visit
)

// The caps are admin's (a difference does not compile).
const _ = uint(DefaultMatchingMax-admin.DefaultBulk) + uint(admin.DefaultBulk-DefaultMatchingMax) +
	uint(MaxMatchingMax-admin.MaxBulk) + uint(admin.MaxBulk-MaxMatchingMax)

// MatchingResult says what an action on the items matching a filter did.
type MatchingResult struct {
	Applied int // items acted on
	Skipped int // items matched but in a state the action does not take (or gone)
	Batches int // statements run, each on at most a page of items
	// Next is the cursor (ListParams.Cursor) to go on from where the
	// action stopped at its cap (or at a failed batch); "" when it
	// visited every matching item.
	Next string
}

// RetryMatching retries (Retry) every failed or cancelled item matching p
// (its filter, Shard and Cursor; Limit is ignored), newest first, visiting
// at most max items (0: DefaultMatchingMax; at most MaxMatchingMax). It
// runs in batches, each one short statement: a batch that fails leaves the
// earlier ones done, and the result says how far it got. On a sharded
// Client p.Shard is required (ids and cursors are per shard).
func (c *Client) RetryMatching(ctx context.Context, p ListParams, max int, opts *ActionOpts) (MatchingResult, error) {
	by := actor(opts)
	return c.matching(ctx, p, max, "retry", func(ctx context.Context, db DB, f admin.Filter) (admin.BulkResult, error) {
		return admin.RetryMatching(ctx, db, p.Table, by, f, max)
	})
}

// CancelMatching cancels (Cancel) every ready item matching p, as
// RetryMatching walks them.
func (c *Client) CancelMatching(ctx context.Context, p ListParams, max int, opts *ActionOpts) (MatchingResult, error) {
	by := actor(opts)
	return c.matching(ctx, p, max, "cancel", func(ctx context.Context, db DB, f admin.Filter) (admin.BulkResult, error) {
		return admin.CancelMatching(ctx, db, p.Table, by, f, max)
	})
}

// DeleteMatching deletes (Delete) every finished item matching p, as
// RetryMatching walks them.
func (c *Client) DeleteMatching(ctx context.Context, p ListParams, max int) (MatchingResult, error) {
	return c.matching(ctx, p, max, "delete", func(ctx context.Context, db DB, f admin.Filter) (admin.BulkResult, error) {
		return admin.DeleteMatching(ctx, db, p.Table, f, max)
	})
}

// matching checks p, finds its shard and cursor, and runs do there.
func (c *Client) matching(ctx context.Context, p ListParams, max int, verb string,
	do func(ctx context.Context, db DB, f admin.Filter) (admin.BulkResult, error)) (_ MatchingResult, err error) {
	defer c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return MatchingResult{}, err
	}
	if p.Table == "" {
		return MatchingResult{}, workqtype.Invalid("table", "required: the table whose items to "+verb)
	}
	if err := validateRef(ItemRef{Table: p.Table, ID: 1}); err != nil {
		return MatchingResult{}, err
	}
	f, err := p.filter()
	if err != nil {
		return MatchingResult{}, err
	}
	if p.Order != NewestFirst {
		return MatchingResult{}, workqtype.Invalid("order", verb+" matching walks newest first: leave ListParams.Order unset")
	}
	if p.Shard == "" && c.set != nil {
		return MatchingResult{}, workqtype.Invalid("shard", verb+" matching on a sharded Client: name the shard (ListParams.Shard)")
	}
	sc, err := c.Shard(p.Shard)
	if err != nil {
		return MatchingResult{}, err
	}
	if p.Cursor != "" {
		cur, err := shardlist.ParseCursor(p.Cursor)
		pos, ok := cur[sc.name]
		if err != nil || !ok || len(cur) != 1 {
			return MatchingResult{}, workqtype.Invalid("cursor", fmt.Sprintf("%q is not a cursor of shard %s (pass MatchingResult.Next, or ListResult.Next of a list of that shard)", p.Cursor, sc.name))
		}
		f.Before = pos
	}
	r, err := do(ctx, sc.db, f)
	out := MatchingResult{Applied: r.Applied, Skipped: r.Skipped, Batches: r.Batches}
	if r.Next != 0 {
		out.Next = shardlist.Cursor{sc.name: r.Next}.String()
	}
	if err != nil {
		return out, fmt.Errorf("workq: %s matching on %s: %w", verb, p.Table, err)
	}
	return out, nil
}
