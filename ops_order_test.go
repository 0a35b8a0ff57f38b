package workq_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/workq/workq"
)

// listRefs pages through p to its end and returns the refs listed.
func listRefs(t *testing.T, c *workq.Client, p workq.ListParams) []workq.ItemRef {
	t.Helper()
	var out []workq.ItemRef
	for _, it := range listAll(t, c, p) {
		out = append(out, it.Ref())
	}
	return out
}

// List oldest first, on every table, on a Client of one database (default
// schema and another) and a sharded one: pages of the cursor go up every
// shard, several states merge, items written meanwhile come last, and a
// cursor of one order is refused by the other.
func TestClientListOldestFirst(t *testing.T) {
	ctx := context.Background()
	for name, c := range opsClients(t) {
		for _, table := range workq.Tables() {
			t.Run(name+"/"+string(table), func(t *testing.T) {
				kind := kindOf(table)
				var refs []workq.ItemRef // oldest first
				for i := range 7 {
					refs = append(refs, put(t, c, table, "asc", kind, i))
				}
				put(t, c, table, "other", kind, 99)
				p := workq.ListParams{Table: table, Queue: "asc", Order: workq.OldestFirst, Limit: 2}
				if got := listRefs(t, c, p); !slices.Equal(got, refs) {
					t.Fatalf("oldest first: %v, want %v", got, refs)
				}
				// The default is still newest first.
				checkNewestFirst(t, c, workq.ListParams{Table: table, Queue: "asc", Limit: 3}, refs)

				// An item written after the first page comes on a later one.
				first, err := c.List(ctx, p)
				if err != nil || first.Next == "" {
					t.Fatalf("first page: %+v %v", first, err)
				}
				late := put(t, c, table, "asc", kind, 7)
				rest := p
				rest.Cursor = first.Next
				got := []workq.ItemRef{first.Items[0].Ref(), first.Items[1].Ref()}
				got = append(got, listRefs(t, c, rest)...)
				if want := append(slices.Clone(refs), late); !slices.Equal(got, want) {
					t.Fatalf("with an item written meanwhile: %v, want %v", got, want)
				}

				// Several states, merged oldest first; an error text.
				fail(t, c, refs[4])
				fail(t, c, refs[1])
				if _, err := c.Cancel(ctx, refs[5], nil); err != nil {
					t.Fatal(err)
				}
				p.States = []string{workq.StateCancelled, workq.StateFailed}
				if got, want := listRefs(t, c, p), []workq.ItemRef{refs[1], refs[4], refs[5]}; !slices.Equal(got, want) {
					t.Fatalf("failed or cancelled, oldest first: %v, want %v", got, want)
				}
				p.States, p.ErrorText = nil, "BOOM"
				if got, want := listRefs(t, c, p), []workq.ItemRef{refs[1], refs[4]}; !slices.Equal(got, want) {
					t.Fatalf("error text, oldest first: %v, want %v", got, want)
				}

				// One order's cursor is not the other's; matching walks
				// newest first only; an unknown order is refused.
				newest, err := c.List(ctx, workq.ListParams{Table: table, Queue: "asc", Limit: 2})
				if err != nil || newest.Next == "" {
					t.Fatalf("newest first page: %+v %v", newest, err)
				}
				bad := []workq.ListParams{
					{Table: table, Queue: "asc", Order: workq.OldestFirst, Cursor: newest.Next},
					{Table: table, Queue: "asc", Cursor: first.Next},
					{Table: table, Order: "sideways"},
				}
				for _, b := range bad {
					if _, err := c.List(ctx, b); !errors.Is(err, workq.ErrInvalid) {
						t.Errorf("List(%+v): %v, want ErrInvalid", b, err)
					}
				}
				m := workq.ListParams{Table: table, Queue: "asc", Order: workq.OldestFirst, Shard: refs[0].Shard}
				if _, err := c.RetryMatching(ctx, m, 0, nil); !errors.Is(err, workq.ErrInvalid) {
					t.Errorf("RetryMatching oldest first: %v, want ErrInvalid", err)
				}
				m.Order, m.Cursor = "", first.Next
				if _, err := c.RetryMatching(ctx, m, 0, nil); !errors.Is(err, workq.ErrInvalid) {
					t.Errorf("RetryMatching with an oldest-first cursor: %v, want ErrInvalid", err)
				}
			})
		}
	}
}
