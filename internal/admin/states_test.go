package admin_test

import (
	"context"
	"slices"
	"testing"

	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
)

// A filter of several statuses pages through the items in any of them,
// newest first, without repeating or skipping one, whatever the page size,
// with and without an error text (whose windows stop each status's read
// early).
func TestListSeveralStatuses(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	table := lease.JobRuns
	var want []int64 // failed or cancelled, newest first
	for i := 0; i < 30; i++ {
		id := insert(t, pool, table, "q", "k")
		switch i % 3 {
		case 0:
			setStatus(t, pool, table, id, lease.StatusFailed)
			want = append([]int64{id}, want...)
		case 1:
			setStatus(t, pool, table, id, lease.StatusCancelled)
			want = append([]int64{id}, want...)
		}
	}
	cases := []struct {
		name string
		f    admin.Filter
		want []int64
	}{
		{"two statuses", admin.Filter{Statuses: []string{"failed", "cancelled"}}, want},
		{"status and statuses", admin.Filter{Status: "cancelled", Statuses: []string{"dead"}}, want},
		{"one status twice", admin.Filter{Status: "failed", Statuses: []string{"failed"}}, slices.DeleteFunc(slices.Clone(want), func(id int64) bool {
			return (id-want[len(want)-1])%3 != 0
		})},
	}
	for _, tc := range cases {
		for _, limit := range []int{1, 3, 7, 50} {
			f := tc.f
			f.Limit = limit
			var got []int64
			for pages := 0; ; pages++ {
				p, err := admin.List(ctx, pool, table, f)
				if err != nil {
					t.Fatal(err)
				}
				if len(p.Items) > limit || pages > 40 {
					t.Fatalf("%s, limit %d: page of %d, next %d", tc.name, limit, len(p.Items), p.Next)
				}
				for _, it := range p.Items {
					got = append(got, it.ID)
				}
				if p.Next == 0 {
					break
				}
				f.Before = p.Next
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s, limit %d: %v, want %v", tc.name, limit, got, tc.want)
			}
		}
	}
	// An error text: only the failed ones have last_error "boom".
	f := admin.Filter{Statuses: []string{"failed", "cancelled", "ready"}, ErrorText: "BOO", Limit: 2}
	var got []int64
	for pages := 0; ; pages++ {
		p, err := admin.List(ctx, pool, table, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range p.Items {
			got = append(got, it.ID)
		}
		if p.Next == 0 || pages > 40 {
			break
		}
		f.Before = p.Next
	}
	if !slices.Equal(got, cases[2].want) {
		t.Errorf("error text over three statuses: %v, want %v", got, cases[2].want)
	}
	if _, err := admin.List(ctx, pool, table, admin.Filter{Statuses: []string{"waiting"}}); err == nil {
		t.Error("an unknown status in Statuses is accepted")
	}
}
