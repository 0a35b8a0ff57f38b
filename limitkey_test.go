package workq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/workqtype"
)

// limitKeyOf reads a job's limit key through the Client's Get (its
// details), "" for none.
func limitKeyOf(t *testing.T, c *workq.Client, id int64) string {
	t.Helper()
	it, err := c.Get(context.Background(), workq.ItemRef{Table: workq.TableJobRuns, ID: id})
	if err != nil {
		t.Fatal(err)
	}
	k, _ := it.Details["limit_key"].(string)
	return k
}

// A limit key set by EnqueueOpts or by the args (ArgsWithLimitKey; the
// options win) is stored by every enqueue path of the Client, shown by
// Get, filtered by List, and seen by the handler (Job.LimitKey).
func TestEnqueueLimitKeyEveryPath(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	var mu sync.Mutex
	seen := map[int64]string{}
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(_ context.Context, job *workq.Job[TenantReportArgs]) error {
		mu.Lock()
		defer mu.Unlock()
		seen[job.ID] = job.LimitKey
		return nil
	}))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers, FetchPollInterval: 50 * time.Millisecond,
		Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]string{}
	add := func(what string, rs []workq.Enqueued, err error, keys ...string) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for i, r := range rs {
			if got := limitKeyOf(t, client, r.ID); got != keys[i] {
				t.Fatalf("%s: job %d has limit key %q, want %q", what, i, got, keys[i])
			}
			want[r.ID] = keys[i]
		}
	}
	one := func(r workq.Enqueued, err error) ([]workq.Enqueued, error) { return []workq.Enqueued{r}, err }

	rs, err := one(client.Enqueue(ctx, TenantReportArgs{Tenant: "from-args"}, nil))
	add("Enqueue, args' key", rs, err, "from-args")
	rs, err = one(client.Enqueue(ctx, TenantReportArgs{Tenant: "from-args"}, &workq.EnqueueOpts{LimitKey: "from-opts"}))
	add("Enqueue, options' key", rs, err, "from-opts")
	rs, err = one(client.Enqueue(ctx, TenantReportArgs{}, nil))
	add("Enqueue, no key", rs, err, "")
	rs, err = one(client.Enqueue(ctx, TenantReportArgs{Tenant: "dedup"}, &workq.EnqueueOpts{DedupKey: "d"}))
	add("Enqueue, dedup key", rs, err, "dedup")
	rs, err = one(client.Enqueue(ctx, TenantReportArgs{Tenant: "unique"}, &workq.EnqueueOpts{Unique: workq.UniqueOpts{ByArgs: true}}))
	add("Enqueue, unique", rs, err, "unique")
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		rs, err = one(client.EnqueueTx(ctx, tx, TenantReportArgs{Tenant: "tx"}, nil))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	add("EnqueueTx", rs, nil, "tx")

	batch := []workq.EnqueueParams{{Args: TenantReportArgs{Tenant: "b1"}}, {Args: TenantReportArgs{}},
		{Args: TenantReportArgs{Tenant: "x"}, Opts: &workq.EnqueueOpts{LimitKey: "b2"}}}
	rs, err = client.EnqueueMany(ctx, batch)
	add("EnqueueMany", rs, err, "b1", "", "b2")
	rs, err = client.EnqueueMany(ctx, []workq.EnqueueParams{{Args: TenantReportArgs{Tenant: "run-at"}, Opts: &workq.EnqueueOpts{RunAt: time.Now()}}})
	add("EnqueueMany with RunAt", rs, err, "run-at")
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		rs, err = client.EnqueueManyTx(ctx, tx, batch)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	add("EnqueueManyTx", rs, nil, "b1", "", "b2")

	if _, err := client.EnqueueManyFast(ctx, []workq.EnqueueParams{{Args: TenantReportArgs{Tenant: "fast"}}, {Args: TenantReportArgs{}}}); err != nil {
		t.Fatal(err)
	}
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := client.EnqueueManyFastTx(ctx, tx, []workq.EnqueueParams{{Args: TenantReportArgs{Tenant: "fast-tx"}}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"fast", "fast-tx"} {
		res, err := client.List(ctx, workq.ListParams{LimitKey: key})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Items) != 1 || res.Items[0].Details["limit_key"] != key {
			t.Fatalf("List(LimitKey %q): %d items %+v, want the fast path's one", key, len(res.Items), res.Items)
		}
		want[res.Items[0].ID] = key
	}
	res, err := client.List(ctx, workq.ListParams{LimitKey: "b1"})
	if err != nil || len(res.Items) != 2 {
		t.Fatalf("List(LimitKey b1): %+v, %v; want the two batches' jobs", res.Items, err)
	}
	res, err = client.List(ctx, workq.ListParams{})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range res.Items {
		if _, ok := want[it.ID]; !ok { // the fast path's job without a key
			want[it.ID] = ""
		}
	}

	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer client.Stop(ctx)
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n == len(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs ran", n, len(want))
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	for id, k := range want {
		if seen[id] != k {
			t.Errorf("job %d: the handler saw limit key %q, want %q", id, seen[id], k)
		}
	}
}

