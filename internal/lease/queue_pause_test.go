package lease_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/workq/workq/internal/lease"
)

// A paused (table, queue) yields nothing to any claim, on every table; an
// item already in flight finishes; other queues go on; resuming restores
// claims and keeps the queue's limit W. Pausing twice or resuming a running
// queue changes nothing; bad requests write nothing.
func TestQueuePauseResume(t *testing.T) {
	db := newLeaseDB(t, 4)
	ctx := db.ctx
	for _, tbl := range leaseTables {
		t.Run(tbl.name, func(t *testing.T) {
			table, err := lease.ParseTable(tbl.name)
			if err != nil {
				t.Fatal(err)
			}
			e := db.on(t, tbl)
			e.enqueue(enqueueSpec{n: 3, queue: "paused"})
			e.enqueue(enqueueSpec{n: 1, queue: "other"})
			if err := lease.SetLimit(ctx, e.pool, table, "paused", 5); err != nil {
				t.Fatal(err)
			}
			eng := lease.New(e.pool, table)
			claim := func(queue string) lease.Claim {
				c, err := eng.Claim(ctx, lease.ClaimParams{Queue: queue, Max: 1, Lease: time.Minute, WorkerID: "w"})
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			inFlight := claim("paused")
			if len(inFlight.Items) != 1 {
				t.Fatalf("claim before the pause: %d items, want 1", len(inFlight.Items))
			}
			if changed, err := lease.Pause(ctx, e.pool, table, "paused", "op:ada", "deploy"); err != nil || !changed {
				t.Fatalf("pause: %v, %v", changed, err)
			}
			if changed, err := lease.Pause(ctx, e.pool, table, "paused", "op:bob", "again"); err != nil || changed {
				t.Fatalf("second pause: %v, %v; want no change", changed, err)
			}
			if c := claim("paused"); len(c.Items) != 0 {
				t.Fatalf("claimed %d items of a paused queue", len(c.Items))
			}
			if c := claim("other"); len(c.Items) != 1 {
				t.Fatalf("another queue of the table: %d items, want 1", len(c.Items))
			}
			if err := eng.Ack(ctx, inFlight.Token, inFlight.Items[0].ID); err != nil {
				t.Fatalf("completing an item in flight when its queue was paused: %v", err)
			}
			paused, err := lease.Paused(ctx, e.pool)
			if err != nil {
				t.Fatal(err)
			}
			want := lease.PausedQueue{Table: table, Queue: "paused", PausedBy: "op:ada", Reason: "deploy"}
			if !slices.ContainsFunc(paused, func(p lease.PausedQueue) bool {
				return p.Table == want.Table && p.Queue == want.Queue && p.PausedBy == want.PausedBy && p.Reason == want.Reason
			}) {
				t.Fatalf("paused queues %+v lack %+v (the first pause)", paused, want)
			}
			if changed, err := lease.Resume(ctx, e.pool, table, "paused"); err != nil || !changed {
				t.Fatalf("resume: %v, %v", changed, err)
			}
			if changed, err := lease.Resume(ctx, e.pool, table, "paused"); err != nil || changed {
				t.Fatalf("second resume: %v, %v; want no change", changed, err)
			}
			if c := claim("paused"); len(c.Items) != 1 {
				t.Fatalf("claim after resume: %d items, want 1", len(c.Items))
			}
			var w int
			e.scalar(&w, `select max_in_progress from workq.queue_limits where work_table = $1 and queue = 'paused'`, tbl.name)
			if w != 5 {
				t.Fatalf("limit after pause and resume: %d, want 5", w)
			}
		})
	}
	for _, bad := range []struct {
		table, queue, by, reason, want string
	}{
		{"nope", "q", "op", "", "unknown work table"},
		{"job_runs", "bad queue", "op", "", "not a valid name"},
		{"job_runs", "q", " ", "", "who pauses"},
		{"job_runs", "q", "op", strings.Repeat("r", 1025), "reason must be at most 1024 bytes"},
		{"job_runs", "q", "op", "bad\x00", "without NUL"},
	} {
		if _, err := lease.Pause(ctx, db.pool, lease.Table(bad.table), bad.queue, bad.by, bad.reason); !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Pause(%q, %q, %q): %v; want an error containing %q", bad.table, bad.queue, bad.by, err, bad.want)
		}
	}
	var n int
	db.scalar(&n, `select count(*) from workq.queue_pauses`)
	if n != 0 {
		t.Fatalf("%d pauses left after every queue was resumed and bad pauses refused", n)
	}
}
