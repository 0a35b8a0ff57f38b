package outboxrt_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/outboxrt"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/worker"
	"github.com/workq/workq/outbox"
)

func ids(items []lease.Item) []int64 {
	out := make([]int64, len(items))
	for i, it := range items {
		out[i] = it.ID
	}
	slices.Sort(out)
	return out
}

func ack(t *testing.T, pool *pgxpool.Pool, c lease.Claim, id int64) {
	t.Helper()
	if err := lease.New(pool, lease.Outbox).Ack(context.Background(), c.Token, id); err != nil {
		t.Fatal(err)
	}
}

// claimUntil claims (acking nothing) until it gets want; anything else it
// claims fails the test. A claimable message appears at the first claim
// after its predecessor's completion; the loop only tolerates a claim that
// races the completion's commit.
func claimUntil(t *testing.T, pool *pgxpool.Pool, queue string, want int64) lease.Claim {
	t.Helper()
	var c lease.Claim
	waitFor(t, fmt.Sprintf("message %d to be claimable", want), func() bool {
		c = claim(t, pool, queue, 10, lease.ClaimOptions{})
		if len(c.Items) == 0 {
			return false
		}
		if got := ids(c.Items); !slices.Equal(got, []int64{want}) {
			t.Fatalf("claimed %v, want only %d", got, want)
		}
		return true
	})
	return c
}

