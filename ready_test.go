package workq_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
)

// Ready answers the schema version of every shard's database; a schema
// behind is ErrSchemaBehind saying to migrate, on a sharded Client a
// *ShardsError naming the shard; a database that does not answer is an
// error too, naming its shard, and the other shards are still checked.
func TestClientReady(t *testing.T) {
	ctx := context.Background()
	for name, c := range opsClients(t) {
		t.Run(name, func(t *testing.T) {
			v, err := c.Ready(ctx)
			if err != nil || v == 0 {
				t.Fatalf("Ready: %d %v", v, err)
			}
			// The last shard's newest migration is not applied.
			last, err := c.Shard(c.Shards()[len(c.Shards())-1])
			if err != nil {
				t.Fatal(err)
			}
			if _, err := last.Pool().Exec(ctx, `delete from `+c.Schema()+`.workq_migrations where version_id = (select max(version_id) from `+c.Schema()+`.workq_migrations)`); err != nil {
				t.Fatal(err)
			}
			_, err = c.Ready(ctx)
			if !errors.Is(err, workq.ErrSchemaBehind) || !strings.Contains(err.Error(), "migrate up") {
				t.Fatalf("Ready on a schema behind: %v", err)
			}
			var se *workq.ShardsError
			if sharded := len(c.Shards()) > 1; sharded != errors.As(err, &se) {
				t.Fatalf("Ready's error %v: a *ShardsError is %v, want %v", err, !sharded, sharded)
			}
			if se != nil && (len(se.Failed) != 1 || se.Failed[last.ShardName()] == nil) {
				t.Fatalf("failed shards: %v", se.Failed)
			}
		})
	}
	t.Run("a shard down", func(t *testing.T) {
		down, err := pgxpool.New(ctx, "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(down.Close)
		c, err := workq.NewShardedClient([]workq.Shard{{Name: "a", Pool: testdb.Pool(t)}, {Name: "b", Pool: down}}, workq.Config{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Ready(ctx)
		var se *workq.ShardsError
		if !errors.As(err, &se) || len(se.Failed) != 1 || se.Failed["b"] == nil || errors.Is(err, workq.ErrSchemaBehind) {
			t.Fatalf("Ready with b down: %v", err)
		}
		if got := se.Shards(); len(got) != 1 || got[0] != "b" {
			t.Fatalf("Shards: %v", got)
		}
	})
}
