package main

import (
	"context"

	"github.com/workq/workq"
)

// viaClient does a on ids of table (of shard: "" on one database) through
// the Client's RetryMany, CancelMany or DeleteMany, and returns what it
// did in the terms the command prints: ids in the order given, Skipped
// those not applied.
func (a action) viaClient(ctx context.Context, c *workq.Client, table workq.Table, shard string, by *workq.ActionOpts, ids []int64) (actResult, error) {
	refs := make([]workq.ItemRef, len(ids))
	for i, id := range ids {
		refs[i] = workq.ItemRef{Table: table, ID: id, Shard: shard}
	}
	var res workq.ActionResult
	var err error
	switch a.verb {
	case "retry":
		res, err = c.RetryMany(ctx, refs, by)
	case "cancel":
		res, err = c.CancelMany(ctx, refs, by)
	default:
		res, err = c.DeleteMany(ctx, refs)
	}
	if err != nil {
		return actResult{}, err
	}
	applied := map[int64]bool{}
	for _, r := range res.Applied {
		applied[r.ID] = true
	}
	notFound := map[int64]bool{}
	for _, r := range res.NotFound {
		notFound[r.ID] = true
	}
	out := actResult{Applied: []int64{}, Skipped: []int64{}, NotFound: []int64{}, States: map[int64]string{}}
	for _, id := range ids {
		switch {
		case applied[id]:
			out.Applied = append(out.Applied, id)
		case notFound[id]:
			out.Skipped = append(out.Skipped, id)
			out.NotFound = append(out.NotFound, id)
		default:
			out.Skipped = append(out.Skipped, id)
		}
	}
	for r, st := range res.WrongState {
		out.States[r.ID] = st
	}
	for _, r := range res.Requested {
		out.Requested = append(out.Requested, r.ID)
	}
	return out, nil
}
