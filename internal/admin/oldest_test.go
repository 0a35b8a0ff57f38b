package admin_test

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
)

// listAllOldest follows an oldest-first list's cursor to its end.
func listAllOldest(t *testing.T, pool *pgxpool.Pool, f admin.Filter) (ids []int64, pages int) {
	t.Helper()
	f.Oldest = true
	for {
		p, err := admin.List(context.Background(), pool, lease.JobRuns, f)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(p.Items) > max(f.Limit, 1) && f.Limit != 0 {
			t.Fatalf("page %d: %d items, limit %d", pages, len(p.Items), f.Limit)
		}
		ids = append(ids, pageIDs(p)...)
		if p.Next == 0 {
			return ids, pages
		}
		if pages > 20 {
			t.Fatalf("still paging after %d pages (next %d)", pages, p.Next)
		}
		if p.Next <= f.After {
			t.Fatalf("page %d: next %d does not move up from %d", pages, p.Next, f.After)
		}
		f.After = p.Next
	}
}

// Oldest first, a list walks the ids up from its cursor: every page, with
// one status or several, and an error-text search window by window
// upwards, each match once, in id order.
func TestListOldestFirst(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	span := admin.TextScanWindow * admin.TextScanWindows
	n := span + span/2
	// Oldest first: position 1 is the oldest. A match at the bottom, one
	// just past the first page's windows, one near the top.
	ids := fill(t, pool, "q", n, 1, span+10, n-3)
	other := insert(t, pool, lease.JobRuns, "other", "k") // another queue, newer

	found, pages := listAllOldest(t, pool, admin.Filter{Queue: "q", ErrorText: "smtp TIMEOUT", Limit: 10})
	want := []int64{ids[0], ids[span+9], ids[n-4]}
	if !slices.Equal(found, want) {
		t.Fatalf("error text, oldest first: found %v, want %v", found, want)
	}
	if pages < 2 {
		t.Errorf("%d pages: the first page read more than its %d ids", pages, span)
	}

	// Pages of the failed index, and of several statuses merged.
	found, _ = listAllOldest(t, pool, admin.Filter{Queue: "q", Status: "failed", Limit: 2})
	if !slices.Equal(found, want) {
		t.Fatalf("failed, oldest first: %v, want %v", found, want)
	}
	setStatus(t, pool, lease.JobRuns, ids[5], lease.StatusCancelled)
	setStatus(t, pool, lease.JobRuns, ids[n-1], lease.StatusCancelled)
	found, _ = listAllOldest(t, pool, admin.Filter{Queue: "q", Statuses: []string{"cancelled", "failed"}, Limit: 2})
	if w := []int64{ids[0], ids[5], ids[span+9], ids[n-4], ids[n-1]}; !slices.Equal(found, w) {
		t.Fatalf("failed or cancelled, oldest first: %v, want %v", found, w)
	}

	// The first page: the oldest items, and a cursor.
	p, err := admin.List(ctx, pool, lease.JobRuns, admin.Filter{Oldest: true, Limit: 3})
	if err != nil || !slices.Equal(pageIDs(p), ids[:3]) || p.Next != ids[2] {
		t.Fatalf("first page: %v next %d (%v), want %v next %d", pageIDs(p), p.Next, err, ids[:3], ids[2])
	}
	// The last page: the newest, no cursor.
	p, err = admin.List(ctx, pool, lease.JobRuns, admin.Filter{Oldest: true, After: ids[n-2], Limit: 3})
	if err != nil || !slices.Equal(pageIDs(p), []int64{ids[n-1], other}) || p.Next != 0 {
		t.Fatalf("last page: %v next %d (%v), want [%d %d] and none", pageIDs(p), p.Next, err, ids[n-1], other)
	}
	if _, err := admin.List(ctx, pool, lease.JobRuns, admin.Filter{Oldest: true, After: -1}); err == nil {
		t.Fatal("a negative cursor is refused")
	}
}
