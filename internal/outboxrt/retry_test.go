package outboxrt_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/outboxrt"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/workqtype"
)

// An operator retries a message its key had skipped (a Skip topic) while
// the next message of the key is in flight: the key waits until that one
// ends, and the database refuses a second in-flight message of the key
// outright (outbox_key_in_flight), whatever a claimer's snapshot says.
func TestRetryOfSkippedMessageWaitsForTheKey(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	sent, err := outboxrt.NewClient(outboxrt.ClientOptions{}).SendMany(ctx, pool, []outbox.Message{
		{Topic: "audit", PartitionKey: "k"}, {Topic: "audit", PartitionKey: "k"}, {Topic: "audit", PartitionKey: "k"},
	})
	if err != nil {
		t.Fatal(err)
	}
	m1, m2, m3 := sent[0].ID, sent[1].ID, sent[2].ID
	skip := lease.ClaimOptions{SkipTopics: []string{"audit"}}
	eng := lease.New(pool, lease.Outbox)
	var c1 lease.Claim
	waitFor(t, "the key's head", func() bool { c1 = claim(t, pool, "default", 10, skip); return len(c1.Items) > 0 })
	if got := ids(c1.Items); !slices.Equal(got, []int64{m1}) {
		t.Fatalf("first claim %v, want [%d]", got, m1)
	}
	if err := eng.Fail(ctx, c1.Token, m1, "rejected"); err != nil {
		t.Fatal(err)
	}
	var c2 lease.Claim
	waitFor(t, "the next message of the key", func() bool { c2 = claim(t, pool, "default", 10, skip); return len(c2.Items) > 0 })
	if got := ids(c2.Items); !slices.Equal(got, []int64{m2}) {
		t.Fatalf("claim after the skipped failure %v, want [%d]", got, m2)
	}
	if got, err := admin.Retry(ctx, pool, lease.Outbox, admin.Actor{Name: "test", Reason: "endpoint fixed"}, m1); err != nil || !slices.Equal(got.Applied, []int64{m1}) {
		t.Fatalf("retry: %v %v", got, err)
	}
	if c := claim(t, pool, "default", 10, skip); len(c.Items) != 0 {
		t.Fatalf("claimed %v while message %d of the key is in flight", ids(c.Items), m2)
	}
	// What a claim on an older snapshot would do: put m1 in flight beside m2.
	_, err = pool.Exec(ctx, `update workq.outbox set status = 1, owner_token = $2, locked_until = now() + interval '1 minute' where id = $1`, m1, uuid.New())
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" || pgErr.ConstraintName != "outbox_key_in_flight" {
		t.Fatalf("a second in-flight message of the key: %v; want a unique violation of outbox_key_in_flight", err)
	}
	ack(t, pool, c2, m2)
	// The retried message goes next (after m2: it had been skipped), then m3.
	c3 := claimUntil(t, pool, "default", m1)
	ack(t, pool, c3, m1)
	c4 := claimUntil(t, pool, "default", m3)
	ack(t, pool, c4, m3)
}

// Retention deletes finished messages older than the age, but never a
// failed message with a partition key: it may be blocking its key, and
// deleting it would let the next message go as if it had been delivered.
func TestDeleteFinishedKeepsFailedKeyedMessages(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	sent, err := outboxrt.NewClient(outboxrt.ClientOptions{}).SendMany(ctx, pool, []outbox.Message{
		{Topic: "t", PartitionKey: "k"}, {Topic: "t", PartitionKey: "k"}, {Topic: "t"}, {Topic: "t"},
	})
	if err != nil {
		t.Fatal(err)
	}
	keyedHead, keyedNext, unkeyedFailed, unkeyedDone := sent[0].ID, sent[1].ID, sent[2].ID, sent[3].ID
	eng := lease.New(pool, lease.Outbox)
	var c lease.Claim
	waitFor(t, "three claimable messages", func() bool {
		c = claim(t, pool, "default", 10, lease.ClaimOptions{})
		return len(c.Items) == 3
	})
	if err := eng.Fail(ctx, c.Token, keyedHead, "rejected"); err != nil {
		t.Fatal(err)
	}
	if err := eng.Fail(ctx, c.Token, unkeyedFailed, "rejected"); err != nil {
		t.Fatal(err)
	}
	ack(t, pool, c, unkeyedDone)
	if _, err := pool.Exec(ctx, `update workq.outbox set finished_at = now() - interval '8 days' where status >= 2`); err != nil {
		t.Fatal(err)
	}
	n, err := eng.DeleteFinished(ctx, 7*24*time.Hour, 100)
	if err != nil || n != 2 {
		t.Fatalf("deleted %d (%v); want the unkeyed failed and done messages", n, err)
	}
	left := count(t, pool, `select count(*) from workq.outbox where id = any($1)`, []int64{keyedHead, keyedNext})
	gone := count(t, pool, `select count(*) from workq.outbox where id = any($1)`, []int64{unkeyedFailed, unkeyedDone})
	if left != 2 || gone != 0 {
		t.Fatalf("%d of the keyed messages left, %d unkeyed left; want 2 and 0", left, gone)
	}
	if c := claim(t, pool, "default", 10, lease.ClaimOptions{}); len(c.Items) != 0 {
		t.Fatalf("claimed %v behind the failed head after retention", ids(c.Items))
	}
}

