package test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/outboxrt"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/outbox"
)

// TestOwnClusterIgnoresSharedServer: this package runs on a throwaway
// cluster of its own (testdb.MainOwnCluster), so nothing another client of
// the shared server does can change its outcomes. Keyed outbox messages used
// to wait for every older transaction of their cluster to end
// (pg_snapshot_xmin): TestPgBouncer failed 3 runs of 3 on the shared server
// while an unrelated database held a transaction open. Since migration
// 00016 a key waits only for its own earlier writers (key_seq, issue 20), so
// the hazard itself is gone; the own cluster stays as isolation.
//
// The test holds a transaction with an xid open in another database of the
// shared server, and checks that a keyed message written after it is
// claimable both on the shared server (no cluster-wide gate) and on this
// package's own cluster, which it checks is another cluster.
func TestOwnClusterIgnoresSharedServer(t *testing.T) {
	ctx := context.Background()
	const queue = "own-cluster"
	send := func(pool *pgxpool.Pool) {
		t.Helper()
		if _, err := outboxrt.NewClient(outboxrt.ClientOptions{}).Send(ctx, pool,
			outbox.Message{Queue: queue, Topic: "t", PartitionKey: "k"}); err != nil {
			t.Fatal(err)
		}
	}
	claim := func(pool *pgxpool.Pool) int {
		t.Helper()
		c, err := lease.New(pool, lease.Outbox).Claim(ctx, lease.ClaimParams{Queue: queue, Max: 10, Lease: time.Minute, WorkerID: "own-cluster"})
		if err != nil {
			t.Fatal(err)
		}
		return len(c.Items)
	}

	holder := openTestPool(t, testdb.SharedURL(t))
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var xid string
	if err := tx.QueryRow(ctx, "select pg_current_xact_id()::text").Scan(&xid); err != nil {
		t.Fatal(err)
	}

	shared := openTestPool(t, testdb.SharedURL(t))
	own := openTestPool(t, testdb.URL(t))
	if a, b := serverID(t, shared), serverID(t, own); a == b {
		t.Fatalf("testdb.URL and testdb.SharedURL are on the same cluster (%s): this package must run on its own", a)
	}

	// Neither waits for the transaction held open in another database.
	for name, pool := range map[string]*pgxpool.Pool{"the shared server": shared, "this package's own cluster": own} {
		send(pool)
		awaitCond(t, 30*time.Second, "the keyed message on "+name+" to be claimable while transaction "+xid+" is open elsewhere", func() (bool, string) {
			if claim(pool) == 1 {
				return true, ""
			}
			return false, "open transactions of the cluster: " + oldestTransactions(t, pool)
		})
	}
}

// serverID names the cluster behind pool: its system identifier.
func serverID(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	return fmt.Sprint(queryScalar[int64](t, pool, "select system_identifier from pg_control_system()"))
}

// oldestTransactions lists the cluster's open transactions that have an xid,
// oldest first (for a wait's message).
func oldestTransactions(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	return queryScalar[string](t, pool, `select coalesce(string_agg(format('pid %s in %s, xid %s, %s since %s', pid, datname, backend_xid, state, xact_start), '; '
		order by age(backend_xid) desc), 'none') from pg_stat_activity where backend_xid is not null`)
}
