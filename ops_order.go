package workq

import (
	"fmt"

	"github.com/workq/workq/internal/shardlist"
	"github.com/workq/workq/workqtype"
)

// ListOrder is the order of List's items (ListParams.Order; River's
// JobListParams.OrderBy with SortOrderAsc or SortOrderDesc).
type ListOrder string

// The orders of List.
const (
	// NewestFirst lists the newest items first (the zero ListOrder, the
	// default): down the table's ids, on a sharded Client merged by
	// creation time, newest first.
	NewestFirst ListOrder = ""
	// OldestFirst lists the oldest items first: up the table's ids, through
	// the same indexes, on a sharded Client merged by creation time,
	// oldest first. Items written after the first page come on a later
	// one (they have higher ids); its cursor is only good for an
	// oldest-first list.
	OldestFirst ListOrder = "oldest_first"
)

// oldest reports whether p lists oldest first, checking its Order.
func (p ListParams) oldest() (bool, error) {
	switch p.Order {
	case NewestFirst:
		return false, nil
	case OldestFirst:
		return true, nil
	}
	return false, workqtype.Invalid("order", fmt.Sprintf("order %q is not %q (the default, newest first) or %q", p.Order, NewestFirst, OldestFirst))
}

// listCursor reads p.Cursor for a list of p's order ("": the first page).
func listCursor(p ListParams, oldest bool) (shardlist.Cursor, error) {
	if p.Cursor == "" {
		return shardlist.Cursor{}, nil
	}
	cur, err := shardlist.ParseOrdered(p.Cursor, oldest)
	if err != nil {
		return nil, workqtype.Invalid("cursor", fmt.Sprintf("%q is not a cursor of this list (%v)", p.Cursor, err))
	}
	return cur, nil
}
