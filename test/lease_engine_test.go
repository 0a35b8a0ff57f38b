package test

import (
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workq/workq/lease"
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
					if len(runs) != 1 || runs[0].RunID != it.RunID || runs[0].OwnerToken != c.Token || runs[0].Outcome != "done" {
						t.Errorf("%d: runs %+v; want one done run %s under token %s", it.ID, runs, it.RunID, c.Token)
					}
				}
			}
		})
	}
}
