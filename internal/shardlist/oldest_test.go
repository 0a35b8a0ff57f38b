package shardlist_test

import (
	"context"
	"slices"
	"testing"

	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/shardlist"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/workqtype"
)

// Oldest first, a shard read to its end before the list ends is not done:
// an item written on it meanwhile comes on a later page. (It was marked
// done, and such an item was never listed: TestClientListOldestFirst
// failed when its late item happened to go to that shard.)
func TestListOldestFirstSeesItemsWrittenOnAShardReadToItsEnd(t *testing.T) {
	ctx := context.Background()
	jq := jobq.New(jobq.Options{})
	enqueue := func(db workqtype.DB) string {
		t.Helper()
		res, err := jq.Enqueue(ctx, db, jobq.Job{Kind: "k"})
		if err != nil {
			t.Fatal(err)
		}
		return "j" + string(rune('0'+res.ID))
	}
	a, b := testdb.Pool(t), testdb.Pool(t)
	shards := []shardlist.Shard{{Name: "a", DB: a}, {Name: "b", DB: b}}
	var want []string
	want = append(want, "b:"+enqueue(b)) // b's only item, oldest of all
	for range 3 {
		want = append(want, "a:"+enqueue(a))
	}
	f := admin.Filter{Limit: 2, Oldest: true}
	page, err := shardlist.List(ctx, shards, lease.JobRuns, f, nil, shardlist.Options{})
	if err != nil || page.Next == nil {
		t.Fatalf("first page: %+v %v", page, err)
	}
	got := names(page.Items)
	want = append(want, "b:"+enqueue(b)) // written on b, read to its end
	for cur := page.Next; cur != nil; cur = page.Next {
		if page, err = shardlist.List(ctx, shards, lease.JobRuns, f, cur, shardlist.Options{}); err != nil {
			t.Fatal(err)
		}
		got = append(got, names(page.Items)...)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("oldest first: %v, want %v", got, want)
	}
}

func names(items []admin.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.Shard + ":j" + string(rune('0'+it.ID))
	}
	return out
}
