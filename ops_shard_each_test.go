package workq_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/testutil"
	"github.com/workq/workq/outbox"
)

// EachShard runs on every shard at once and reports the shards that
// failed or did not answer in time, by name; the others' work is done.
func TestClientEachShard(t *testing.T) {
	ctx := context.Background()
	down, px := testutil.ProxiedPool(t, testdb.URL(t))
	c, err := workq.NewShardedClient([]workq.Shard{{Name: "a", Pool: testdb.Pool(t)}, {Name: "b", Pool: down}}, workq.Config{})
	if err != nil {
		t.Fatal(err)
	}
	put(t, c, workq.TableJobRuns, "q", "", 1)
	var mu sync.Mutex
	var seen []string
	count := func(ctx context.Context, sc *workq.Client) error {
		res, err := sc.List(ctx, workq.ListParams{})
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s:%d", sc.ShardName(), len(res.Items)))
		mu.Unlock()
		return err
	}
	if failed := c.EachShard(ctx, 0, count); failed != nil {
		t.Fatalf("every shard up: failed %v", failed)
	}
	slices.Sort(seen)
	if len(seen) != 2 || seen[0][:2] != "a:" || seen[1][:2] != "b:" {
		t.Fatalf("ran on %v, want a and b", seen)
	}

	px.Cut()
	defer px.Restore()
	seen = nil
	start := time.Now()
	failed := c.EachShard(ctx, 300*time.Millisecond, count)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("EachShard took %s with a shard cut", took)
	}
	if len(failed) != 1 || !errors.Is(failed["b"], context.DeadlineExceeded) {
		t.Fatalf("failed %v, want b's deadline", failed)
	}
	if !slices.ContainsFunc(seen, func(s string) bool { return s[:2] == "a:" }) {
		t.Fatalf("a was not read with b down: %v", seen)
	}

	// A Client of one database runs f on itself, under its name.
	one, err := workq.NewClient(testdb.Pool(t), workq.Config{})
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	failed = one.EachShard(ctx, 0, func(_ context.Context, sc *workq.Client) error {
		if sc != one {
			t.Error("the Client of one database ran f on another Client")
		}
		return boom
	})
	if len(failed) != 1 || failed[workq.DefaultShard] != boom {
		t.Fatalf("failed %v, want default: boom", failed)
	}
}

