package lease_test

import (
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workq/workq/internal/lease"
)

// One lease.Engine.Complete call ends attempts of several claims: each id is
// checked against its own claim's token (the engine sends each distinct
// token once), a stale or foreign token loses only its own id, and item run
// ids match what the archive records.
func TestEngineCompleteMixesClaims(t *testing.T) {
	db := newLeaseDB(t, 4)
	ctx := db.ctx
	for _, tbl := range leaseTables {
		t.Run(tbl.name, func(t *testing.T) {
			table, err := lease.ParseTable(tbl.name)
			if err != nil {
				t.Fatal(err)
			}
			e := db.on(t, tbl)
			e.enqueue(enqueueSpec{n: 6, queue: "mix"})
			eng := lease.New(e.pool, table)
			var claims []lease.Claim
			for range 3 {
				c, err := eng.Claim(ctx, lease.ClaimParams{Queue: "mix", Max: 2, Lease: time.Minute, WorkerID: "w"})
				if err != nil || len(c.Items) != 2 {
					t.Fatalf("claim: %d items, %v; want 2", len(c.Items), err)
				}
				claims = append(claims, c)
			}
			var cs []lease.Completion
			for i, c := range claims {
				for _, it := range c.Items {
					if it.OwnerToken != c.Token || it.RunID != runID(table, it.ID, it.LeaseVersion) {
						t.Fatalf("item %+v: token or run id does not match its claim %s", it, c.Token)
					}
					tok := c.Token
					if i == 2 && it.ID == c.Items[1].ID {
						tok = uuid.New() // not this attempt's token
					}
					cs = append(cs, lease.Completion{ID: it.ID, Token: tok, Outcome: lease.Done})
				}
			}
			// Interleave the claims so that tokens alternate within the call.
			cs = []lease.Completion{cs[0], cs[2], cs[4], cs[1], cs[5], cs[3]}
			a, err := eng.Complete(ctx, cs)
			if err != nil {
				t.Fatal(err)
			}
			foreign := claims[2].Items[1].ID
			if !slices.Equal(a.Lost, []int64{foreign}) || len(a.Status) != 5 {
				t.Fatalf("applied %v, lost %v; want 5 applied and only %d lost", a.Status, a.Lost, foreign)
			}
			for _, c := range claims {
				for _, it := range c.Items {
					runs := e.runs(it.ID)
					if it.ID == foreign {
						if len(runs) != 0 {
							t.Errorf("%d: runs %+v; want none for a refused completion", it.ID, runs)
						}
						continue
					}
					// a row that moved keeps no token: uuid.Nil (leaseEnv.runs)
					wantToken := c.Token
					if _, moves, _ := lease.DoneTable(table); moves {
						wantToken = uuid.Nil
					}
					if len(runs) != 1 || runs[0].RunID != it.RunID || runs[0].OwnerToken != wantToken || runs[0].Outcome != "done" {
						t.Errorf("%d: runs %+v; want one done run %s under token %s", it.ID, runs, it.RunID, c.Token)
					}
				}
			}
		})
	}
}

// One Heartbeat statement extends the leases of several claims, each
// checked against its own token: a foreign token extends nothing.
func TestEngineHeartbeatMixesClaims(t *testing.T) {
	db := newLeaseDB(t, 4)
	for _, tbl := range leaseTables {
		t.Run(tbl.name, func(t *testing.T) {
			e := db.on(t, tbl)
			e.enqueue(enqueueSpec{n: 4, queue: "hb"})
			eng := lease.New(e.pool, lease.Table(tbl.name))
			var held []lease.Held
			for range 2 {
				c, err := eng.Claim(e.ctx, lease.ClaimParams{Queue: "hb", Max: 2, Lease: 2 * time.Second, WorkerID: "w"})
				if err != nil || len(c.Items) != 2 {
					t.Fatalf("claim: %d items, %v; want 2", len(c.Items), err)
				}
				for _, it := range c.Items {
					held = append(held, lease.Held{ID: it.ID, Token: c.Token})
				}
			}
			foreign := held[3].ID
			held[3].Token = uuid.New()
			extended, lost, err := eng.Heartbeat(e.ctx, held, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(extended)
			if want := []int64{held[0].ID, held[1].ID, held[2].ID}; !slices.Equal(extended, want) || !slices.Equal(lost, []int64{foreign}) {
				t.Fatalf("extended %v, lost %v; want %v and [%d]", extended, lost, want, foreign)
			}
			for _, h := range held[:3] {
				if r := e.get(h.ID); deref(r.LockedUntil).Sub(e.dbNow()) < 50*time.Minute {
					t.Errorf("%d: locked until %s, want about an hour from now", h.ID, deref(r.LockedUntil))
				}
			}
			if r := e.get(foreign); deref(r.LockedUntil).Sub(e.dbNow()) > 5*time.Second {
				t.Errorf("%d: a foreign token extended its lease to %s", foreign, deref(r.LockedUntil))
			}
		})
	}
}

// Defect 6: a heartbeat must not revive a lease that expired while the
// statement was under way. Its check reads the clock when it examines the
// row, not the statement's (or transaction's) start: here the transaction
// starts while the lease is valid and the heartbeat runs after it expired.
func TestEngineHeartbeatCannotReviveAnExpiredLease(t *testing.T) {
	db := newLeaseDB(t, 4)
	for _, tbl := range leaseTables {
		t.Run(tbl.name, func(t *testing.T) {
			e := db.on(t, tbl)
			e.enqueue(enqueueSpec{n: 1, queue: "revive"})
			c, err := lease.New(e.pool, lease.Table(tbl.name)).Claim(e.ctx, lease.ClaimParams{Queue: "revive", Max: 1, Lease: 300 * time.Millisecond, WorkerID: "w"})
			if err != nil || len(c.Items) != 1 {
				t.Fatalf("claim: %d items, %v; want 1", len(c.Items), err)
			}
			it := c.Items[0]
			tx, err := e.pool.Begin(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(e.ctx)
			var valid bool
			if err := tx.QueryRow(e.ctx, "select $1::timestamptz > now()", it.LockedUntil).Scan(&valid); err != nil || !valid {
				t.Fatalf("the transaction must start while the lease is valid: %v, %v", valid, err)
			}
			e.waitExpired(claimedRow{LockedUntil: it.LockedUntil})
			extended, lost, err := lease.New(tx, lease.Table(tbl.name)).Heartbeat(e.ctx, []lease.Held{{ID: it.ID, Token: c.Token}}, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if len(extended) != 0 || !slices.Equal(lost, []int64{it.ID}) {
				t.Fatalf("heartbeat after expiry extended %v, lost %v; want nothing extended", extended, lost)
			}
			if err := tx.Commit(e.ctx); err != nil {
				t.Fatal(err)
			}
			if r := e.get(it.ID); !deref(r.LockedUntil).Equal(it.LockedUntil) {
				t.Errorf("locked_until moved from %s to %s", it.LockedUntil, deref(r.LockedUntil))
			}
		})
	}
}