// A failing head blocks its key only: the key's next message waits for its
// retry, other keys go on.
func TestOrderFailingHeadBlocksOnlyItsKey(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	c := outboxrt.NewClient(outboxrt.ClientOptions{})
	const q = "fail"
	sent, err := c.SendMany(ctx, pool, []outbox.Message{
		{Queue: q, Topic: "t", PartitionKey: "a"}, {Queue: q, Topic: "t", PartitionKey: "a"},
		{Queue: q, Topic: "t", PartitionKey: "b"}, {Queue: q, Topic: "t", PartitionKey: "b"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var cl lease.Claim
	waitFor(t, "the heads", func() bool { cl = claim(t, pool, q, 10, lease.ClaimOptions{}); return len(cl.Items) > 0 })
	if got, want := ids(cl.Items), []int64{sent[0].ID, sent[2].ID}; !slices.Equal(got, want) {
		t.Fatalf("claimed %v, want the heads %v", got, want)
	}
	e := lease.New(pool, lease.Outbox)
	if err := e.Abandon(ctx, cl.Token, sent[0].ID, "boom", time.Hour); err != nil {
		t.Fatal(err)
	}
	ack(t, pool, cl, sent[2].ID)
	c2 := claimUntil(t, pool, q, sent[3].ID)
	ack(t, pool, c2, sent[3].ID)
	blocked, err := outboxrt.Keys(ctx, pool, outboxrt.KeyQuery{Queue: q, OnlyBlocked: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(blocked) != 1 || blocked[0].PartitionKey != "a" || blocked[0].HeadID != sent[0].ID || blocked[0].LastError != "boom" {
		t.Fatalf("blocked keys %+v, want a with head %d", blocked, sent[0].ID)
	}
	st, err := outboxrt.Stats(ctx, pool, q, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Keys != 1 || st.Retrying != 1 || st.Blocked() != 1 {
		t.Fatalf("stats %+v, want one key, retrying", st)
	}
	if cl := claim(t, pool, q, 10, lease.ClaimOptions{}); len(cl.Items) > 0 {
		t.Fatalf("claimed %v while a's head waits for its retry", ids(cl.Items))
	}
}

// Block keeps a key waiting behind a finally failed head until it is
// retried; Skip lets the next message go.
func TestFinalFailureBlockAndSkip(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	c := outboxrt.NewClient(outboxrt.ClientOptions{})
	var mu sync.Mutex
	delivered := map[string][]int64{}
	var fail sync.Map // message ids that fail for good
	h := func(ctx context.Context, j *worker.Job) error {
		if _, bad := fail.Load(j.ID); bad {
			return worker.Permanent(errors.New("rejected"))
		}
		mu.Lock()
		delivered[j.PartitionKey] = append(delivered[j.PartitionKey], j.ID)
		mu.Unlock()
		return nil
	}
	relay := outboxrt.NewRelay(outbox.RelayOptions{})
	if err := relay.Handle("blk", h); err != nil {
		t.Fatal(err)
	}
	if err := relay.Handle("skp", h, outbox.TopicOptions{OnFinalFailure: outbox.Skip}); err != nil {
		t.Fatal(err)
	}
	var msgs []outbox.Message
	for _, topic := range []string{"blk", "skp"} {
		for range 3 {
			msgs = append(msgs, outbox.Message{Topic: topic, PartitionKey: "key-" + topic})
		}
	}
	sent, err := c.SendMany(ctx, pool, msgs)
	if err != nil {
		t.Fatal(err)
	}
	fail.Store(sent[0].ID, true)
	fail.Store(sent[3].ID, true)
	w, err := worker.New(pool, testConfig().Worker(), worker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AddSource(relay.Source()); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	get := func(k string) []int64 { mu.Lock(); defer mu.Unlock(); return slices.Clone(delivered[k]) }
	waitFor(t, "the skip key's later messages", func() bool { return len(get("key-skp")) == 2 })
	waitFor(t, "the block key's head to fail", func() bool {
		return count(t, pool, "select count(*) from workq.outbox where id = $1 and status = 3", sent[0].ID) == 1
	})
	if err := w.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := get("key-skp"), []int64{sent[4].ID, sent[5].ID}; !slices.Equal(got, want) {
		t.Fatalf("skip key delivered %v, want %v", got, want)
	}
	// With the relay's options, nothing of the block key is claimable.
	if cl := claim(t, pool, "default", 10, lease.ClaimOptions{SkipTopics: relay.SkipTopics()}); len(cl.Items) > 0 {
		t.Fatalf("claimed %v behind a finally failed head of a Block topic", ids(cl.Items))
	}
	if got := get("key-blk"); len(got) != 0 {
		t.Fatalf("block key delivered %v behind its failed head", got)
	}
	blocked, err := outboxrt.Keys(ctx, pool, outboxrt.KeyQuery{OnlyBlocked: true, SkipTopics: relay.SkipTopics()})
	if err != nil {
		t.Fatal(err)
	}
	if len(blocked) != 1 || blocked[0].PartitionKey != "key-blk" || blocked[0].Status != lease.StatusFailed {
		t.Fatalf("blocked %+v, want key-blk with a failed head", blocked)
	}

	// An operator retries the failed head: the key goes on, in order.
	fail.Delete(sent[0].ID)
	got, err := admin.Retry(ctx, pool, lease.Outbox, admin.Actor{Name: "test", Reason: "fixed"}, sent[0].ID)
	if err != nil || !slices.Equal(got.Applied, []int64{sent[0].ID}) {
		t.Fatalf("retry: %v %v", got, err)
	}
	startWorker(t, pool, relay.Source(), worker.Options{})
	waitFor(t, "the block key", func() bool { return len(get("key-blk")) == 3 })
	if got, want := get("key-blk"), []int64{sent[0].ID, sent[1].ID, sent[2].ID}; !slices.Equal(got, want) {
		t.Fatalf("block key delivered %v, want %v", got, want)
	}
	att, err := admin.Attempts(ctx, pool, lease.Outbox, sent[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	var outcomes []string
	for _, a := range att {
		outcomes = append(outcomes, a.Outcome)
	}
	if !slices.Equal(outcomes, []string{"failed", "revived", "done"}) {
		t.Fatalf("attempts of the retried head: %v", outcomes)
	}
}

// Four relay workers on one database with random handler failures and
// writers whose transactions interleave (a writer waits for the open writer
// of a key it writes; each transaction writes its keys in sorted order, as
// docs/outbox.md advises, so they never deadlock) and sometimes roll back:
// per key, the acked sequence is the write order (key_seq, numbered 1..n
// without gaps), no rolled-back message is delivered, and the run archive
// shows at most one attempt of a key in flight at any time. Unkeyed
// messages all arrive too.
func TestOrderConcurrentRelays(t *testing.T) {
	pool := testdb.PoolWith(t, 30)
	ctx := context.Background()
	c := outboxrt.NewClient(outboxrt.ClientOptions{MaxAttempts: 1000})
	const (
		keys    = 12
		writers = 4
		perTx   = 5
		txs     = 12 // per writer
		unkeyed = 100
	)
	var mu sync.Mutex
	acked := map[string][]int64{}
	unkeyedDone := map[int64]bool{}
	h := func(ctx context.Context, j *worker.Job) error {
		if rand.IntN(4) == 0 {
			return errors.New("random failure")
		}
		mu.Lock()
		defer mu.Unlock()
		if j.PartitionKey == "" {
			unkeyedDone[j.ID] = true
		} else {
			acked[j.PartitionKey] = append(acked[j.PartitionKey], j.ID)
		}
		return nil
	}
	relay := outboxrt.NewRelay(outbox.RelayOptions{})
	relay.HandleDefault(h)
	for range 4 {
		startWorker(t, pool, relay.Source(), worker.Options{})
	}
	// Writers: each transaction writes a few keyed messages with pauses in
	// between, so transactions overlap; one in four rolls back.
	var wg sync.WaitGroup
	var committed atomic.Int64
	errs := make(chan error, writers)
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range txs {
				tx, err := pool.Begin(ctx)
				if err != nil {
					errs <- err
					return
				}
				keyed := make([]string, perTx)
				for i := range keyed {
					keyed[i] = fmt.Sprintf("key-%02d", rand.IntN(keys))
				}
				slices.Sort(keyed)
				for _, k := range keyed {
					if _, err := c.Send(ctx, tx, outbox.Message{Topic: "t", PartitionKey: k}); err != nil {
						errs <- err
						_ = tx.Rollback(ctx)
						return
					}
					time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond) // widen the interleaving, not a synchronisation
				}
				if rand.IntN(4) == 0 {
					if err := tx.Rollback(ctx); err != nil {
						errs <- err
						return
					}
					continue
				}
				if err := tx.Commit(ctx); err != nil {
					errs <- err
					return
				}
				committed.Add(perTx)
			}
		}()
	}
	msgs := make([]outbox.Message, unkeyed)
	for i := range msgs {
		msgs[i] = outbox.Message{Topic: "t"}
	}
	if _, err := c.SendMany(ctx, pool, msgs); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	total := int(committed.Load())
	waitFor(t, "every message acked", func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, s := range acked {
			n += len(s)
		}
		return n >= total && len(unkeyedDone) == unkeyed
	})
	waitFor(t, "every completion committed", func() bool {
		return count(t, pool, "select count(*) from workq.outbox where status <> 2") == 0
	})

	// The write order of each key: key_seq, 1..n without a gap.
	if n := count(t, pool, `select count(*) from (select partition_key from workq.outbox where partition_key is not null
		group by partition_key having min(key_seq) <> 1 or max(key_seq) <> count(*) or count(distinct key_seq) <> count(*)) g`); n != 0 {
		t.Errorf("%d keys whose key_seq is not 1..n", n)
	}
	rows, err := pool.Query(ctx, `select partition_key, id from workq.outbox where partition_key is not null order by partition_key, key_seq`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]int64{}
	for rows.Next() {
		var k string
		var id int64
		if err := rows.Scan(&k, &id); err != nil {
			t.Fatal(err)
		}
		want[k] = append(want[k], id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	for k, w := range want {
		if !slices.Equal(acked[k], w) {
			t.Errorf("key %s: acked %v, want the write order %v", k, acked[k], w)
		}
	}
	mu.Unlock()

	// At most one attempt per key in flight, from the run archive: each
	// attempt of a key starts no earlier than the previous one finished.
	rows, err = pool.Query(ctx, `
		select o.partition_key, r.item_id, r.started_at, r.finished_at, r.outcome
		from workq.runs r join workq.outbox o on o.id = r.item_id
		where r.work_table = 'outbox' and o.partition_key is not null
		order by o.partition_key, r.started_at, r.finished_at`)
	if err != nil {
		t.Fatal(err)
	}
	type run struct {
		key           string
		id            int64
		start, finish time.Time
		outcome       string
	}
	var runs []run
	for rows.Next() {
		var r run
		if err := rows.Scan(&r.key, &r.id, &r.start, &r.finish, &r.outcome); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	retries := 0
	for i := 1; i < len(runs); i++ {
		p, r := runs[i-1], runs[i]
		if r.outcome == "retry" {
			retries++
		}
		if p.key == r.key && r.start.Before(p.finish) {
			t.Errorf("key %s: attempt of %d started at %s before the attempt of %d finished at %s",
				r.key, r.id, r.start, p.id, p.finish)
		}
	}
	if retries == 0 {
		t.Errorf("no retries in the archive: the test did not exercise failing heads")
	}
	t.Logf("%d keyed messages over %d keys, %d unkeyed, %d archived attempts of keyed messages (%d retries)", total, len(want), unkeyed, len(runs), retries)
}
