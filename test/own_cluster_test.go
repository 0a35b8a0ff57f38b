package test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/lease"
	"github.com/workq/workq/outbox"
)

// TestOwnClusterIgnoresSharedServer: this package runs on a throwaway
// cluster of its own (testdb.MainOwnCluster), so a transaction held open in
// another database of the shared server does not hold up its keyed outbox
// messages, which wait for every older transaction of their cluster to end
// (pg_snapshot_xmin). TestPgBouncer failed 3 runs of 3 on the shared server
// while an unrelated database held a transaction open.
//
// The test holds a transaction with an xid open on the shared server, checks
// that a keyed message written after it on the shared server is not
// claimable (the hazard is real there), and that one written on this
// package's cluster is.
func TestOwnClusterIgnoresSharedServer(t *testing.T) {
	ctx := context.Background()
	const queue = "own-cluster"
	send := func(pool *pgxpool.Pool) {
		t.Helper()
		if _, err := outbox.NewClient(outbox.ClientOptions{}).Send(ctx, pool,
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

	// On the shared server the message waits for the held transaction.
	send(shared)
	for i := 0; i < 5; i++ {
		if n := claim(shared); n != 0 {
			t.Fatalf("claimed %d keyed messages on the shared server while transaction %s, older than them, is open; want none", n, xid)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// On this package's cluster it does not.
	send(own)
	awaitCond(t, 30*time.Second, "the keyed message on this package's own cluster to be claimable", func() (bool, string) {
		if claim(own) == 1 {
			return true, ""
		}
		return false, "transactions holding the cluster's xmin back: " + oldestTransactions(t, own)
	})
}

// serverID names the cluster behind pool: its system identifier.
func serverID(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	return fmt.Sprint(queryScalar[int64](t, pool, "select system_identifier from pg_control_system()"))
}

// oldestTransactions lists the cluster's open transactions that have an xid,
// oldest first: what a keyed outbox message waits for.
func oldestTransactions(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	return queryScalar[string](t, pool, `select coalesce(string_agg(format('pid %s in %s, xid %s, %s since %s', pid, datname, backend_xid, state, xact_start), '; '
		order by age(backend_xid) desc), 'none') from pg_stat_activity where backend_xid is not null`)
}
