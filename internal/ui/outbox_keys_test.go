package ui_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/testutil"
	"github.com/workq/workq/outbox"
)

// blockKey writes two messages of partition key on pool and fails the
// first: the key is blocked behind it. It returns the head's id.
func blockKey(t *testing.T, pool *pgxpool.Pool, key string) int64 {
	t.Helper()
	ctx := context.Background()
	c, err := workq.NewClient(pool, workq.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var head int64
	for i := range 2 {
		r, err := c.Send(ctx, outbox.Message{Topic: "hook", PartitionKey: key})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			head = r.ID
		}
	}
	if _, err := pool.Exec(ctx, `update workq.outbox set status = 3, attempts = 1, finished_at = now(), last_error = 'boom' where id = $1`, head); err != nil {
		t.Fatal(err)
	}
	return head
}

// The outbox page of a sharded dashboard lists the blocked keys of every
// shard (Client.OutboxKeys), each head linked with its shard; a shard
// that does not answer is named, and the others' keys are shown.
func TestDashboardOutboxKeysOfEveryShard(t *testing.T) {
	us, px := testutil.ProxiedPool(t, testdb.URL(t))
	s := newShardedSite(t, us, func(o *siteSetup) { o.ShardTimeout = 300 * time.Millisecond })
	euHead, usHead := blockKey(t, s.pool, "order-eu"), blockKey(t, us, "order-us")
	b := s.browser()
	b.login(s.read)
	must(t, b.get("/ui/outbox"), 200, "<th scope=\"row\">order-eu</th>", "<th scope=\"row\">order-us</th>",
		`href="./items/outbox/`+itoa(euHead)+`?shard=eu">eu:`+itoa(euHead)+`</a>`,
		`href="./items/outbox/`+itoa(usHead)+`?shard=us">us:`+itoa(usHead)+`</a>`)

	px.Cut()
	defer px.Restore()
	p := b.get("/ui/outbox")
	must(t, p, 200, "Shard us is unreachable and left out of this page: it did not answer within 300ms.", "order-eu")
	if strings.Contains(p.body, "order-us") {
		t.Error("the cut shard's key is listed")
	}
}

// The dashboard of one database links a blocked key's head without a
// shard.
func TestDashboardOutboxKeysUnsharded(t *testing.T) {
	s := newSite(t)
	head := blockKey(t, s.pool, "order-1")
	b := s.browser()
	b.login(s.read)
	p := b.get("/ui/outbox")
	must(t, p, 200, "<th scope=\"row\">order-1</th>", `href="./items/outbox/`+itoa(head)+`">`+itoa(head)+`</a>`, `s-failed`)
	if strings.Contains(p.body, "shard") {
		t.Error("the page of one database names a shard")
	}
}
