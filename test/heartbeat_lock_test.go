package test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
)

// A heartbeat must never wait for a row another statement holds (a
// completion flush or a reap): waiting let a heartbeat and a completion
// flush lock the same rows in different orders and deadlock. It skips the
// locked row, reporting it as not extended, and extends the others at once.
func TestHeartbeatSkipsLockedRows(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	q := gen.New(pool)
	for range 3 {
		if _, err := q.JobRunsEnqueue(ctx, gen.JobRunsEnqueueParams{Queue: "hb", Kind: "k", Payload: json.RawMessage(`{}`), MaxAttempts: 3}); err != nil {
			t.Fatal(err)
		}
	}
	e := lease.New(pool, lease.JobRuns)
	c, err := e.Claim(ctx, lease.ClaimParams{Queue: "hb", Max: 3, Lease: 30 * time.Second, WorkerID: "w"})
	if err != nil || len(c.Items) != 3 {
		t.Fatalf("claim: %v, %d items", err, len(c.Items))
	}
	ids := []int64{c.Items[0].ID, c.Items[1].ID, c.Items[2].ID}

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "select 1 from workq.job_runs where id = $1 for update", ids[1]); err != nil {
		t.Fatal(err)
	}

	hctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	start := time.Now()
	held := []lease.Held{{ID: ids[0], Token: c.Token}, {ID: ids[1], Token: c.Token}, {ID: ids[2], Token: c.Token}}
	extended, lost, err := e.Heartbeat(hctx, held, 30*time.Second)
	if err != nil {
		t.Fatalf("heartbeat waited for the locked row or failed after %s: %v", time.Since(start), err)
	}
	slices.Sort(extended)
	if want := []int64{ids[0], ids[2]}; !slices.Equal(extended, want) {
		t.Fatalf("extended %v, want %v (the locked row skipped)", extended, want)
	}
	// Locked by someone else is not lost: that statement decides (a
	// completion ends the attempt, a reap takes an expired lease, and a
	// heartbeat that timed out client-side may still extend it).
	if len(lost) != 0 {
		t.Fatalf("reported lost %v, want none: a locked row's lease is not known to be lost", lost)
	}
}
