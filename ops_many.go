package workq

import (
	"context"
	"fmt"

	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/workqtype"
)

// MaxActionItems is the most items one RetryMany, CancelMany or DeleteMany
// takes.
const MaxActionItems = 1000

// The cap is admin's (a difference does not compile).
const _ = uint(MaxActionItems-admin.MaxIDs) + uint(admin.MaxIDs-MaxActionItems)

// ActionResult says what an action on several items did: the items it
// acted on, and why it left the others alone. The refs are grouped by
// shard and table (in the order of each group's first ref), in the order
// given within a group, each with the shard it is on.
type ActionResult struct {
	Applied  []ItemRef
	NotFound []ItemRef
	// WrongState are the items in a state the action does not take, with
	// that state (their table's word, Item.State).
	WrongState map[ItemRef]string
	// Requested (CancelMany) are the items of Applied that were running:
	// their handler is being stopped, and each ends cancelled when its
	// attempt ends. The others of Applied are cancelled already.
	Requested []ItemRef
}

// RetryMany is Retry of several items (at most MaxActionItems, of any
// tables and shards): one statement per table and shard, each applying to
// the items in a state it takes. An item left alone is in the result, not
// an error; the error is a bad request (ErrInvalid, nothing done) or a
// failed statement (the groups before it are done, and reported).
func (c *Client) RetryMany(ctx context.Context, refs []ItemRef, opts *ActionOpts) (ActionResult, error) {
	by := actor(opts)
	return c.actMany(ctx, refs, "retry", func(ctx context.Context, db DB, t Table, ids []int64) (admin.Result, error) {
		return admin.Retry(ctx, db, t, by, ids...)
	}, admin.CheckActor(by))
}

// CancelMany is Cancel of several items (see RetryMany).
func (c *Client) CancelMany(ctx context.Context, refs []ItemRef, opts *ActionOpts) (ActionResult, error) {
	by := actor(opts)
	return c.actMany(ctx, refs, "cancel", func(ctx context.Context, db DB, t Table, ids []int64) (admin.Result, error) {
		return admin.Cancel(ctx, db, t, by, ids...)
	}, admin.CheckActor(by))
}

// DeleteMany is Delete of several items (see RetryMany).
func (c *Client) DeleteMany(ctx context.Context, refs []ItemRef) (ActionResult, error) {
	return c.actMany(ctx, refs, "delete", func(ctx context.Context, db DB, t Table, ids []int64) (admin.Result, error) {
		return admin.Delete(ctx, db, t, ids...)
	}, nil)
}

// actMany checks refs (and the request's own error, bad), groups them by
// shard and table, and runs do on each group in the order of their first
// ref.
func (c *Client) actMany(ctx context.Context, refs []ItemRef, verb string,
	do func(ctx context.Context, db DB, t Table, ids []int64) (admin.Result, error), bad error) (_ ActionResult, err error) {
	defer c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return ActionResult{}, err
	}
	if bad != nil {
		return ActionResult{}, bad
	}
	switch {
	case len(refs) == 0:
		return ActionResult{}, workqtype.Invalid("refs", "no items given")
	case len(refs) > MaxActionItems:
		return ActionResult{}, workqtype.Invalid("refs", fmt.Sprintf("%d items, want at most %d", len(refs), MaxActionItems))
	}
	type group struct {
		sc    *Client
		table Table
		refs  []ItemRef
	}
	var groups []*group
	byKey := map[[2]string]*group{}
	seen := map[ItemRef]bool{}
	for i, r := range refs {
		if err := validateRef(r); err != nil {
			return ActionResult{}, fmt.Errorf("refs[%d]: %w", i, err)
		}
		if r.Shard == "" && c.set != nil {
			return ActionResult{}, workqtype.Invalid(fmt.Sprintf("refs[%d].shard", i), "on a sharded Client every item of a batch names its shard")
		}
		sc, err := c.Shard(r.Shard)
		if err != nil {
			return ActionResult{}, fmt.Errorf("refs[%d]: %w", i, err)
		}
		r.Shard = sc.name // the one spelling of the shard
		if seen[r] {
			return ActionResult{}, workqtype.Invalid(fmt.Sprintf("refs[%d]", i), fmt.Sprintf("%s is given twice", r))
		}
		seen[r] = true
		k := [2]string{sc.name, string(r.Table)}
		if byKey[k] == nil {
			byKey[k] = &group{sc: sc, table: r.Table}
			groups = append(groups, byKey[k])
		}
		byKey[k].refs = append(byKey[k].refs, refs[i])
	}
	out := ActionResult{Applied: []ItemRef{}, NotFound: []ItemRef{}, WrongState: map[ItemRef]string{}}
	for _, g := range groups {
		ids := make([]int64, len(g.refs))
		ref := make(map[int64]ItemRef, len(g.refs))
		for i, r := range g.refs {
			ids[i], ref[r.ID] = r.ID, r
		}
		res, err := do(ctx, g.sc.db, g.table, ids)
		if err != nil {
			return out, fmt.Errorf("workq: %s %s items on shard %s: %w", verb, g.table, g.sc.name, err)
		}
		for _, id := range res.Applied {
			out.Applied = append(out.Applied, ref[id])
		}
		for _, id := range res.NotFound {
			out.NotFound = append(out.NotFound, ref[id])
		}
		for id, st := range res.States {
			out.WrongState[ref[id]] = st
		}
		for _, id := range res.Requested {
			out.Requested = append(out.Requested, ref[id])
		}
	}
	return out, nil
}
