package lease_test

import (
	"encoding/json"
	"fmt"
	"github.com/workq/workq/internal/lease"
	"sync"
	"testing"
	"time"

	"github.com/workq/workq/internal/db/gen"
)

// Many claimers racing over one queue: every row is leased exactly once.
func TestLeaseConcurrentClaimEachRowOnce(t *testing.T) {
	const (
		rows     = 3000
		claimers = 8
		batch    = 50
	)
	db := newLeaseDB(t, claimers+2)
	for _, tbl := range leaseTables {
		t.Run(tbl.name, func(t *testing.T) {
			e := db.on(t, tbl)
			want := e.enqueue(enqueueSpec{queue: "default", n: rows})

			got := make([][]int64, claimers)
			errs := make([]error, claimers)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for w := 0; w < claimers; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					<-start
					p := claimParams{queue: "default", workerID: fmt.Sprintf("w%d", w), leaseMs: 60_000, maxRows: batch}
					for {
						rs, err := tbl.claim(e.ctx, e.q, p)
						if err != nil {
							errs[w] = err
							return
						}
						if len(rs) == 0 {
							return
						}
						if len(rs) > batch {
							errs[w] = fmt.Errorf("claim returned %d rows, asked for at most %d", len(rs), batch)
							return
						}
						token := rs[0].Token
						for _, r := range rs {
							if r.Token != token {
								errs[w] = fmt.Errorf("one claim returned two owner tokens %s and %s", token, r.Token)
								return
							}
						}
						got[w] = append(got[w], claimedIDs(rs)...)
					}
				}(w)
			}
			close(start)
			wg.Wait()
			for w, err := range errs {
				if err != nil {
					t.Fatalf("claimer %d: %v", w, err)
				}
			}

			seen := make(map[int64]int, rows)
			busy := 0
			for w, ids := range got {
				if len(ids) > 0 {
					busy++
				}
				for _, id := range ids {
					if prev, dup := seen[id]; dup {
						t.Errorf("row %d claimed twice: by claimer %d and claimer %d", id, prev, w)
					}
					seen[id] = w
				}
			}
			for _, id := range want {
				if _, ok := seen[id]; !ok {
					t.Errorf("row %d was never claimed", id)
				}
			}
			if len(seen) != rows {
				t.Errorf("claimed %d distinct rows, want %d", len(seen), rows)
			}
			if n := e.count("status = $1 and attempts = 1 and lease_version = 1", lease.StatusInProgress); n != rows {
				t.Errorf("%d rows in progress on their first attempt and lease, want %d", n, rows)
			}
			if busy < 2 {
				t.Errorf("only %d of %d claimers got rows: the claim did not run concurrently", busy, claimers)
			}
		})
	}
}

// claimSequence claims one row at a time until the queue gives no more and
// returns the ids in claim order.
func claimSequence(t *testing.T, e *leaseEnv, queue string) []int64 {
	t.Helper()
	var out []int64
	for i := 0; ; i++ {
		rs := e.claim(claimParams{queue: queue, workerID: "order", leaseMs: 60_000, maxRows: 1})
		if len(rs) == 0 {
			return out
		}
		out = append(out, rs[0].ID)
		if i > 1000 {
			t.Fatalf("claim never ran dry")
		}
	}
}

