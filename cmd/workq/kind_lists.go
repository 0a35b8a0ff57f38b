package main

import (
	"context"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/kinds"
	"github.com/workq/workq/internal/shardlist"
)

// The outbox's, inbox's and timers' own list and show read through the
// Client as every item command does; these helpers map the Client's Item
// back to what those commands have always printed (their own columns are
// in Item.Details).

// listAfter lists up to limit items of p oldest first, with ids above
// afterID (--after-id: the Client's oldest-first cursor of the one
// database), reading pages of at most workq.MaxListLimit until it has
// limit items or the table has no more.
func listAfter(ctx context.Context, client *workq.Client, p workq.ListParams, afterID int64, limit int) ([]workq.Item, error) {
	p.Order = workq.OldestFirst
	if afterID >= maxItemID {
		return nil, nil // no id is above it
	}
	if afterID > 0 {
		p.Cursor = shardlist.Cursor{workq.DefaultShard: afterID}.Format(true)
	}
	var out []workq.Item
	for len(out) < limit {
		p.Limit = min(limit-len(out), workq.MaxListLimit)
		res, err := client.List(ctx, p)
		if err != nil {
			return nil, err
		}
		out = append(out, res.Items...)
		if res.Next == "" {
			break
		}
		p.Cursor = res.Next
	}
	return out, nil
}

// detailOf is the item's detail name as a T (its zero value when the
// item has none).
func detailOf[T any](it workq.Item, name string) T {
	v, _ := it.Details[name].(T)
	return v
}

// detailTime is the item's time detail name (nil when it has none).
func detailTime(it workq.Item, name string) *time.Time {
	if t, ok := it.Details[name].(time.Time); ok {
		return &t
	}
	return nil
}

// statusNumber is the number of the item's status (the lease status a
// table's status column holds).
func statusNumber(it workq.Item) int16 {
	for i, s := range kinds.StatusNames {
		if s == it.Status {
			return int16(kinds.Statuses[i])
		}
	}
	return -1
}
