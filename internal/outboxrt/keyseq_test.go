package outboxrt_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/outboxrt"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/workqtype"
)

// The order of a partition key is a sequence its writers take in their
// transaction (key_seq, migration 00016); these tests cover what that
// changes: a key waits only for its own earlier writers.

// keySeqs returns the key_seq of messages by id.
func keySeqs(t *testing.T, pool *pgxpool.Pool, ids ...int64) []int64 {
	t.Helper()
	out := make([]int64, len(ids))
	for i, id := range ids {
		if err := pool.QueryRow(context.Background(), `select key_seq from workq.outbox where id = $1`, id).Scan(&out[i]); err != nil {
			t.Fatalf("key_seq of %d: %v", id, err)
		}
	}
	return out
}

// waitBlockedBy waits until the server process pid waits for a lock that
// the server process holder holds.
func waitBlockedBy(t *testing.T, pool *pgxpool.Pool, pid, holder uint32) {
	t.Helper()
	waitFor(t, fmt.Sprintf("backend %d to wait for backend %d", pid, holder), func() bool {
		return count(t, pool, `select count(*) from unnest(pg_blocking_pids($1)) b where b = $2`, int32(pid), int32(holder)) == 1
	})
}

// begin starts a transaction on its own connection of pool and returns it
// with its server process id. The test rolls it back unless it committed.
func begin(t *testing.T, pool *pgxpool.Pool) (pgx.Tx, uint32) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	var pid uint32
	if err := tx.QueryRow(ctx, `select pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return tx, pid
}

// claimAll claims and acks until every message of the queue is done,
// returning the ids in claim order; a claim is never empty while messages
// are pending (nothing is held back), and at most one message of a key is
// in a claim.
func claimAll(t *testing.T, pool *pgxpool.Pool, queue string) []int64 {
	t.Helper()
	var got []int64
	for count(t, pool, `select count(*) from workq.outbox where queue = $1 and status <> 2`, queue) > 0 {
		c := claim(t, pool, queue, 100, lease.ClaimOptions{})
		if len(c.Items) == 0 {
			t.Fatalf("nothing claimable with messages pending (delivered so far: %v)", got)
		}
		seen := map[string]bool{}
		for _, it := range c.Items {
			if it.PartitionKey != "" && seen[it.PartitionKey] {
				t.Fatalf("two messages of key %s in one claim", it.PartitionKey)
			}
			seen[it.PartitionKey] = true
			got = append(got, it.ID)
			ack(t, pool, c, it.ID)
		}
	}
	return got
}

// An open transaction elsewhere in the cluster, in this database or
// another, holds no key back: every keyed message written after it took its
// transaction id is delivered while it stays open. (Under the order by
// write_xid gated by pg_snapshot_xmin, none was.)
func TestKeysNotHeldBackByUnrelatedTransactions(t *testing.T) {
	for _, otherDB := range []bool{false, true} {
		name := "same database"
		if otherDB {
			name = "another database"
		}
		t.Run(name, func(t *testing.T) {
			pool := testdb.Pool(t)
			ctx := context.Background()
			url := pool.Config().ConnString()
			if otherDB {
				url = testdb.URL(t)
			}
			conn, err := pgx.Connect(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			var xid string
			if err := tx.QueryRow(ctx, `select pg_current_xact_id()::text`).Scan(&xid); err != nil {
				t.Fatal(err)
			}

			var msgs []outbox.Message
			for i := range 3 {
				for k := range 5 {
					msgs = append(msgs, outbox.Message{Queue: "open", Topic: "t", PartitionKey: fmt.Sprintf("k%d", k), Payload: map[string]int{"i": i}})
				}
			}
			msgs = append(msgs, outbox.Message{Queue: "open", Topic: "t"})
			sent, err := outboxrt.NewClient(outboxrt.ClientOptions{}).SendMany(ctx, pool, msgs)
			if err != nil {
				t.Fatal(err)
			}
			// The first claim takes every key's head and the unkeyed message.
			first := claim(t, pool, "open", 100, lease.ClaimOptions{})
			want := []int64{sent[0].ID, sent[1].ID, sent[2].ID, sent[3].ID, sent[4].ID, sent[15].ID}
			if got := ids(first.Items); !slices.Equal(got, want) {
				t.Fatalf("first claim %v; want the five heads and the unkeyed message %v (transaction %s open)", got, want, xid)
			}
			for _, it := range first.Items {
				ack(t, pool, first, it.ID)
			}
			if got := claimAll(t, pool, "open"); len(got) != 10 {
				t.Fatalf("then delivered %v; want the other 10", got)
			}
			var state string
			if err := pool.QueryRow(ctx, `select state from pg_stat_activity where pid = $1 and backend_xid is not null`,
				int32(conn.PgConn().PID())).Scan(&state); err != nil || state != "idle in transaction" {
				t.Fatalf("the unrelated transaction: state %q (%v); want it idle in transaction with its id", state, err)
			}
		})
	}
}

// A writer of key k that stays open holds back k's later writers, which
// wait for it (a late-committing writer is never overtaken) and then number
// after it; other keys and unkeyed messages are written and delivered
// meanwhile. Then k goes in write order.
func TestOrderLateWriterIsNeverOvertaken(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	c := outboxrt.NewClient(outboxrt.ClientOptions{})
	const q = "late"

	early, err := c.Send(ctx, pool, outbox.Message{Queue: q, Topic: "t", PartitionKey: "early"})
	if err != nil {
		t.Fatal(err)
	}
	tx, holder := begin(t, pool)
	m1, err := c.Send(ctx, tx, outbox.Message{Queue: q, Topic: "t", PartitionKey: "k"})
	if err != nil {
		t.Fatal(err)
	}

	// A later writer of k waits for the open one.
	later := make(chan []outbox.Sent, 1)
	laterErr := make(chan error, 1)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	pid := conn.Conn().PgConn().PID()
	go func() {
		s, err := c.SendMany(ctx, conn, []outbox.Message{{Queue: q, Topic: "t", PartitionKey: "k"}, {Queue: q, Topic: "t", PartitionKey: "k"}})
		later <- s
		laterErr <- err
	}()
	waitBlockedBy(t, pool, pid, holder)

	// Everything else is written and delivered meanwhile: one claim takes
	// it all, nothing of k.
	other, err := c.Send(ctx, pool, outbox.Message{Queue: q, Topic: "t", PartitionKey: "other"})
	if err != nil {
		t.Fatal(err)
	}
	unkeyed, err := c.Send(ctx, pool, outbox.Message{Queue: q, Topic: "t"})
	if err != nil {
		t.Fatal(err)
	}
	cl := claim(t, pool, q, 10, lease.ClaimOptions{})
	if got, want := ids(cl.Items), []int64{early.ID, other.ID, unkeyed.ID}; !slices.Equal(got, want) {
		t.Fatalf("claimed %v while k's first writer is open; want %v", got, want)
	}
	for _, it := range cl.Items {
		ack(t, pool, cl, it.ID)
	}
	if cl := claim(t, pool, q, 10, lease.ClaimOptions{}); len(cl.Items) > 0 {
		t.Fatalf("claimed %v while k's first writer is open", ids(cl.Items))
	}
	select {
	case err := <-laterErr:
		t.Fatalf("the later writer of k finished (%v) while the earlier one is open", err)
	default:
	}

	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-later
	if err := <-laterErr; err != nil {
		t.Fatal(err)
	}
	if got := keySeqs(t, pool, m1.ID, l[0].ID, l[1].ID); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("k's key_seq %v; want 1, 2, 3 (commit order)", got)
	}
	c1 := claim(t, pool, q, 10, lease.ClaimOptions{})
	if got := ids(c1.Items); !slices.Equal(got, []int64{m1.ID}) {
		t.Fatalf("after the commit claimed %v; want k's head %d", got, m1.ID)
	}
	if cl := claim(t, pool, q, 10, lease.ClaimOptions{}); len(cl.Items) > 0 {
		t.Fatalf("claimed %v while k's head is in flight", ids(cl.Items))
	}
	ack(t, pool, c1, m1.ID)
	if got := claimAll(t, pool, q); !slices.Equal(got, []int64{l[0].ID, l[1].ID}) {
		t.Fatalf("then delivered %v; want %d, %d", got, l[0].ID, l[1].ID)
	}
}

// A writer that rolls back leaves no gap and holds nothing up once it has
// ended: the writer that waited for it takes its number.
func TestOrderRolledBackWriterLeavesNoGap(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	c := outboxrt.NewClient(outboxrt.ClientOptions{})
	first, err := c.Send(ctx, pool, outbox.Message{Topic: "t", PartitionKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	tx, holder := begin(t, pool)
	if _, err := c.SendMany(ctx, tx, []outbox.Message{{Topic: "t", PartitionKey: "k"}, {Topic: "t", PartitionKey: "k"}}); err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	type result struct {
		s   outbox.Sent
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := c.Send(ctx, conn, outbox.Message{Topic: "t", PartitionKey: "k"})
		done <- result{s, err}
	}()
	waitBlockedBy(t, pool, conn.Conn().PgConn().PID(), holder)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	last, err := c.Send(ctx, pool, outbox.Message{Topic: "t", PartitionKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if got := keySeqs(t, pool, first.ID, r.s.ID, last.ID); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("key_seq %v; want 1, 2, 3: the rolled-back writer's numbers taken again", got)
	}
	if got := claimAll(t, pool, "default"); !slices.Equal(got, []int64{first.ID, r.s.ID, last.ID}) {
		t.Fatalf("delivered %v; want %d, %d, %d", got, first.ID, r.s.ID, last.ID)
	}
}

// A REPEATABLE READ or SERIALIZABLE writer whose snapshot predates another
// writer's commit on the same key fails with a serialization error
// (40001), as any update of a row changed since its snapshot does, and
// succeeds when retried. Other keys are not affected.
func TestKeySeqSnapshotWritersRetry(t *testing.T) {
	for _, iso := range []pgx.TxIsoLevel{pgx.RepeatableRead, pgx.Serializable} {
		t.Run(string(iso), func(t *testing.T) {
			pool := testdb.Pool(t)
			ctx := context.Background()
			c := outboxrt.NewClient(outboxrt.ClientOptions{})
			if _, err := c.Send(ctx, pool, outbox.Message{Topic: "t", PartitionKey: "k"}); err != nil {
				t.Fatal(err)
			}
			tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: iso})
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, `select count(*) from workq.outbox`); err != nil { // takes the snapshot
				t.Fatal(err)
			}
			if _, err := c.Send(ctx, pool, outbox.Message{Topic: "t", PartitionKey: "k"}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Send(ctx, tx, outbox.Message{Topic: "t", PartitionKey: "other"}); err != nil {
				t.Fatalf("a key nobody wrote since the snapshot: %v", err)
			}
			_, err = c.Send(ctx, tx, outbox.Message{Topic: "t", PartitionKey: "k"})
			var pg *pgconn.PgError
			if !errors.As(err, &pg) || pg.Code != "40001" {
				t.Fatalf("send on a key written since the snapshot: %v; want a serialization failure (40001)", err)
			}
			_ = tx.Rollback(ctx)
			err = pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: iso}, func(tx pgx.Tx) error {
				_, err := c.Send(ctx, tx, outbox.Message{Topic: "t", PartitionKey: "k"})
				return err
			})
			if err != nil {
				t.Fatalf("retry: %v", err)
			}
			if n := count(t, pool, `select max(key_seq) from workq.outbox where partition_key = 'k'`); n != 3 {
				t.Fatalf("k's last key_seq %d; want 3", n)
			}
		})
	}
}

// SendMany numbers each key's messages in input order, after what the key
// had, with one counter update per key.
func TestSendManyNumbersEachKeyInInputOrder(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	c := outboxrt.NewClient(outboxrt.ClientOptions{})
	m := func(q, k string) outbox.Message { return outbox.Message{Queue: q, Topic: "t", PartitionKey: k} }
	if _, err := c.Send(ctx, pool, m("q1", "b")); err != nil {
		t.Fatal(err)
	}
	sent, err := c.SendMany(ctx, pool, []outbox.Message{m("q1", "a"), m("q1", "b"), m("q1", "a"), m("q1", ""), m("q2", "a"), m("q1", "b"), m("q1", "a")})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, s := range sent {
		if i > 0 && s.ID <= sent[i-1].ID {
			t.Fatalf("ids %v not in input order", sent)
		}
		var seq *int64
		if err := pool.QueryRow(ctx, `select key_seq from workq.outbox where id = $1`, s.ID).Scan(&seq); err != nil {
			t.Fatal(err)
		}
		if seq == nil {
			got = append(got, "-")
		} else {
			got = append(got, fmt.Sprint(*seq))
		}
	}
	if want := []string{"1", "2", "2", "-", "1", "3", "3"}; !slices.Equal(got, want) {
		t.Fatalf("key_seq in input order %v; want %v", got, want)
	}
	if n := count(t, pool, `select count(*) from workq.outbox_key_seqs where (queue, partition_key, last_seq) in (('q1', 'a', 3), ('q1', 'b', 3), ('q2', 'a', 1))`); n != 3 {
		t.Fatalf("%d of 3 counters as expected", n)
	}
}

// Concurrent SendMany calls whose keys overlap in any order never deadlock:
// a batch takes its keys' counters in sorted order. Every key ends up
// numbered 1..n without a gap.
func TestSendManyConcurrentKeysNoDeadlock(t *testing.T) {
	pool := testdb.PoolWith(t, 10)
	ctx := context.Background()
	c := outboxrt.NewClient(outboxrt.ClientOptions{})
	const writers, batches = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range batches {
				keys := rand.Perm(6)
				msgs := make([]outbox.Message, len(keys))
				for i, k := range keys {
					msgs[i] = outbox.Message{Topic: "t", PartitionKey: fmt.Sprintf("k%d", k)}
				}
				if _, err := c.SendMany(ctx, pool, msgs); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := count(t, pool, `select count(*) from (
		select partition_key from workq.outbox group by partition_key
		having count(*) <> $1 or min(key_seq) <> 1 or max(key_seq) <> $1 or count(distinct key_seq) <> $1) x`, writers*batches); n != 0 {
		t.Fatalf("%d keys not numbered 1..%d", n, writers*batches)
	}
}

// Retention prunes the counters of keys with nothing pending that were not
// written for the retention age; a pruned key starts again at 1. It never
// prunes a counter whose key has a message not done (pending, in flight,
// failed), and it passes over, without waiting, a counter that an open
// writer holds.
func TestRetentionPrunesIdleKeyCounters(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	c := outboxrt.NewClient(outboxrt.ClientOptions{})
	send := func(db workqtype.DB, k string) outbox.Sent {
		t.Helper()
		s, err := c.Send(ctx, db, outbox.Message{Topic: "t", PartitionKey: k})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	done := send(pool, "done")
	send(pool, "pending")
	failed := send(pool, "failed")
	recent := send(pool, "recent")
	if _, err := pool.Exec(ctx, `update workq.outbox set status = 2, finished_at = now() where id = any($1)`, []int64{done.ID, recent.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `update workq.outbox set status = 3, finished_at = now() - interval '2 hours', last_error = 'x' where id = $1`, failed.ID); err != nil {
		t.Fatal(err)
	}
	// An open writer of "open", whose counter was last written long ago.
	send(pool, "open")
	if _, err := pool.Exec(ctx, `update workq.outbox set status = 2, finished_at = now() where partition_key = 'open'`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `update workq.outbox_key_seqs set updated_at = now() - interval '2 hours' where partition_key <> 'recent'`); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	send(tx, "open")
	// The writer's counter now says its transaction's start: make that old
	// too, as for a long transaction.
	if _, err := tx.Exec(ctx, `update workq.outbox_key_seqs set updated_at = now() - interval '2 hours' where partition_key = 'open'`); err != nil {
		t.Fatal(err)
	}

	n, err := lease.New(pool, lease.Outbox).DeleteFinished(ctx, time.Hour, 100)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	rows, err := pool.Query(ctx, `select partition_key from workq.outbox_key_seqs order by partition_key`)
	if err != nil {
		t.Fatal(err)
	}
	left, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"failed", "open", "pending", "recent"}; n != 1 || !slices.Equal(left, want) {
		t.Fatalf("retention deleted %d rows, counters left %v; want 1 (the counter of done) and %v", n, left, want)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := keySeqs(t, pool, send(pool, "done").ID, send(pool, "open").ID, send(pool, "pending").ID); !slices.Equal(got, []int64{1, 3, 2}) {
		t.Fatalf("next key_seq of done, open, pending: %v; want 1 (pruned), 3, 2", got)
	}
}

// Retention pruning counters with no age at all, in a loop, while writers
// commit messages of the same keys and a relay delivers them: no key ever
// starts again while a message of it is pending. Each writer writes its
// key sequentially; a message written while the previous one is still
// pending must take the next number.
func TestPruneKeyCountersRace(t *testing.T) {
	pool := testdb.PoolWith(t, 20)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := outboxrt.NewClient(outboxrt.ClientOptions{})
	const keys, perKey = 4, 150
	var pruned sync.WaitGroup
	pruneErr := make(chan error, 1)
	var prunes int64
	pruned.Add(1)
	go func() {
		defer pruned.Done()
		for ctx.Err() == nil {
			var n int64
			if err := pool.QueryRow(ctx, `select workq.outbox_prune_key_seqs(0, 100)`).Scan(&n); err != nil {
				if ctx.Err() == nil {
					pruneErr <- err
				}
				return
			}
			prunes += n
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, keys)
	for k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("k%d", k)
			prev := outbox.Sent{}
			var prevSeq int64
			for range perKey {
				// Deliver the previous message first half of the time, so
				// that the key is sometimes idle (prunable) just before
				// the next write, and sometimes not.
				idle := rand.IntN(2) == 0
				if idle && prev.ID != 0 {
					if _, err := pool.Exec(ctx, `update workq.outbox set status = 2, finished_at = now() where id = $1`, prev.ID); err != nil {
						errs <- err
						return
					}
				}
				s, err := c.Send(ctx, pool, outbox.Message{Topic: "t", PartitionKey: key})
				if err != nil {
					errs <- err
					return
				}
				var seq int64
				if err := pool.QueryRow(ctx, `select key_seq from workq.outbox where id = $1`, s.ID).Scan(&seq); err != nil {
					errs <- err
					return
				}
				if !idle && prev.ID != 0 && seq != prevSeq+1 {
					errs <- fmt.Errorf("key %s: message %d took key_seq %d while %d (key_seq %d) was pending", key, s.ID, seq, prev.ID, prevSeq)
					return
				}
				if !idle && prev.ID != 0 {
					// The previous message is delivered now; s stays pending.
					if _, err := pool.Exec(ctx, `update workq.outbox set status = 2, finished_at = now() where id = $1`, prev.ID); err != nil {
						errs <- err
						return
					}
				}
				prev, prevSeq = s, seq
			}
		}()
	}
	wg.Wait()
	cancel()
	pruned.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	select {
	case err := <-pruneErr:
		t.Fatal(err)
	default:
	}
	if prunes == 0 {
		t.Errorf("no counter pruned: the test did not exercise pruning")
	}
	t.Logf("%d counters pruned while %d keys were written %d times each", prunes, keys, perKey)
}
