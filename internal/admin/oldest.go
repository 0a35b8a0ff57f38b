package admin

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/lease"
)

// ascPages are the tables' oldest-first page statements (<Table>PageAsc):
// the keyset walk of the page statements, up the same indexes (a b-tree
// reads both ways).
var ascPages = map[lease.Table]func(ctx context.Context, q *gen.Queries, a pageArgs) ([]Item, error){
	lease.JobRuns: func(ctx context.Context, q *gen.Queries, a pageArgs) ([]Item, error) {
		rows, err := q.JobRunsPageAsc(ctx, gen.JobRunsPageAscParams{AfterID: a.afterID, Queue: a.queue, Status: a.status, Kind: a.kind,
			CreatedAfter: a.after, CreatedBefore: a.createdBefore, MaxID: a.maxID, ErrorText: a.errorText, Metadata: a.metadata, MaxRows: a.max})
		return mapRows(rows, err, jobRunItem)
	},
	lease.Outbox: func(ctx context.Context, q *gen.Queries, a pageArgs) ([]Item, error) {
		rows, err := q.OutboxPageAsc(ctx, gen.OutboxPageAscParams{AfterID: a.afterID, Queue: a.queue, Status: a.status, Kind: a.kind,
			CreatedAfter: a.after, CreatedBefore: a.createdBefore, MaxID: a.maxID, ErrorText: a.errorText, MaxRows: a.max})
		return mapRows(rows, err, outboxItem)
	},
	lease.Inbox: func(ctx context.Context, q *gen.Queries, a pageArgs) ([]Item, error) {
		rows, err := q.InboxPageAsc(ctx, gen.InboxPageAscParams{AfterID: a.afterID, Queue: a.queue, Status: a.status, Kind: a.kind,
			CreatedAfter: a.after, CreatedBefore: a.createdBefore, MaxID: a.maxID, ErrorText: a.errorText, MaxRows: a.max})
		return mapRows(rows, err, inboxItem)
	},
	lease.Timers: func(ctx context.Context, q *gen.Queries, a pageArgs) ([]Item, error) {
		rows, err := q.TimersPageAsc(ctx, gen.TimersPageAscParams{AfterID: a.afterID, Queue: a.queue, Status: a.status, Kind: a.kind,
			CreatedAfter: a.after, CreatedBefore: a.createdBefore, MaxID: a.maxID, ErrorText: a.errorText, MaxRows: a.max})
		return mapRows(rows, err, timerItem)
	},
}

// listOldest is List oldest first, from after (0: the oldest): one page up
// the primary key (failed items: their index). With an error text or
// metadata it reads windows as listText does, upwards: each window starts
// at the oldest id above the cursor that the other filters match, and
// the page's Next goes on above the windows read.
func listOldest(ctx context.Context, q *gen.Queries, table lease.Table, a pageArgs, after int64, text string, limit int) (Page, error) {
	page, ok := ascPages[table]
	if !ok {
		return Page{}, invalid("table", "table %s has no oldest-first page", table)
	}
	a.afterID, a.maxID = after, math.MaxInt64
	if text == "" && a.metadata == nil {
		items, err := page(ctx, q, a)
		if err != nil {
			return Page{}, fmt.Errorf("list %s: %w", table, err)
		}
		return pageOf(items, limit, 0), nil
	}
	var items []Item
	for w := 0; w < TextScanWindows; w++ {
		probe := a
		probe.max, probe.metadata = 1, nil
		bottom, err := page(ctx, q, probe)
		if err != nil {
			return Page{}, fmt.Errorf("list %s: %w", table, err)
		}
		if len(bottom) == 0 {
			return pageOf(items, limit, 0), nil
		}
		win := a
		win.afterID = bottom[0].ID - 1
		win.maxID = min(bottom[0].ID+TextScanWindow-1, lease.MaxItemID)
		if text != "" {
			win.errorText = &text
		}
		win.max = int32(limit + 1 - len(items))
		got, err := page(ctx, q, win)
		if err != nil {
			return Page{}, fmt.Errorf("list %s: %w", table, err)
		}
		items = append(items, got...)
		if len(items) > limit || win.maxID == lease.MaxItemID {
			return pageOf(items, limit, 0), nil
		}
		a.afterID = win.maxID
	}
	// The windows are read: go on above them next time.
	return pageOf(items, limit, a.afterID), nil
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
