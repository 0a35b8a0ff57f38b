package admin

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/kinds"
	"github.com/workq/workq/internal/lease"
)

// listOldest is List oldest first, from after (0: the oldest): one page up
// the primary key (failed items: their index). With an error text or
// metadata it reads windows as listText does, upwards: each window starts
// at the oldest id above the cursor that the other filters match, and
// the page's Next goes on above the windows read.
func listOldest(ctx context.Context, q *gen.Queries, k kinds.Kind, table lease.Table, a kinds.PageArgs, after int64, text string, limit int) (Page, error) {
	page := k.PageAsc
	a.AfterID, a.MaxID = after, math.MaxInt64
	if text == "" && a.Metadata == nil {
		items, err := page(ctx, q, a)
		if err != nil {
			return Page{}, fmt.Errorf("list %s: %w", table, err)
		}
		return pageOf(items, limit, 0), nil
	}
	var items []Item
	for w := 0; w < TextScanWindows; w++ {
		probe := a
		probe.Max, probe.Metadata = 1, nil
		bottom, err := page(ctx, q, probe)
		if err != nil {
			return Page{}, fmt.Errorf("list %s: %w", table, err)
		}
		if len(bottom) == 0 {
			return pageOf(items, limit, 0), nil
		}
		win := a
		win.AfterID = bottom[0].ID - 1
		win.MaxID = min(bottom[0].ID+TextScanWindow-1, lease.MaxItemID)
		if text != "" {
			win.ErrorText = &text
		}
		win.Max = int32(limit + 1 - len(items))
		got, err := page(ctx, q, win)
		if err != nil {
			return Page{}, fmt.Errorf("list %s: %w", table, err)
		}
		items = append(items, got...)
		if len(items) > limit || win.MaxID == lease.MaxItemID {
			return pageOf(items, limit, 0), nil
		}
		a.AfterID = win.MaxID
	}
	// The windows are read: go on above them next time.
	return pageOf(items, limit, a.AfterID), nil
}

// listStatusesOldest is listStatuses oldest first: each status's page
// from the same cursor, merged by id upwards. A status's Next is where
// its items stop being read (every id at or below it was read), so the
// merged page takes only the items at or below the lowest of those
// positions, and goes on above the last id it took or that position.
func listStatusesOldest(f Filter, statuses []string, list func(Filter) (Page, error)) (Page, error) {
	limit := f.Limit
	if limit == 0 {
		limit = DefaultLimit
	}
	var items []Item
	ceiling := int64(math.MaxInt64) // every status was read up to it (MaxInt64: to the end)
	for _, s := range statuses {
		g := f
		g.Status, g.Statuses = s, nil
		p, err := list(g)
		if err != nil {
			return Page{}, err
		}
		items = append(items, p.Items...)
		if p.Next != 0 {
			ceiling = min(ceiling, p.Next)
		}
	}
	slices.SortFunc(items, func(a, b Item) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	n := 0
	for n < len(items) && n < limit && items[n].ID <= ceiling {
		n++
	}
	p := Page{Items: items[:n:n]}
	if ceiling != math.MaxInt64 {
		p.Next = ceiling
	}
	if n == limit && n < len(items) {
		p.Next = items[n-1].ID
	}
	if p.Items == nil {
		p.Items = []Item{}
	}
	return p, nil
}
