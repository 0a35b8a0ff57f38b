package workq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/inbox"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/testutil"
	"github.com/workq/workq/outbox"
)

// ShardArgs is a job that says which shard it was put on, so a handler
// (which sees no shard) can tell.
type ShardArgs struct {
	N     int    `json:"n"`
	Shard string `json:"shard,omitempty"`
}

func (ShardArgs) Kind() string { return "shard.test" }

type keyedMsg struct {
	Key string `json:"key"`
	Seq int    `json:"seq"`
}

// countIn counts rows of a workq table on one shard matching where.
func countIn(t *testing.T, pool *pgxpool.Pool, table, where string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), "select count(*) from workq."+table+" where "+where, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Keyed work of every kind stays on its key's shard: outbox partition
// keys (delivered in order), unique jobs and dedup keys (one run per key
// across the shards), inbox (source, id) (a repeat is a duplicate); work
// without a key is spread round-robin; every result names its shard.
func TestShardedClientKeysStayOnOneShard(t *testing.T) {
	ctx := context.Background()
	pools := map[string]*pgxpool.Pool{"a": testdb.Pool(t), "b": testdb.Pool(t)}
	var mu sync.Mutex
	seen := map[string][]int{} // partition key -> seqs in delivery order
	inboxRuns := map[string]int{}
	var jobRuns atomic.Int64
	workers := workq.NewWorkers()
	if err := workq.HandleOutbox(workers, "t", func(_ context.Context, m *workq.Message[keyedMsg]) error {
		mu.Lock()
		defer mu.Unlock()
		if m.PartitionKey != m.Payload.Key {
			t.Errorf("message of key %s has partition key %s", m.Payload.Key, m.PartitionKey)
		}
		seen[m.Payload.Key] = append(seen[m.Payload.Key], m.Payload.Seq)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := workq.HandleInbox(workers, "", func(_ context.Context, m *workq.Message[map[string]any]) error {
		mu.Lock()
		defer mu.Unlock()
		inboxRuns[m.Source+"/"+m.MessageID]++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	workq.AddWorker(workers, workq.WorkFunc(func(context.Context, *workq.Job[ShardArgs]) error { jobRuns.Add(1); return nil }))
	client, err := workq.NewShardedClient([]workq.Shard{{Name: "a", Pool: pools["a"]}, {Name: "b", Pool: pools["b"]}},
		workq.Config{Workers: workers, FetchPollInterval: 50 * time.Millisecond, Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}

	// Outbox: 20 keys, 5 messages each, one at a time and in batches.
	const keys, perKey = 20, 5
	for seq := range perKey {
		var batch []outbox.Message
		for k := range keys {
			key := fmt.Sprintf("order-%d", k)
			m := outbox.Message{Topic: "t", PartitionKey: key, Payload: keyedMsg{Key: key, Seq: seq}}
			if seq%2 == 0 {
				s, err := client.Send(ctx, m)
				if err != nil {
					t.Fatal(err)
				}
				if want := client.ShardFor(workq.PartitionKey(key)); s.Shard != want {
					t.Fatalf("key %s sent to %q, ShardFor says %q", key, s.Shard, want)
				}
				continue
			}
			batch = append(batch, m)
		}
		if len(batch) > 0 {
			sent, err := client.SendMany(ctx, batch)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range sent {
				if want := client.ShardFor(workq.PartitionKey(batch[i].PartitionKey)); s.Shard != want || s.ID == 0 {
					t.Fatalf("batch message %d: %+v, want shard %s", i, s, want)
				}
			}
		}
	}
	perShard := map[string]int{}
	for k := range keys {
		key := fmt.Sprintf("order-%d", k)
		on := 0
		for name, pool := range pools {
			if n := countIn(t, pool, "outbox", "partition_key = $1", key); n > 0 {
				on++
				perShard[name]++
				if n != perKey {
					t.Errorf("key %s: %d messages on shard %s, want %d", key, n, name, perKey)
				}
			}
		}
		if on != 1 {
			t.Errorf("key %s is on %d shards", key, on)
		}
	}
	if perShard["a"] == 0 || perShard["b"] == 0 {
		t.Errorf("keys per shard %v: want both used", perShard)
	}

	// Unique jobs: 30 enqueues of 10 keys insert 10 runs, once across the shards.
	inserted := 0
	shardOf := map[int]string{}
	for i := range 30 {
		r, err := client.Enqueue(ctx, ShardArgs{N: i % 10}, &workq.EnqueueOpts{Unique: workq.UniqueOpts{ByArgs: true, ByPeriod: time.Hour}})
		if err != nil {
			t.Fatal(err)
		}
		if !r.Duplicate {
			inserted++
		}
		if s, ok := shardOf[i%10]; ok && s != r.Shard {
			t.Fatalf("unique key %d on %s and %s", i%10, s, r.Shard)
		}
		shardOf[i%10] = r.Shard
	}
	if inserted != 10 {
		t.Errorf("30 enqueues of 10 unique keys inserted %d runs, want 10", inserted)
	}
	// Dedup keys, in a batch with unkeyed jobs: the unkeyed go to one shard.
	params := []workq.EnqueueParams{}
	for i := range 6 {
		params = append(params, workq.EnqueueParams{Args: ShardArgs{N: 100 + i}, Opts: &workq.EnqueueOpts{DedupKey: fmt.Sprintf("d%d", i%3)}})
		params = append(params, workq.EnqueueParams{Args: ShardArgs{N: 200 + i}})
	}
	rs, err := client.EnqueueMany(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	dups, unkeyed := 0, map[string]int{}
	for i, r := range rs {
		if r.Duplicate {
			dups++
		}
		if k := params[i].Opts; k != nil {
			if want := client.ShardFor(workq.DedupKey(k.DedupKey)); r.Shard != want {
				t.Errorf("dedup key %s on %s, want %s", k.DedupKey, r.Shard, want)
			}
		} else {
			unkeyed[r.Shard]++
		}
	}
	if dups != 3 || len(unkeyed) != 1 {
		t.Errorf("batch: %d duplicates (want 3), unkeyed jobs on shards %v (want one)", dups, unkeyed)
	}
	// Unkeyed jobs one at a time: round-robin.
	rr := map[string]int{}
	for i := range 10 {
		r, err := client.Enqueue(ctx, ShardArgs{N: 300 + i}, nil)
		if err != nil {
			t.Fatal(err)
		}
		rr[r.Shard]++
	}
	if rr["a"] != 5 || rr["b"] != 5 {
		t.Errorf("10 unkeyed jobs went %v, want 5 and 5", rr)
	}

	// Inbox: each (source, id) once; the repeat is a duplicate on the same shard.
	for round := range 2 {
		for i := range 10 {
			m := inbox.Message{Source: "payments", MessageID: fmt.Sprintf("evt-%d", i), Payload: map[string]int{"i": i}}
			r, err := client.Receive(ctx, m)
			if err != nil {
				t.Fatal(err)
			}
			if r.Duplicate != (round == 1) || r.Shard != client.ShardFor(workq.InboxKey(m.Source, m.MessageID)) {
				t.Fatalf("round %d message %d: %+v", round, i, r)
			}
		}
	}

	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer client.Stop(ctx)
	wantJobs := int64(10 + 3 + 6 + 10)
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		delivered := 0
		for _, s := range seen {
			delivered += len(s)
		}
		inboxDone := len(inboxRuns)
		mu.Unlock()
		if delivered == keys*perKey && inboxDone == 10 && jobRuns.Load() == wantJobs {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s: %d of %d outbox messages, %d of 10 inbox messages, %d of %d jobs", delivered, keys*perKey, inboxDone, jobRuns.Load(), wantJobs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	for key, seqs := range seen {
		for i, s := range seqs {
			if s != i {
				t.Fatalf("key %s delivered out of order: %v", key, seqs)
			}
		}
	}
	for k, n := range inboxRuns {
		if n != 1 {
			t.Errorf("inbox message %s ran %d times", k, n)
		}
	}
	mu.Unlock()
	// The front's counters are the sum of the shards' (completions are
	// counted once flushed).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st := client.Stats()
		if st.Done == int64(keys*perKey)+10+wantJobs {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("summed stats: %+v, want %d done", st, int64(keys*perKey)+10+wantJobs)
		}
	}
}

// Bad shards are refused with ErrInvalid; the front refuses what it cannot
// place (a transaction, an id) and names the way to do it.
func TestShardedClientInvalid(t *testing.T) {
	ctx := context.Background()
	a, b := testdb.Pool(t), testdb.Pool(t)
	for _, tc := range []struct {
		name   string
		shards []workq.Shard
		want   string
	}{
		{"none", nil, "at least one shard"},
		{"bad name", []workq.Shard{{Name: "a b", Pool: a}}, `name "a b" is not a valid name`},
		{"empty name", []workq.Shard{{Name: "", Pool: a}}, `name "" is not a valid name`},
		{"twice", []workq.Shard{{Name: "a", Pool: a}, {Name: "a", Pool: b}}, `"a" is given twice`},
		{"no pool", []workq.Shard{{Name: "a", Pool: a}, {Name: "b"}}, `shard "b" has no pool`},
		{"same pool", []workq.Shard{{Name: "a", Pool: a}, {Name: "b", Pool: a}}, "the same pool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := workq.NewShardedClient(tc.shards, workq.Config{})
			if !errors.Is(err, workq.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrInvalid with %q", err, tc.want)
			}
		})
	}
	one, err := workq.NewShardedClient([]workq.Shard{{Name: "eu", Pool: a}}, workq.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if one.ShardName() != "eu" || one.ShardFor("k") != "eu" {
		t.Errorf("one shard: name %q", one.ShardName())
	}
	r, err := one.Enqueue(ctx, ShardArgs{N: 1}, nil)
	if err != nil || r.Shard != "eu" {
		t.Fatalf("one shard enqueue: %+v %v", r, err)
	}
	plain, err := workq.NewClient(b, workq.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := plain.Enqueue(ctx, ShardArgs{N: 1}, nil); err != nil || r.Shard != workq.DefaultShard {
		t.Fatalf("NewClient enqueue: %+v %v", r, err)
	}
	if s, err := plain.Shard(""); err != nil || s != plain {
		t.Errorf("plain.Shard(\"\"): %v %v", s, err)
	}

	c, err := workq.NewShardedClient([]workq.Shard{{Name: "a", Pool: a}, {Name: "b", Pool: b}}, workq.Config{})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := a.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := c.EnqueueTx(ctx, tx, ShardArgs{}, nil); !errors.Is(err, workq.ErrInvalid) || !strings.Contains(err.Error(), "client.Shard(name).EnqueueTx") {
		t.Errorf("EnqueueTx on the front: %v", err)
	}
	if _, err := c.SendTx(ctx, tx, outbox.Message{Topic: "t"}); !errors.Is(err, workq.ErrInvalid) {
		t.Errorf("SendTx on the front: %v", err)
	}
	// An id without a shard is looked up on every shard.
	if _, err := c.Cancel(ctx, workq.JobRef(1<<40), nil); !errors.Is(err, workq.ErrNotFound) {
		t.Errorf("Cancel on the front of an id no shard has: %v", err)
	}
	if _, err := c.Send(ctx, outbox.Message{Topic: "t", JoinID: 5}); !errors.Is(err, workq.ErrInvalid) {
		t.Errorf("join member on the front: %v", err)
	}
	if _, err := c.Shard("c"); !errors.Is(err, workq.ErrInvalid) {
		t.Errorf("unknown shard: %v", err)
	}
	// The shard's Client works in the caller's transaction on its database.
	sa, err := c.Shard("a")
	if err != nil {
		t.Fatal(err)
	}
	res, err := sa.EnqueueTx(ctx, tx, ShardArgs{N: 7}, nil)
	if err != nil || res.Shard != "a" {
		t.Fatalf("shard a EnqueueTx: %+v %v", res, err)
	}
	if got, err := sa.CancelTx(ctx, tx, res.Ref(), nil); err != nil || got != workq.CancelledNow {
		t.Fatalf("shard a CancelTx: %v %v", got, err)
	}
	if err := sa.Start(ctx); err == nil || !strings.Contains(err.Error(), "part of a sharded Client") {
		t.Errorf("starting a shard alone: %v", err)
	}
}

// shardWork enqueues n jobs on one shard, each saying its shard.
func shardWork(t *testing.T, c *workq.Client, shard string, n int) {
	t.Helper()
	sc, err := c.Shard(shard)
	if err != nil {
		t.Fatal(err)
	}
	params := make([]workq.EnqueueParams, n)
	for i := range params {
		params[i] = workq.EnqueueParams{Args: ShardArgs{N: i, Shard: shard}}
	}
	if _, err := sc.EnqueueMany(context.Background(), params); err != nil {
		t.Fatal(err)
	}
}

// The shards' workers share one set of handler slots: never more handlers
// at once than one database's worker runs, and while both shards have
// work a shard with more ready work gets more of the slots.
//
// The shares follow the backlogs once each claim loop has read its own
// (worker.Shared); before that they are even. So the handlers wait at a
// gate until both reads are in and the slots are full, and the count
// starts there: what the test weighs is the weighted drain, not how fast
// the pools connect and the first reads come back. On a loaded host those
// took 150 to 450 ms, as long as the small shard's whole drain at an even
// share (40 jobs on 4 slots of 10 ms), which then ended before the weights
// were known: 2 failures in 5 runs at load 13 to 19 (issue 29).
func TestShardedDrainWeightedByBacklog(t *testing.T) {
	ctx := context.Background()
	const slots, bigN, smallN = 8, 400, 40
	var running, maxRunning atomic.Int64
	var mu sync.Mutex
	done := map[string]int{}
	var bigAtSmallEnd int
	gate := make(chan struct{})
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[ShardArgs]) error {
		n := running.Add(1)
		defer running.Add(-1)
		for m := maxRunning.Load(); n > m && !maxRunning.CompareAndSwap(m, n); m = maxRunning.Load() {
		}
		<-gate
		time.Sleep(10 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		done[job.Args.Shard]++
		if job.Args.Shard == "small" && done["small"] == smallN {
			bigAtSmallEnd = done["big"]
		}
		return nil
	}))
	client, err := workq.NewShardedClient([]workq.Shard{{Name: "big", Pool: testdb.Pool(t)}, {Name: "small", Pool: testdb.Pool(t)}},
		workq.Config{Workers: workers, MaxWorkers: slots, FetchPollInterval: 50 * time.Millisecond,
			Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	shardWork(t, client, "big", bigN)
	shardWork(t, client, "small", smallN)
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer client.Stop(ctx)
	opened := false
	defer func() {
		if !opened {
			close(gate) // Stop must not wait on the gate
		}
	}()
	for deadline := time.Now().Add(60 * time.Second); !workq.SharedWeighed(client) || running.Load() < slots; {
		if time.Now().After(deadline) {
			t.Fatalf("after 60s: backlogs read %v, %d handlers at the gate, want %d", workq.SharedWeighed(client), running.Load(), slots)
		}
		time.Sleep(5 * time.Millisecond)
	}
	opened = true
	close(gate)
	waitDone(t, &mu, done, bigN+smallN, 60*time.Second)
	if m := maxRunning.Load(); m > slots {
		t.Errorf("%d handlers ran at once over two shards, want at most %d", m, slots)
	}
	// Shared equally (4 and 4), the small shard's 40 jobs end when the big
	// one has done about 40; weighted 10:1 by backlog, about 7 slots of 8
	// go to the big shard (after the 4 and 4 at the gate): about 250.
	// Counted in jobs, not time, so it holds at any pace; it must hold at
	// load 16 too (docs/testing.md, "Tests that depend on timing"): a slow
	// claim or depth read of one shard, or the other's items claimed
	// ahead, must not hand it the slots (issue 28: 0 to 94 under load).
	mu.Lock()
	defer mu.Unlock()
	t.Logf("when the small shard's last job ran, the big shard had done %d, %.1f times as many (max handlers at once %d)",
		bigAtSmallEnd, float64(bigAtSmallEnd)/smallN, maxRunning.Load())
	if bigAtSmallEnd < 3*smallN {
		t.Errorf("the big shard had done %d jobs when the small one's %d were done: want at least %d, 3 times as many (weighted by backlog 10:1)",
			bigAtSmallEnd, smallN, 3*smallN)
	}
}

func waitDone(t *testing.T, mu *sync.Mutex, done map[string]int, want int, bound time.Duration) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		mu.Lock()
		n := 0
		for _, v := range done {
			n += v
		}
		mu.Unlock()
		if n >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %d of %d jobs done", bound, n, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// DrainFirst: a later shard is claimed from only once the earlier one has
// nothing ready, so every job of the first shard starts before any of the
// second's.
func TestShardedDrainFirst(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	done := map[string]int{}
	var order []string
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[ShardArgs]) error {
		mu.Lock()
		order = append(order, job.Args.Shard)
		mu.Unlock()
		time.Sleep(2 * time.Millisecond)
		mu.Lock()
		done[job.Args.Shard]++
		mu.Unlock()
		return nil
	}))
	client, err := workq.NewShardedClient([]workq.Shard{{Name: "old", Pool: testdb.Pool(t)}, {Name: "new", Pool: testdb.Pool(t)}},
		workq.Config{Workers: workers, MaxWorkers: 4, FetchBatch: 10, FetchPollInterval: 50 * time.Millisecond,
			Maintenance: workq.MaintenanceConfig{Disabled: true}, Sharding: workq.ShardingConfig{DrainFirst: true}})
	if err != nil {
		t.Fatal(err)
	}
	shardWork(t, client, "old", 100)
	shardWork(t, client, "new", 100)
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer client.Stop(ctx)
	waitDone(t, &mu, done, 200, 60*time.Second)
	mu.Lock()
	defer mu.Unlock()
	for i, s := range order {
		if s == "new" {
			if old := strings.Count(strings.Join(order[i:], ","), "old"); old > 0 {
				t.Fatalf("%d jobs of the first shard started after the first of the second (position %d)", old, i)
			}
			break
		}
	}
}

// A shard that is down stops no other: Start does not fail, the other
// shard's work runs, an enqueue routed to the down shard fails naming it,
// and once it is back its work runs too.
func TestShardedDownShardDoesNotStopTheOthers(t *testing.T) {
	ctx := context.Background()
	downPool, px := testutil.ProxiedPool(t, testdb.URL(t))
	var mu sync.Mutex
	done := map[string]int{}
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[ShardArgs]) error {
		mu.Lock()
		done[job.Args.Shard]++
		mu.Unlock()
		return nil
	}))
	client, err := workq.NewShardedClient([]workq.Shard{{Name: "up", Pool: testdb.Pool(t)}, {Name: "down", Pool: downPool}},
		workq.Config{Workers: workers, MaxWorkers: 4, FetchPollInterval: 50 * time.Millisecond, LeaseTTL: 2 * time.Second,
			Maintenance: workq.MaintenanceConfig{LeaderTTL: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	shardWork(t, client, "down", 5) // before the cut
	px.Cut()
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		t.Fatalf("Start with one shard down: %v", err)
	}
	t.Logf("Start took %s with one shard down", time.Since(start))
	stopped := false
	defer func() {
		if !stopped {
			client.Stop(ctx)
		}
	}()
	shardWork(t, client, "up", 20)
	waitDone(t, &mu, done, 20, 20*time.Second)
	// Keyed enqueues: those of the up shard work, those of the down one fail naming it.
	var upKey, downKey string
	for i := 0; upKey == "" || downKey == ""; i++ {
		k := fmt.Sprintf("k%d", i)
		if client.ShardFor(workq.DedupKey(k)) == "up" {
			upKey = k
		} else {
			downKey = k
		}
	}
	if r, err := client.Enqueue(ctx, ShardArgs{N: 1, Shard: "up"}, &workq.EnqueueOpts{DedupKey: upKey}); err != nil || r.Shard != "up" {
		t.Fatalf("enqueue to the up shard: %+v %v", r, err)
	}
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = client.Enqueue(dctx, ShardArgs{N: 2, Shard: "down"}, &workq.EnqueueOpts{DedupKey: downKey})
	cancel()
	if err == nil || !strings.Contains(err.Error(), "shard down") {
		t.Fatalf("enqueue to the down shard: %v, want an error naming it", err)
	}
	waitDone(t, &mu, done, 21, 20*time.Second)
	mu.Lock()
	if done["down"] != 0 {
		t.Errorf("%d jobs of the cut shard ran", done["down"])
	}
	mu.Unlock()
	px.Restore()
	waitDone(t, &mu, done, 26, 30*time.Second)
	stopped = true
	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	defer scancel()
	if err := client.Stop(sctx); err != nil {
		t.Errorf("stop: %v", err)
	}
}

// Sharding.GlobalLimits: the Client runs the shardlimit leader, so never
// more than W handlers of the queue run at once over both shards (a
// handler runs only while its row is in progress, and the budgets in force
// never sum above W), and the backlog of both shards drains, the busier
// shard getting the larger budget.
func TestShardedGlobalLimit(t *testing.T) {
	ctx := context.Background()
	const w, bigN, smallN = 3, 60, 20
	var running, maxRunning atomic.Int64
	var mu sync.Mutex
	done := map[string]int{}
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[ShardArgs]) error {
		n := running.Add(1)
		defer running.Add(-1)
		for m := maxRunning.Load(); n > m && !maxRunning.CompareAndSwap(m, n); m = maxRunning.Load() {
		}
		time.Sleep(20 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		done[job.Args.Shard]++
		return nil
	}))
	big, small := testdb.Pool(t), testdb.Pool(t)
	client, err := workq.NewShardedClient([]workq.Shard{{Name: "big", Pool: big}, {Name: "small", Pool: small}},
		workq.Config{Workers: workers, FetchPollInterval: 50 * time.Millisecond,
			Sharding: workq.ShardingConfig{LimitInterval: 100 * time.Millisecond,
				GlobalLimits: []workq.GlobalLimit{{Table: "job_runs", Queue: "default", W: w}}}})
	if err != nil {
		t.Fatal(err)
	}
	shardWork(t, client, "big", bigN)
	shardWork(t, client, "small", smallN)
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer client.Stop(ctx)
	waitDone(t, &mu, done, bigN+smallN, 60*time.Second)
	if m := maxRunning.Load(); m > w {
		t.Errorf("%d handlers ran at once over two shards, want at most W = %d", m, w)
	}
	if m := maxRunning.Load(); m < 2 {
		t.Errorf("at most %d handler ran at once: the leader never raised the budgets above 1", m)
	}
	budget := func(pool *pgxpool.Pool) int {
		var b int
		if err := pool.QueryRow(ctx, `select max_in_progress from workq.queue_limits where work_table = 'job_runs' and queue = 'default'`).Scan(&b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	if b, s := budget(big), budget(small); b+s > w {
		t.Errorf("budgets %d + %d, above W = %d", b, s, w)
	}
	t.Logf("at most %d handlers at once (W = %d); done %v", maxRunning.Load(), w, done)
}
