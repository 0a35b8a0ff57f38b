package shardlist_test

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/shardlist"
	"github.com/workq/workq/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// closedPool is a pool on a port nothing listens on: every statement
// fails at once.
func closedPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@"+addr+"/none?sslmode=disable&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// A shard that fails fails the list, naming it; tolerated, it is reported
// in Down and keeps its position in Next while the others page on.
func TestListWithAShardDown(t *testing.T) {
	ctx := context.Background()
	up := testdb.Pool(t)
	jq := jobq.New(jobq.Options{})
	for range 3 {
		if _, err := jq.Enqueue(ctx, up, jobq.Job{Kind: "k"}); err != nil {
			t.Fatal(err)
		}
	}
	shards := []shardlist.Shard{{Name: "down", DB: closedPool(t)}, {Name: "up", DB: up}}
	f := admin.Filter{Limit: 2}
	if _, err := shardlist.List(ctx, shards, lease.JobRuns, f, nil, shardlist.Options{}); err == nil || !strings.HasPrefix(err.Error(), "shard down: ") {
		t.Fatalf("untolerated: %v, want shard down's error", err)
	}
	cur := shardlist.Cursor{"down": 7}
	var got []int64
	for pages := 0; ; pages++ {
		page, err := shardlist.List(ctx, shards, lease.JobRuns, f, cur, shardlist.Options{Tolerate: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Down) != 1 || page.Down[0].Shard != "down" || page.Down[0].Err == nil {
			t.Fatalf("Down %+v", page.Down)
		}
		if page.Next == nil || page.Next["down"] != 7 {
			t.Fatalf("Next %v: the down shard's position is lost", page.Next)
		}
		for _, it := range page.Items {
			if it.Shard != "up" {
				t.Fatalf("item %+v", it)
			}
			got = append(got, it.ID)
		}
		if page.Next["up"] == 0 || pages == 3 {
			break
		}
		cur = page.Next
	}
	if len(got) != 3 || got[0] != 3 || got[2] != 1 {
		t.Fatalf("listed %v of up, want 3 2 1", got)
	}
}
