package api

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
)

// The API's bound of an item id is the engine's.
func TestMaxItemIDIsTheEngines(t *testing.T) {
	if maxItemID != lease.MaxItemID {
		t.Fatalf("maxItemID %d, the engine's %d", int64(maxItemID), int64(lease.MaxItemID))
	}
}

// /readyz of a sharded API checks every shard (the Client's Ready), not
// the first only: a second shard whose schema is behind makes it 503
// saying to migrate, and one that does not answer makes it 503 without the
// connection's details.
func TestReadyzChecksEveryShard(t *testing.T) {
	second := testdb.Pool(t)
	e := newEnv(t, func(o *setup) {
		o.shards = []workq.Shard{{Name: "a", Pool: o.pool}, {Name: "b", Pool: second}}
	})
	advance := freezeReady(e.srv)
	var h health
	e.must(200, "GET", "/readyz", "", nil).decode(t, &h)
	if h.Status != "ready" || h.SchemaVersion == 0 {
		t.Fatalf("ready: %+v", h)
	}
	if _, err := second.Exec(context.Background(),
		`delete from workq.workq_migrations where version_id = (select max(version_id) from workq.workq_migrations)`); err != nil {
		t.Fatal(err)
	}
	advance(readyTTL)
	e.must(503, "GET", "/readyz", "", nil).decode(t, &h)
	if h.Status != "unavailable" || !strings.Contains(h.Error, "migrate up") || !strings.Contains(h.Error, "shard(s) b") {
		t.Fatalf("b behind: %+v", h)
	}

	down, err := pgxpool.New(context.Background(), "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(down.Close)
	e = newEnv(t, func(o *setup) {
		o.shards = []workq.Shard{{Name: "a", Pool: o.pool}, {Name: "b", Pool: down}}
	})
	e.must(503, "GET", "/readyz", "", nil).decode(t, &h)
	if h.Status != "unavailable" || h.Error != "the database does not answer" {
		t.Fatalf("b down: %+v", h)
	}
}
