package workq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
)

// EnqueueMany takes jobs with RunAt (one at a time in one transaction, all
// or none), on one database, in the caller's transaction and on a sharded
// Client, beside jobs with a Delay; an invalid job writes nothing.
func TestEnqueueManyTakesRunAt(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	batch := func(kind string) []workq.EnqueueParams {
		return []workq.EnqueueParams{
			{Args: workq.RawArgs{KindName: kind}, Opts: &workq.EnqueueOpts{Delay: time.Hour}},
			{Args: workq.RawArgs{KindName: kind}, Opts: &workq.EnqueueOpts{RunAt: at, DedupKey: kind + ":1"}},
			{Args: workq.RawArgs{KindName: kind}, Opts: &workq.EnqueueOpts{RunAt: at, DedupKey: kind + ":1"}},
		}
	}
	check := func(t *testing.T, pools map[string]*pgxpool.Pool, kind string, res []workq.Enqueued) {
		t.Helper()
		if len(res) != 3 || res[0].Duplicate || res[1].Duplicate || !res[2].Duplicate || res[2].ID != res[1].ID {
			t.Fatalf("results %+v: want two new and a duplicate of the second", res)
		}
		var runAt time.Time
		if err := pools[res[1].Shard].QueryRow(ctx, "select run_at from workq.job_runs_all where id = $1", res[1].ID).Scan(&runAt); err != nil {
			t.Fatal(err)
		}
		if !runAt.Equal(at) {
			t.Fatalf("run_at %s, want %s", runAt, at)
		}
	}
	pool := testdb.Pool(t)
	one := map[string]*pgxpool.Pool{workq.DefaultShard: pool}
	client, err := workq.NewClient(pool, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := client.EnqueueMany(ctx, batch("pool"))
	if err != nil {
		t.Fatal(err)
	}
	check(t, one, "pool", res)

	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		res, err = client.EnqueueManyTx(ctx, tx, batch("tx"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	check(t, one, "tx", res)

	// An invalid job of the batch writes none of it.
	bad := append(batch("bad"), workq.EnqueueParams{Args: workq.RawArgs{KindName: "bad kind"}, Opts: &workq.EnqueueOpts{RunAt: at}})
	before := testdb.Snapshot(t, pool)
	if _, err := client.EnqueueMany(ctx, bad); !errors.Is(err, workq.ErrInvalid) {
		t.Fatalf("a batch with an invalid job: %v, want ErrInvalid", err)
	}
	if testdb.Snapshot(t, pool) != before {
		t.Fatal("a refused batch wrote")
	}

	pools := map[string]*pgxpool.Pool{"a": testdb.Pool(t), "b": testdb.Pool(t)}
	sharded, err := workq.NewShardedClient([]workq.Shard{{Name: "a", Pool: pools["a"]}, {Name: "b", Pool: pools["b"]}},
		workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	res, err = sharded.EnqueueMany(ctx, batch("sharded"))
	if err != nil {
		t.Fatal(err)
	}
	check(t, pools, "sharded", res)
}