// QueueControls lists every shard's pauses and limits, a row per shard.
func TestClientQueueControls(t *testing.T) {
	ctx := context.Background()
	for name, c := range opsClients(t) {
		t.Run(name, func(t *testing.T) {
			ctl, err := c.QueueControls(ctx)
			if err != nil || len(ctl) != 0 {
				t.Fatalf("new database: %v %v", ctl, err)
			}
			shards := c.Shards()
			if _, err := c.PauseQueue(ctx, workq.QueueRef{Table: workq.TableJobRuns, Queue: "mail"}, &workq.ActionOpts{Actor: "ops:ada", Reason: "smtp down"}); err != nil {
				t.Fatal(err)
			}
			last := shards[len(shards)-1]
			if err := c.SetQueueLimit(ctx, workq.QueueRef{Table: workq.TableOutbox, Queue: "hooks", Shard: last}, 7); err != nil {
				t.Fatal(err)
			}
			ctl, err = c.QueueControls(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(ctl) != len(shards)+1 {
				t.Fatalf("%d rows, want %d: %+v", len(ctl), len(shards)+1, ctl)
			}
			for i, sh := range shards { // job_runs sorts first
				r := ctl[i]
				if r.Table != workq.TableJobRuns || r.Queue != "mail" || r.Shard != sh || !r.Paused || r.PausedBy != "ops:ada" ||
					r.PauseReason != "smtp down" || r.PausedAt == nil || r.Limit != nil {
					t.Errorf("row %d: %+v, want mail paused by ops:ada on %s", i, r, sh)
				}
			}
			if r := ctl[len(shards)]; r.Table != workq.TableOutbox || r.Queue != "hooks" || r.Shard != last || r.Paused ||
				r.Limit == nil || *r.Limit != 7 {
				t.Errorf("limit row %+v, want outbox/hooks W 7 on %s", r, last)
			}
		})
	}
}

// OutboxKeys lists the keys of a queue with their heads, in key order
// over every shard; OnlyBlocked those whose head failed. ListJoins lists
// the joins newest first, and refuses a sharded Client.
func TestClientOutboxKeysAndJoins(t *testing.T) {
	ctx := context.Background()
	for name, c := range opsClients(t) {
		t.Run(name, func(t *testing.T) {
			var heads []workq.ItemRef
			for _, key := range []string{"k3", "k1", "k2"} {
				for i := range 2 {
					r, err := c.Send(ctx, outbox.Message{Queue: "hooks", Topic: "t", PartitionKey: key, Payload: map[string]int{"n": i}})
					if err != nil {
						t.Fatal(err)
					}
					if i == 0 {
						heads = append(heads, workq.ItemRef{Table: workq.TableOutbox, ID: r.ID, Shard: r.Shard})
					}
				}
			}
			fail(t, c, heads[1]) // k1's head
			keys, err := c.OutboxKeys(ctx, workq.OutboxKeysParams{Queue: "hooks"})
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, k := range keys {
				names = append(names, k.PartitionKey)
			}
			if !slices.Equal(names, []string{"k1", "k2", "k3"}) {
				t.Fatalf("keys %v, want k1 k2 k3", names)
			}
			if k := keys[0]; !k.Blocked || k.State != "failed" || k.HeadID != heads[1].ID || k.Shard != heads[1].Shard || k.LastError != "boom" {
				t.Errorf("k1 %+v, want blocked by its failed head %s", k, heads[1])
			}
			if keys[1].Blocked || keys[1].State != "ready" {
				t.Errorf("k2 %+v, want ready", keys[1])
			}
			blocked, err := c.OutboxKeys(ctx, workq.OutboxKeysParams{Queue: "hooks", OnlyBlocked: true})
			if err != nil || len(blocked) != 1 || blocked[0].PartitionKey != "k1" {
				t.Fatalf("blocked %+v %v, want k1", blocked, err)
			}
			page, err := c.OutboxKeys(ctx, workq.OutboxKeysParams{Queue: "hooks", AfterKey: "k1", Limit: 1})
			if err != nil || len(page) != 1 || page[0].PartitionKey != "k2" {
				t.Fatalf("after k1, limit 1: %+v %v, want k2", page, err)
			}
			for _, p := range []workq.OutboxKeysParams{{Limit: -1}, {Limit: workq.MaxOutboxKeys + 1}, {Queue: "a b"}} {
				if _, err := c.OutboxKeys(ctx, p); !errors.Is(err, workq.ErrInvalid) {
					t.Errorf("%+v: %v, want ErrInvalid", p, err)
				}
			}

			jc := c
			if len(c.Shards()) > 1 {
				if _, err := c.ListJoins(ctx, workq.ListJoinsParams{}); !errors.Is(err, workq.ErrInvalid) {
					t.Fatalf("ListJoins on a sharded Client: %v, want ErrInvalid", err)
				}
				if jc, err = c.Shard(c.Shards()[0]); err != nil {
					t.Fatal(err)
				}
			}
			var ids []int64
			for range 3 {
				j, err := jc.StartJoin(ctx, outbox.JoinSpec{Expected: 1, OnComplete: outbox.JoinMessage{Topic: "done"}})
				if err != nil {
					t.Fatal(err)
				}
				ids = append([]int64{j.ID}, ids...)
			}
			joins, err := jc.ListJoins(ctx, workq.ListJoinsParams{OnlyOpen: true, Limit: 2})
			if err != nil || len(joins) != 2 || joins[0].ID != ids[0] || joins[1].ID != ids[1] {
				t.Fatalf("joins %+v %v, want %v", joins, err, ids[:2])
			}
			joins, err = jc.ListJoins(ctx, workq.ListJoinsParams{Before: joins[1].ID})
			if err != nil || len(joins) != 1 || joins[0].ID != ids[2] {
				t.Fatalf("next page %+v %v, want %d", joins, err, ids[2])
			}
		})
	}
}