// An invalid limit key, from the options or the args, is refused with an
// error wrapping ErrInvalid naming limit_key, and nothing is written: a
// batch with one is refused whole. A limit key filter on another table
// than job runs is refused too.
func TestEnqueueLimitKeyInvalid(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	client, err := workq.NewClient(pool, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("k", 257)
	check := func(what string, err error) {
		t.Helper()
		var ve *workqtype.ValidationError
		if !errors.Is(err, workq.ErrInvalid) || !errors.As(err, &ve) || ve.Field != "limit_key" {
			t.Fatalf("%s: %v, want ErrInvalid naming limit_key", what, err)
		}
	}
	_, err = client.Enqueue(ctx, TenantReportArgs{}, &workq.EnqueueOpts{LimitKey: "a\x00b"})
	check("Enqueue, key with NUL", err)
	_, err = client.Enqueue(ctx, TenantReportArgs{}, &workq.EnqueueOpts{LimitKey: long})
	check("Enqueue, long key", err)
	_, err = client.Enqueue(ctx, TenantReportArgs{Tenant: long}, nil)
	check("Enqueue, args' long key", err)
	check("ValidateArgs", client.ValidateArgs(TenantReportArgs{Tenant: "\xff"}, nil))
	batch := []workq.EnqueueParams{{Args: TenantReportArgs{Tenant: "ok"}}, {Args: TenantReportArgs{}, Opts: &workq.EnqueueOpts{LimitKey: long}}}
	_, err = client.EnqueueMany(ctx, batch)
	check("EnqueueMany", err)
	_, err = client.EnqueueManyFast(ctx, batch)
	check("EnqueueManyFast", err)
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := client.EnqueueManyTx(ctx, tx, batch)
		check("EnqueueManyTx", err)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n := countIn(t, pool, "job_runs", "true"); n != 0 {
		t.Fatalf("%d jobs written by refused requests", n)
	}
	_, err = client.List(ctx, workq.ListParams{Table: workq.TableOutbox, LimitKey: "k"})
	var ve *workqtype.ValidationError
	if !errors.Is(err, workq.ErrInvalid) || !errors.As(err, &ve) || ve.Field != "limit_key" {
		t.Fatalf("List of the outbox by limit key: %v, want ErrInvalid naming limit_key", err)
	}
}

// On a sharded Client every job of a limit key is on its key's shard
// (ShardFor(LimitKey(key)), what ShardForArgs says), whichever enqueue
// path wrote it, so one database counts all of a key's jobs; jobs of
// several keys spread over the shards. A dedup key routes a job instead.
func TestShardedLimitKeyOneShard(t *testing.T) {
	ctx := context.Background()
	pools := map[string]*pgxpool.Pool{"a": testdb.Pool(t), "b": testdb.Pool(t)}
	client, err := workq.NewShardedClient([]workq.Shard{{Name: "a", Pool: pools["a"]}, {Name: "b", Pool: pools["b"]}},
		workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	const keys = 16
	key := func(k int) string { return fmt.Sprintf("tenant-%d", k) }
	for k := range keys {
		r, err := client.Enqueue(ctx, TenantReportArgs{Tenant: key(k)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := client.ShardFor(workq.LimitKey(key(k)))
		if r.Shard != want {
			t.Fatalf("key %s enqueued on %q, ShardFor says %q", key(k), r.Shard, want)
		}
		if s, err := client.ShardForArgs(TenantReportArgs{Tenant: key(k)}, nil); err != nil || s != want {
			t.Fatalf("ShardForArgs of key %s: %q, %v; want %q", key(k), s, err, want)
		}
	}
	var batch []workq.EnqueueParams
	for k := range keys {
		batch = append(batch, workq.EnqueueParams{Args: TenantReportArgs{}, Opts: &workq.EnqueueOpts{LimitKey: key(k)}})
	}
	rs, err := client.EnqueueMany(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		if want := client.ShardFor(workq.LimitKey(key(i))); r.Shard != want {
			t.Fatalf("batch job of key %s on %q, want %q", key(i), r.Shard, want)
		}
	}
	for range 2 {
		if n, err := client.EnqueueManyFast(ctx, batch); err != nil || n != keys {
			t.Fatalf("EnqueueManyFast: %d, %v", n, err)
		}
	}
	// An invalid job on one shard's part refuses the whole fast batch.
	bad := append(batch[:len(batch):len(batch)], workq.EnqueueParams{Args: TenantReportArgs{Tenant: "\xff"}})
	if _, err := client.EnqueueManyFast(ctx, bad); !errors.Is(err, workq.ErrInvalid) {
		t.Fatalf("EnqueueManyFast with an invalid key: %v, want ErrInvalid", err)
	}
	perShard := map[string]int{}
	for k := range keys {
		want := client.ShardFor(workq.LimitKey(key(k)))
		for name, pool := range pools {
			n := countIn(t, pool, "job_runs", "limit_key = $1", key(k))
			if name == want && n != 4 || name != want && n != 0 {
				t.Fatalf("key %s: %d jobs on shard %s, want all 4 on %s", key(k), n, name, want)
			}
		}
		perShard[want]++
	}
	if len(perShard) != 2 {
		t.Fatalf("keys per shard %v: want both shards used", perShard)
	}
	// A dedup key wins: the job goes where its dedup key does.
	r, err := client.Enqueue(ctx, TenantReportArgs{Tenant: key(0)}, &workq.EnqueueOpts{DedupKey: "dk"})
	if err != nil {
		t.Fatal(err)
	}
	if want := client.ShardFor(workq.DedupKey("dk")); r.Shard != want {
		t.Fatalf("a job with a dedup and a limit key on %q, want its dedup key's %q", r.Shard, want)
	}
}
