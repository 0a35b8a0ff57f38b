package api

import (
	"context"
	"fmt"
	"net/url"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/workqtype"
)

// A sharded API lists the items of every shard, merged newest first and
// each tagged with its shard, and pages through them all once; ?shard=
// lists one; reading and acting on an item names its shard.
func TestAPIListsItemsOfTwoShards(t *testing.T) {
	ctx := context.Background()
	second := testdb.Pool(t)
	e := newEnv(t, func(o *setup) {
		o.shards = []workq.Shard{{Name: "eu", Pool: o.pool}, {Name: "us", Pool: second}}
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
	if err := second.QueryRow(ctx, "select status from workq.job_runs_all where id = $1", id).Scan(&st); err != nil || lease.Status(st) != lease.StatusCancelled {
		t.Fatalf("status on us: %d %v", st, err)
	}
}

// A sharded API places new items as a sharded Client does: by key, the
// same key on the same shard; every result names its shard
// (shards_batch_test.go: batches over two shards).
func TestAPIEnqueuesOnTheKeysShard(t *testing.T) {
	second := testdb.Pool(t)
	e := newEnv(t, func(o *setup) {
		o.shards = []workq.Shard{{Name: "eu", Pool: o.pool}, {Name: "us", Pool: second}}
	})
	names := []string{"eu", "us"}
	var first, again jobResult
	e.must(201, "POST", "/v1/jobs", e.admin, map[string]any{"kind": "k", "dedup_key": "invoice:1"}).decode(t, &first)
	e.must(200, "POST", "/v1/jobs", e.admin, map[string]any{"kind": "k", "dedup_key": "invoice:1"}).decode(t, &again)
	if want := workqtype.ShardOf(names, workqtype.ShardKeyDedup("invoice:1")); first.Shard != want || again.Shard != want ||
		!again.Duplicate || again.ID != first.ID {
		t.Fatalf("dedup key: %+v then %+v, want both on %s", first, again, want)
	}
	var sent struct {
		ID    int64  `json:"id"`
		Shard string `json:"shard"`
	}
	e.must(201, "POST", "/v1/outbox", e.admin, map[string]any{"topic": "t", "partition_key": "order-7"}).decode(t, &sent)
	if want := workqtype.ShardOf(names, workqtype.ShardKeyPartition("order-7")); sent.Shard != want {
		t.Fatalf("partition key on %s, want %s", sent.Shard, want)
	}
	// An unkeyed message with a caller-given id goes to that id's shard,
	// so a resend lands where the first one did and is refused there,
	// whatever the round-robin would have chosen.
	for i := range 4 {
		id := fmt.Sprintf("7d0c5a2e-0000-4000-8000-00000000000%d", i)
		var m struct {
			Shard string `json:"shard"`
		}
		e.must(201, "POST", "/v1/outbox", e.admin, map[string]any{"topic": "t", "message_id": id}).decode(t, &m)
		if want := workqtype.ShardOf(names, workqtype.ShardKeyOutbox("", uuid.MustParse(id))); m.Shard != want {
			t.Fatalf("message id %s on %s, want %s", id, m.Shard, want)
		}
		e.must(409, "POST", "/v1/outbox", e.admin, map[string]any{"topic": "t", "message_id": id})
	}
	// Unkeyed items go round-robin.
	got := map[string]int{}
	for range 4 {
		var res timerResult
		e.must(201, "POST", "/v1/timers", e.admin, map[string]any{"topic": "t", "delay": "1h"}).decode(t, &res)
		got[res.Shard]++
	}
	if got["eu"] != 2 || got["us"] != 2 {
		t.Fatalf("4 timers went %v", got)
	}
}