// Send and SendMany report a join's refusal of a member with the join
// sentinels, and write nothing of the call.
func TestSendMapsJoinRefusals(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	c := outboxrt.NewClient(outboxrt.ClientOptions{})
	j, err := outboxrt.StartJoin(ctx, pool, outbox.JoinSpec{Expected: 1, OnComplete: outbox.JoinMessage{Topic: "done"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, pool, outbox.Message{Topic: "m", JoinID: j.ID + 1000}); !errors.Is(err, outbox.ErrJoinNotFound) {
		t.Fatalf("member of an unknown join: %v; want ErrJoinNotFound", err)
	}
	if _, err := c.SendMany(ctx, pool, []outbox.Message{{Topic: "m", JoinID: j.ID}, {Topic: "m", JoinID: j.ID}}); !errors.Is(err, outbox.ErrJoinFull) {
		t.Fatalf("two members of a one-member join: %v; want ErrJoinFull", err)
	}
	if n := count(t, pool, `select count(*) from workq.outbox where topic = 'm'`); n != 0 {
		t.Fatalf("%d messages written by refused sends", n)
	}
}

// A topic with a space at either end is refused (webhooks carry topics in
// HTTP headers, which trim them, and a signature over the untrimmed topic
// would never verify); nothing is written.
func TestSendRefusesTopicsWithOuterSpaces(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	c := outboxrt.NewClient(outboxrt.ClientOptions{})
	for _, topic := range []string{"orders ", " orders", "orders\u00a0"} {
		if _, err := c.Send(ctx, pool, outbox.Message{Topic: topic}); !errors.Is(err, workqtype.ErrInvalid) {
			t.Errorf("Send with topic %q: %v; want ErrInvalid", topic, err)
		}
	}
	if _, err := c.Send(ctx, pool, outbox.Message{Topic: "a b"}); err != nil {
		t.Fatalf("a space inside a topic: %v", err)
	}
	if n := count(t, pool, `select count(*) from workq.outbox where topic <> 'a b'`); n != 0 {
		t.Fatalf("%d messages written by refused sends", n)
	}
}

// A cancelled keyed message blocks nothing: cancelling the key's ready head
// lets the next message go, so does cancelling the running head once its
// attempt ends, and retention deletes cancelled keyed messages.
func TestCancelledKeyedMessageDoesNotBlockItsKey(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	sent, err := outboxrt.NewClient(outboxrt.ClientOptions{}).SendMany(ctx, pool, []outbox.Message{
		{Topic: "t", PartitionKey: "k"}, {Topic: "t", PartitionKey: "k"}, {Topic: "t", PartitionKey: "k"},
	})
	if err != nil {
		t.Fatal(err)
	}
	m1, m2, m3 := sent[0].ID, sent[1].ID, sent[2].ID
	eng := lease.New(pool, lease.Outbox)
	if c, err := eng.Cancel(ctx, "op", "", m1); err != nil || !slices.Equal(c.Now, []int64{m1}) {
		t.Fatalf("cancel the ready head: %+v, %v", c, err)
	}
	c2 := claimUntil(t, pool, "default", m2)
	if c, err := eng.Cancel(ctx, "op", "", m2); err != nil || !slices.Equal(c.Requested, []int64{m2}) {
		t.Fatalf("cancel the running head: %+v, %v", c, err)
	}
	if c := claim(t, pool, "default", 10, lease.ClaimOptions{}); len(c.Items) != 0 {
		t.Fatalf("claimed %v while the key's head is still running", ids(c.Items))
	}
	a, err := eng.Complete(ctx, []lease.Completion{{ID: m2, Token: c2.Token, Outcome: lease.Retry, Error: "stopped"}})
	if err != nil || a.Status[m2] != lease.StatusCancelled {
		t.Fatalf("completion of the cancelled head: %+v, %v", a, err)
	}
	c3 := claimUntil(t, pool, "default", m3)
	ack(t, pool, c3, m3)
	if _, err := pool.Exec(ctx, `update workq.outbox set finished_at = now() - interval '1 day'`); err != nil {
		t.Fatal(err)
	}
	if n, err := eng.DeleteFinished(ctx, time.Hour, 100); err != nil || n != 3 {
		t.Fatalf("retention deleted %d (%v), want the two cancelled and the delivered message", n, err)
	}
}
