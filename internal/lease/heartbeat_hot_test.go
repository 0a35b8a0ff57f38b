package lease_test

import (
	"testing"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/lease"
)

// A heartbeat changes only locked_until, which no index holds: every one is a
// HOT update.
func TestLeaseHeartbeatIsHOT(t *testing.T) {
	const beats = 25
	db := newLeaseDB(t, 2)
	for _, tbl := range leaseTables {
		t.Run(tbl.name, func(t *testing.T) {
			e := db.on(t, tbl)
			id := e.enqueue(enqueueSpec{queue: "default", n: 1})[0]
			// One session does the updates and reads the statistics, so that
			// pg_stat_force_next_flush flushes the counts it reads.
			conn, err := e.pool.Acquire(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Release()
			db, err := lease.OnTable(conn, lease.Table(tbl.name))
			if err != nil {
				t.Fatal(err)
			}
			q := gen.New(db)
			c, err := tbl.claim(e.ctx, q, claimParams{queue: "default", workerID: "w", leaseMs: 60_000, maxRows: 1})
			if err != nil || len(c) != 1 {
				t.Fatalf("claim: %v, %d rows; want 1 row", err, len(c))
			}
			stats := func() (upd, hot int64) {
				t.Helper()
				if _, err := conn.Exec(e.ctx, "select pg_stat_force_next_flush()"); err != nil {
					t.Fatal(err)
				}
				if err := conn.QueryRow(e.ctx, "select n_tup_upd, n_tup_hot_upd from pg_stat_user_tables where relname = $1",
					tbl.name).Scan(&upd, &hot); err != nil {
					t.Fatal(err)
				}
				return upd, hot
			}
			upd0, hot0 := stats()
			for i := 0; i < beats; i++ {
				got, err := heartbeatRows(e.ctx, q, 60_000, []int64{id}, c[0].Token)
				if err != nil || len(got) != 1 {
					t.Fatalf("heartbeat %d: %v, extended %v; want [%d]", i, err, got, id)
				}
			}
			upd1, hot1 := stats()
			if upd1-upd0 != beats || hot1-hot0 != beats {
				t.Fatalf("%d heartbeats made %d updates of which %d HOT; want %d and %d",
					beats, upd1-upd0, hot1-hot0, beats, beats)
			}
		})
	}
}