func equalIDs(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Each table claims in its documented order, and never claims a row before
// its eligibility time.
func TestLeaseClaimOrder(t *testing.T) {
	db := newLeaseDB(t, 4)
	t.Run("job_runs priority desc then run_at then id", func(t *testing.T) {
		e := db.on(t, jobRunsTable)
		base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
		enq := func(name string, prio int16, runAt *time.Time, delayMs int64) int64 {
			t.Helper()
			r, err := e.q.JobRunsEnqueue(e.ctx, gen.JobRunsEnqueueParams{
				Queue: "order", Kind: name, Payload: json.RawMessage(`{}`), Priority: prio,
				RunAt: runAt, DelayMs: delayMs, MaxAttempts: 3,
			})
			if err != nil {
				t.Fatalf("enqueue %s: %v", name, err)
			}
			return r.ID
		}
		at := func(d time.Duration) *time.Time { v := base.Add(d); return &v }
		// ids ascend in this order; the claim order is different.
		lowOld := enq("low-old", 0, at(0), 0)
		highLate := enq("high-late", 5, at(3*time.Minute), 0)
		midEarly := enq("mid-early", 1, at(time.Minute), 0)
		highEarly := enq("high-early", 5, at(time.Minute), 0)
		highEarlyTwin := enq("high-early-twin", 5, at(time.Minute), 0) // same run_at: id breaks the tie
		lowNew := enq("low-new", 0, at(2*time.Minute), 0)
		future := enq("future-high", 9, nil, 60_000)        // delayed a minute: never due in this test
		futureAt := enq("future-at", 9, at(2*time.Hour), 0) // run_at an hour from now

		got := claimSequence(t, e, "order")
		want := []int64{highEarly, highEarlyTwin, highLate, midEarly, lowOld, lowNew}
		if !equalIDs(got, want) {
			t.Fatalf("claim order %v, want %v (priority desc, run_at, id)", got, want)
		}
		for _, id := range []int64{future, futureAt} {
			if r := e.get(id); r.Status != lease.StatusReady || r.Attempts != 0 {
				t.Errorf("row %d with run_at in the future: status %d attempts %d, want ready and never attempted", id, r.Status, r.Attempts)
			}
		}
	})

	t.Run("outbox priority desc then creation order", func(t *testing.T) {
		e := db.on(t, outboxTable)
		enq := func(prio int16, delayMs int64) int64 {
			t.Helper()
			r, err := e.q.OutboxEnqueue(e.ctx, gen.OutboxEnqueueParams{
				Queue: "order", Topic: "t", Payload: json.RawMessage(`{}`), Headers: json.RawMessage(`{}`),
				Priority: prio, DelayMs: delayMs, MaxAttempts: 3,
			})
			if err != nil {
				t.Fatalf("enqueue: %v", err)
			}
			return r.ID
		}
		first := enq(0, 0)
		// Written later but made eligible earlier: creation order still wins.
		second := enq(0, -60_000)
		urgent := enq(3, 0)
		third := enq(0, -120_000)
		urgent2 := enq(3, -1_000)
		future := enq(9, 60_000)

		got := claimSequence(t, e, "order")
		want := []int64{urgent, urgent2, first, second, third}
		if !equalIDs(got, want) {
			t.Fatalf("claim order %v, want %v (priority desc, id)", got, want)
		}
		if r := e.get(future); r.Status != lease.StatusReady || r.Attempts != 0 {
			t.Errorf("delayed message: status %d attempts %d, want ready and never attempted", r.Status, r.Attempts)
		}
	})

	t.Run("timers by due time", func(t *testing.T) {
		e := db.on(t, timersTable)
		base := time.Now().Add(-time.Hour)
		enq := func(due time.Time, prio int16) int64 {
			t.Helper()
			r, err := e.q.TimersEnqueue(e.ctx, gen.TimersEnqueueParams{
				Queue: "order", Topic: "t", Payload: json.RawMessage(`{}`), Priority: prio, MaxAttempts: 3, DueTime: &due,
			})
			if err != nil {
				t.Fatalf("enqueue: %v", err)
			}
			if !r.DueTime.Equal(due.Truncate(time.Microsecond)) {
				t.Fatalf("enqueue returned due time %v, want %v", r.DueTime, due)
			}
			return r.ID
		}
		late := enq(base.Add(30*time.Minute), 9) // priority does not reorder timers
		early := enq(base, 0)
		mid := enq(base.Add(10*time.Minute), 0)
		midTwin := enq(base.Add(10*time.Minute), 0)
		notYet := enq(time.Now().Add(time.Hour), 9)

		got := claimSequence(t, e, "order")
		want := []int64{early, mid, midTwin, late}
		if !equalIDs(got, want) {
			t.Fatalf("claim order %v, want %v (due time, id)", got, want)
		}
		if r := e.get(notYet); r.Status != lease.StatusReady || r.Attempts != 0 {
			t.Errorf("timer due in an hour: status %d attempts %d, want ready and never attempted", r.Status, r.Attempts)
		}
	})

	t.Run("inbox by arrival", func(t *testing.T) {
		e := db.on(t, inboxTable)
		rec := func(msgID string, prio int16, delayMs int64) int64 {
			t.Helper()
			rows, err := e.q.InboxReceive(e.ctx, gen.InboxReceiveParams{
				Queues: []string{"order"}, Sources: []string{"src"}, MessageIds: []string{msgID}, Topics: []string{""},
				Payloads: []string{`{}`}, Priorities: []int16{prio}, MaxAttempts: []int32{3},
			})
			if err != nil || len(rows) != 1 {
				t.Fatalf("record %s: %v, %v", msgID, rows, err)
			}
			// InboxReceive has no delay (a message is due on arrival): hold
			// a new row back by hand.
			if delayMs > 0 && rows[0].Inserted {
				if _, err := e.pool.Exec(e.ctx, "update workq.inbox set run_at = now() + $1 * interval '1 millisecond' where id = $2", delayMs, rows[0].ID); err != nil {
					t.Fatal(err)
				}
			}
			return rows[0].ID
		}
		var want []int64
		for i := 0; i < 5; i++ {
			// Priority is ignored by the inbox: arrival order only.
			want = append(want, rec(fmt.Sprintf("m%d", i), int16(i), 0))
		}
		held := rec("held", 9, 60_000)
		// A repeat of an early message does not move it.
		rec("m0", 0, 0)

		got := claimSequence(t, e, "order")
		if !equalIDs(got, want) {
			t.Fatalf("claim order %v, want arrival order %v", got, want)
		}
		if r := e.get(held); r.Status != lease.StatusReady || r.Attempts != 0 {
			t.Errorf("message delayed a minute: status %d attempts %d, want ready and never attempted", r.Status, r.Attempts)
		}
	})
}
