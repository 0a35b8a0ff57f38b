package api

import (
	"context"
	"fmt"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/lease"
)

// A sharded API lists the items of every shard, merged newest first and
// each tagged with its shard, and pages through them all once; ?shard=
// lists one; reading and acting on an item names its shard.
func TestAPIListsItemsOfTwoShards(t *testing.T) {
	ctx := context.Background()
	second := testdb.Pool(t)
	e := newEnv(t, func(o *Options) {
		o.Shards = []Shard{{Name: "eu", DB: o.DB}, {Name: "us", DB: second}}
		o.DB = nil
	})
	jq := jobq.New(jobq.Options{})
	want := map[string]map[int64]bool{"eu": {}, "us": {}}
	for i := range 7 {
		for name, db := range map[string]*pgxpool.Pool{"eu": e.pool, "us": second} {
			r, err := jq.Enqueue(ctx, db, jobq.Job{Kind: fmt.Sprintf("k.%s.%d", name, i)})
			if err != nil {
				t.Fatal(err)
			}
			want[name][r.ID] = true
		}
	}
	// Every item once, over pages of 3, each tagged with its shard.
	got := map[string]int{}
	path := "/v1/tables/job_runs/items?limit=3"
	pages := 0
	for {
		var page listPage
		e.must(200, "GET", path, e.read, nil).decode(t, &page)
		pages++
		for _, it := range page.Items {
			if !want[it.Shard][it.ID] {
				t.Fatalf("item %+v is not one of shard %q's", it, it.Shard)
			}
			if it.Kind[2:4] != it.Shard {
				t.Fatalf("item of kind %s tagged %s", it.Kind, it.Shard)
			}
			delete(want[it.Shard], it.ID)
			got[it.Shard]++
		}
		if page.NextCursor == nil {
			break
		}
		path = "/v1/tables/job_runs/items?limit=3&cursor=" + url.QueryEscape(*page.NextCursor)
		if pages > 10 {
			t.Fatal("more than 10 pages of 14 items")
		}
	}
	if got["eu"] != 7 || got["us"] != 7 || pages != 5 {
		t.Fatalf("listed %v in %d pages, want 7 of each in 5", got, pages)
	}
	// One shard.
	var page listPage
	e.must(200, "GET", "/v1/tables/job_runs/items?shard=us", e.read, nil).decode(t, &page)
	if len(page.Items) != 7 || page.Items[0].Shard != "us" {
		t.Fatalf("?shard=us: %+v", page.Items)
	}
	id := page.Items[0].ID
	// An item is (shard, id).
	if r := e.must(400, "GET", fmt.Sprintf("/v1/tables/job_runs/items/%d", id), e.read, nil).err(t); r.Field != "shard" {
		t.Fatalf("get without a shard: %+v", r)
	}
	e.must(404, "GET", fmt.Sprintf("/v1/tables/job_runs/items/%d?shard=mars", id), e.read, nil)
	var one itemWithAttempts
	e.must(200, "GET", fmt.Sprintf("/v1/tables/job_runs/items/%d?shard=us", id), e.read, nil).decode(t, &one)
	if one.Item.Shard != "us" || one.Item.ID != id {
		t.Fatalf("get: %+v", one.Item)
	}
	e.must(400, "POST", "/v1/tables/job_runs/items/cancel", e.admin, map[string]any{"ids": []int64{id}})
	var res struct {
		Applied []int64 `json:"applied"`
	}
	e.must(200, "POST", "/v1/tables/job_runs/items/cancel", e.admin, map[string]any{"ids": []int64{id}, "shard": "us"}).decode(t, &res)
	if len(res.Applied) != 1 || res.Applied[0] != id {
		t.Fatalf("cancel on us: %+v", res)
	}
	var st int16
	if err := second.QueryRow(ctx, "select status from workq.job_runs where id = $1", id).Scan(&st); err != nil || lease.Status(st) != lease.StatusCancelled {
		t.Fatalf("status on us: %d %v", st, err)
	}
}
