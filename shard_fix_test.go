package workq_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/inbox"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/outbox"
)

// twoShards returns a sharded Client over shards a and b (no maintenance
// unless cfg asks) and their pools.
func twoShards(t *testing.T, cfg workq.Config) (*workq.Client, map[string]*pgxpool.Pool) {
	t.Helper()
	pools := map[string]*pgxpool.Pool{"a": testdb.Pool(t), "b": testdb.Pool(t)}
	c, err := workq.NewShardedClient([]workq.Shard{{Name: "a", Pool: pools["a"]}, {Name: "b", Pool: pools["b"]}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, pools
}

// inboxIDOn returns a message id of source whose key goes to shard.
func inboxIDOn(t *testing.T, c *workq.Client, source, shard, prefix string) string {
	t.Helper()
	for i := range 1000 {
		id := fmt.Sprintf("%s-%d", prefix, i)
		if c.ShardFor(workq.InboxKey(source, id)) == shard {
			return id
		}
	}
	t.Fatalf("no id of prefix %s on shard %s", prefix, shard)
	return ""
}

// A conflict on one shard does not stop the batch (review B3): the other
// shards' messages are received, every result comes back in input order,
// and the error joins one ConflictError per conflict, indexed in the batch.
func TestShardedReceiveManyConflictDoesNotStopTheBatch(t *testing.T) {
	ctx := context.Background()
	c, pools := twoShards(t, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	const src = "s"
	onA := inboxIDOn(t, c, src, "a", "old")
	stored, err := c.Receive(ctx, inbox.Message{Source: src, MessageID: onA, Payload: map[string]int{"v": 1}})
	if err != nil || stored.Shard != "a" {
		t.Fatalf("first receive: %+v, %v", stored, err)
	}
	for _, conflictAt := range []int{0, 1} {
		t.Run(fmt.Sprintf("conflict at %d", conflictAt), func(t *testing.T) {
			onB := inboxIDOn(t, c, src, "b", fmt.Sprintf("new%d", conflictAt))
			msgs := []inbox.Message{{Source: src, MessageID: onB, Payload: map[string]int{"v": 2}}}
			msgs = append(msgs[:conflictAt], append([]inbox.Message{{Source: src, MessageID: onA, Payload: map[string]int{"v": 9}}}, msgs[conflictAt:]...)...)
			rs, err := c.ReceiveMany(ctx, msgs)
			if !errors.Is(err, inbox.ErrConflict) {
				t.Fatalf("err %v, want ErrConflict", err)
			}
			var ce *inbox.ConflictError
			if !errors.As(err, &ce) || ce.Index != conflictAt || ce.ID != stored.ID || ce.MessageID != onA {
				t.Fatalf("conflict error %+v, want index %d id %d", ce, conflictAt, stored.ID)
			}
			if len(rs) != 2 {
				t.Fatalf("%d results, want 2 (%v)", len(rs), err)
			}
			if r := rs[conflictAt]; !r.Conflict || r.ID != stored.ID || r.Shard != "a" {
				t.Errorf("conflict's result %+v, want the stored %d on a", r, stored.ID)
			}
			if r := rs[1-conflictAt]; r.Conflict || r.Duplicate || r.ID == 0 || r.Shard != "b" {
				t.Errorf("new message's result %+v, want received on b", r)
			}
			if n := countIn(t, pools["b"], "inbox", "source = $1 and message_id = $2", src, onB); n != 1 {
				t.Errorf("new message stored %d times on b, want 1", n)
			}
		})
	}
	// One message: the stored one is returned with the conflict.
	r, err := c.Receive(ctx, inbox.Message{Source: src, MessageID: onA, Payload: map[string]int{"v": 7}})
	var ce *inbox.ConflictError
	if !errors.As(err, &ce) || !r.Conflict || r.ID != stored.ID || r.Shard != "a" {
		t.Fatalf("Receive of a conflict: %+v, %v; want the stored %d on a", r, err, stored.ID)
	}
}

// A caller's outbox MessageID without a partition key routes by the id
// (review B4): a retry lands on the first's shard and fails as a
// duplicate there.
func TestShardedOutboxMessageIDStaysUnique(t *testing.T) {
	ctx := context.Background()
	c, _ := twoShards(t, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	perShard := map[string]int{}
	for range 16 {
		id := uuid.New()
		m := outbox.Message{Topic: "t", MessageID: id, Payload: map[string]int{}}
		s, err := c.Send(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		if want := c.ShardFor(workq.OutboxKey("", id)); s.Shard != want {
			t.Fatalf("message %s on %s, OutboxKey says %s", id, s.Shard, want)
		}
		perShard[s.Shard]++
		if _, err := c.Send(ctx, m); !errors.Is(err, outbox.ErrDuplicateMessageID) {
			t.Fatalf("resend of %s: %v, want ErrDuplicateMessageID", id, err)
		}
		if _, err := c.SendMany(ctx, []outbox.Message{{Topic: "t", Payload: map[string]int{}}, m}); !errors.Is(err, outbox.ErrDuplicateMessageID) {
			t.Fatalf("resend of %s in a batch: %v, want ErrDuplicateMessageID", id, err)
		}
	}
	if len(perShard) != 2 {
		t.Errorf("16 ids went to %v, want both shards", perShard)
	}
}

// Handlers see their item's shard (review D1): Job.Shard and
// Message.Shard name the database the item is on, and client.Shard of it
// completes the job in a transaction there.
func TestShardedHandlerSeesItsShard(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	got := map[string]string{} // "job a 7" -> handler's shard
	var client *workq.Client
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[ShardArgs]) error {
		sc, err := client.Shard(job.Shard)
		if err != nil {
			return err
		}
		tx, err := sc.Pool().Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		if err := job.CompleteTx(ctx, tx); err != nil {
			return err
		}
		if err := tx.Commit(ctx); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		got[fmt.Sprintf("job %s %d", job.Args.Shard, job.Args.N)] = job.Shard
		return nil
	}))
	if err := workq.HandleOutbox(workers, "t", func(_ context.Context, m *workq.Message[map[string]string]) error {
		mu.Lock()
		defer mu.Unlock()
		got["outbox "+m.Payload["k"]] = m.Shard
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	client, _ = twoShards(t, workq.Config{Workers: workers, FetchPollInterval: 50 * time.Millisecond,
		Maintenance: workq.MaintenanceConfig{Disabled: true}})
	want := map[string]string{}
	for n := range 6 {
		r, err := client.Enqueue(ctx, ShardArgs{N: n}, nil)
		if err != nil {
			t.Fatal(err)
		}
		want[fmt.Sprintf("job  %d", n)] = r.Shard // Args.Shard is empty
		s, err := client.Send(ctx, outbox.Message{Topic: "t", PartitionKey: fmt.Sprint(n), Payload: map[string]string{"k": fmt.Sprint(n)}})
		if err != nil {
			t.Fatal(err)
		}
		want["outbox "+fmt.Sprint(n)] = s.Shard
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer client.Stop(ctx)
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == len(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("handled %d of %d items in 30s", n, len(want))
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: handler saw shard %q, the item is on %q", k, got[k], w)
		}
	}
	if st := client.Stats(); st.Failed != 0 || st.Retried != 0 {
		t.Errorf("stats %+v: a CompleteTx on the job's shard failed", st)
	}
}

// NewClient's handlers see DefaultShard, which client.Shard takes.
func TestHandlerShardOfNewClient(t *testing.T) {
	ctx := context.Background()
	shard := make(chan string, 1)
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(_ context.Context, job *workq.Job[ShardArgs]) error {
		shard <- job.Shard
		return nil
	}))
	c, err := workq.NewClient(testdb.Pool(t), workq.Config{Workers: workers, FetchPollInterval: 50 * time.Millisecond,
		Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, ShardArgs{}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(ctx)
	select {
	case s := <-shard:
		if s != workq.DefaultShard {
			t.Errorf("job.Shard %q, want %q", s, workq.DefaultShard)
		}
		if sc, err := c.Shard(s); err != nil || sc != c {
			t.Errorf("Shard(%q) = %v, %v; want the Client", s, sc, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the job did not run in 30s")
	}
}

// ShardForArgs names the shard Enqueue puts a keyed job on (review D2),
// and "" for a job without a key.
func TestShardForArgs(t *testing.T) {
	ctx := context.Background()
	c, _ := twoShards(t, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	seen := map[string]bool{}
	for n := range 12 {
		for _, opts := range []*workq.EnqueueOpts{
			{DedupKey: fmt.Sprint("d", n)},
			{Unique: workq.UniqueOpts{ByArgs: true, ByPeriod: time.Hour}},
			{Unique: workq.UniqueOpts{ByQueue: true}, Queue: fmt.Sprint("q", n)},
		} {
			args := ShardArgs{N: n}
			want, err := c.ShardForArgs(args, opts)
			if err != nil {
				t.Fatal(err)
			}
			r, err := c.Enqueue(ctx, args, opts)
			if err != nil {
				t.Fatal(err)
			}
			if r.Shard != want {
				t.Fatalf("job %d %+v: Enqueue put it on %s, ShardForArgs said %s", n, opts, r.Shard, want)
			}
			seen[want] = true
		}
	}
	if len(seen) != 2 {
		t.Errorf("keyed jobs went to %v only", seen)
	}
	if s, err := c.ShardForArgs(ShardArgs{}, nil); s != "" || err != nil {
		t.Errorf("unkeyed job: %q, %v; want \"\", nil", s, err)
	}
	if _, err := c.ShardForArgs(ShardArgs{}, &workq.EnqueueOpts{Unique: workq.UniqueOpts{ByPeriod: time.Millisecond}}); !errors.Is(err, workq.ErrInvalid) {
		t.Errorf("invalid job: %v, want ErrInvalid", err)
	}
	single, err := workq.NewClient(testdb.Pool(t), workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	if s, err := single.ShardForArgs(ShardArgs{}, nil); s != workq.DefaultShard || err != nil {
		t.Errorf("NewClient: %q, %v; want %q", s, err, workq.DefaultShard)
	}
}

// The front's schedule methods route by name (review D3).
func TestShardedSchedulesRouteByName(t *testing.T) {
	ctx := context.Background()
	c, pools := twoShards(t, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	names := map[string]bool{}
	for n := range 8 {
		name := fmt.Sprint("sched-", n)
		if _, err := c.CreateSchedule(ctx, workq.ScheduleSpec{Name: name, Cron: "0 0 * * *", Kind: "shard.test"}); err != nil {
			t.Fatal(err)
		}
		names[name] = true
		shard := c.ShardFor(workq.ScheduleKey(name))
		if n := countIn(t, pools[shard], "schedules", "name = $1", name); n != 1 {
			t.Fatalf("schedule %s: %d rows on its shard %s", name, n, shard)
		}
		if s, err := c.DisableSchedule(ctx, name); err != nil || s.Enabled {
			t.Fatalf("disable %s: %+v, %v", name, s, err)
		}
		if s, err := c.GetSchedule(ctx, name); err != nil || s.Name != name || s.Enabled {
			t.Fatalf("get %s: %+v, %v", name, s, err)
		}
		if _, err := c.EnableSchedule(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	all, err := c.ListSchedules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range all {
		delete(names, s.Name)
	}
	if len(names) != 0 || len(all) != 8 {
		t.Errorf("ListSchedules: %d schedules, missing %v", len(all), names)
	}
}

// GlobalLimits over NewShardedClient's one shard are run, not ignored
// (review D3): the one shard's budget becomes W.
func TestOneShardGlobalLimit(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	const w = 5
	c, err := workq.NewShardedClient([]workq.Shard{{Name: "only", Pool: pool}}, workq.Config{
		Sharding: workq.ShardingConfig{LimitInterval: 50 * time.Millisecond,
			GlobalLimits: []workq.GlobalLimit{{Table: "job_runs", Queue: "default", W: w}}}})
	if err != nil {
		t.Fatal(err)
	}
	if c.ShardName() != "only" {
		t.Fatalf("ShardName %q, want only: one shard is a plain Client", c.ShardName())
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(ctx)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var b int
		err := pool.QueryRow(ctx, `select max_in_progress from workq.queue_limits where work_table = 'job_runs' and queue = 'default'`).Scan(&b)
		if err == nil && b == w {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("budget %d (%v) after 30s, want W = %d", b, err, w)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
