package lease_test

import (
	"slices"
	"testing"
	"time"

	"github.com/workq/workq/internal/lease"
)

// Revive puts only failed items back to ready with their attempts reset,
// and keeps an audit row (outcome revived, the actor, the reason) in the run
// archive under a run id of its own; the next claim gets the next one.
func TestEngineRevive(t *testing.T) {
	db := newLeaseDB(t, 4)
	ctx := db.ctx
	for _, tbl := range leaseTables {
		t.Run(tbl.name, func(t *testing.T) {
			table, err := lease.ParseTable(tbl.name)
			if err != nil {
				t.Fatal(err)
			}
			e := db.on(t, tbl)
			ids := e.enqueue(enqueueSpec{n: 3, queue: "revive"})
			eng := lease.New(e.pool, table)
			c, err := eng.Claim(ctx, lease.ClaimParams{Queue: "revive", Max: 2, Lease: time.Minute, WorkerID: "w"})
			if err != nil || len(c.Items) != 2 {
				t.Fatalf("claim: %d items, %v; want 2", len(c.Items), err)
			}
			failed, done := c.Items[0], c.Items[1]
			if _, err := eng.Complete(ctx, []lease.Completion{
				{ID: failed.ID, Token: c.Token, Outcome: lease.Failed, Error: "boom"},
				{ID: done.ID, Token: c.Token, Outcome: lease.Done},
			}); err != nil {
				t.Fatal(err)
			}
			if _, err := eng.Revive(ctx, " ", "why", failed.ID); err == nil {
				t.Fatal("revive with an empty actor: no error")
			}
			got, err := eng.Revive(ctx, "op:alice", "fixed the endpoint", ids...)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, []int64{failed.ID}) {
				t.Fatalf("revived %v; want only the failed item %d", got, failed.ID)
			}
			if r := e.get(failed.ID); r.Status != lease.StatusReady || r.Attempts != 0 || r.LeaseVersion != failed.LeaseVersion+1 {
				t.Fatalf("revived row %+v; want ready, 0 attempts, lease version %d", r, failed.LeaseVersion+1)
			}
			if r := e.get(done.ID); r.Status != lease.StatusDone {
				t.Fatalf("done row %+v changed by revive", r)
			}
			runs := e.runs(failed.ID)
			if len(runs) != 2 || runs[1].Outcome != "revived" || runs[1].WorkerID != "op:alice" ||
				deref(runs[1].Error) != "fixed the endpoint" || runs[1].RunID != runID(table, failed.ID, failed.LeaseVersion+1) {
				t.Fatalf("runs %+v; want the failed attempt then a revived audit row by op:alice", runs)
			}
			again, err := eng.Claim(ctx, lease.ClaimParams{Queue: "revive", Max: 5, Lease: time.Minute, WorkerID: "w"})
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range again.Items {
				if it.ID == failed.ID && (it.Attempt != 1 || it.LeaseVersion != failed.LeaseVersion+2) {
					t.Fatalf("reclaimed revived item %+v; want attempt 1, lease version %d", it, failed.LeaseVersion+2)
				}
			}
		})
	}
}
