package lease_test

import (
	"fmt"
	"github.com/workq/workq/internal/lease"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
)

var allOutcomes = []string{"done", "retry", "failed", "snoozed", "released"}

// assertFenced checks that a stale owner token can neither heartbeat nor end
// an attempt of row id, and that its attempts left the row as it was.
func assertFenced(t *testing.T, e *leaseEnv, id int64, stale uuid.UUID) {
	t.Helper()
	before := e.get(id)
	if got := e.heartbeat(30_000, []int64{id}, stale); len(got) != 0 {
		t.Errorf("heartbeat with the stale token extended %v, want nothing", got)
	}
	for _, oc := range allOutcomes {
		if got := e.complete(attemptEnd{ID: id, Token: stale, Outcome: oc, Error: "stale " + oc}); len(got) != 0 {
			t.Errorf("complete %q with the stale token applied to %v, want nothing", oc, got)
		}
	}
	after := e.get(id)
	if after.Status != before.Status || deref(after.Token) != deref(before.Token) ||
		after.LeaseVersion != before.LeaseVersion || after.Attempts != before.Attempts ||
		!deref(after.LockedUntil).Equal(deref(before.LockedUntil)) || deref(after.LastError) != deref(before.LastError) {
		t.Errorf("stale token changed the row:\nbefore %+v\nafter  %+v", before, after)
	}
}

// A worker whose lease expired and was taken over is fenced off by its owner
// token: nothing it does reaches the row, and the runs archive tells the two
// attempts apart.
func TestLeaseStaleOwnerFencing(t *testing.T) {
	reclaims := []struct {
		name    string
		queue   string
		reclaim func(t *testing.T, e *leaseEnv, id int64)
	}{
		{"reaper", "fence-reap", func(t *testing.T, e *leaseEnv, id int64) {
			got := e.reap(100)
			if len(got) != 1 || got[0] != (idStatus{id, lease.StatusReady}) {
				t.Fatalf("reap returned %v, want [{%d %d}] (requeued)", got, id, lease.StatusReady)
			}
		}},
		{"reclaim of the queue", "fence-reclaim", func(t *testing.T, e *leaseEnv, id int64) {
			// What a producer runs before it claims: a reap of its own queue.
			// An expired lease of another queue is not its business.
			other := e.enqueue(enqueueSpec{queue: "fence-other", n: 1})[0]
			lapsed := e.claimOne(claimParams{queue: "fence-other", workerID: "w9", leaseMs: 1})
			e.waitExpired(lapsed)
			queue := "fence-reclaim"
			rows, err := e.q.LeaseReapExpired(e.ctx, &queue, 100)
			if err != nil || len(rows) != 1 || rows[0].ID != id || lease.Status(rows[0].Status) != lease.StatusReady {
				t.Fatalf("reap of queue %s: %v, %+v; want [{%d %d}] (requeued)", queue, err, rows, id, lease.StatusReady)
			}
			if r := e.get(other); r.Status != lease.StatusInProgress {
				t.Fatalf("reap of queue %s changed an expired lease of another queue: %+v", queue, r)
			}
		}},
	}
	db := newLeaseDB(t, 4)
	for _, tbl := range leaseTables {
		for _, rc := range reclaims {
			t.Run(tbl.name+"/"+rc.name, func(t *testing.T) {
				e := db.on(t, tbl)
				queue := rc.queue
				id := e.enqueue(enqueueSpec{queue: queue, n: 1})[0]

				first := e.claimOne(claimParams{queue: queue, workerID: "w1", leaseMs: 400})
				if first.ID != id || first.Attempts != 1 || first.LeaseVersion != 1 {
					t.Fatalf("first claim: %+v, want row %d on attempt 1, lease version 1", first, id)
				}
				if got := e.heartbeat(400, []int64{id}, first.Token); len(got) != 1 || got[0] != id {
					t.Fatalf("heartbeat of a live lease extended %v, want [%d]", got, id)
				}
				row := e.get(id)
				e.waitExpired(claimedRow{LockedUntil: deref(row.LockedUntil)})

				if got := e.heartbeat(30_000, []int64{id}, first.Token); len(got) != 0 {
					t.Fatalf("heartbeat of an expired lease extended %v, want nothing", got)
				}
				rc.reclaim(t, e, id)

				row = e.get(id)
				wantErr := "lease expired on attempt 1 of 4 (worker w1)"
				if row.Status != lease.StatusReady || row.Token != nil || row.LockedUntil != nil || row.Attempts != 1 ||
					deref(row.LastError) != wantErr {
					t.Fatalf("after reclaim: status %d token %v attempts %d last_error %q; want ready, no token, attempts 1, last_error %q",
						row.Status, row.Token, row.Attempts, deref(row.LastError), wantErr)
				}
				assertFenced(t, e, id, first.Token) // while the row is ready

				second := e.claimOne(claimParams{queue: queue, workerID: "w2", leaseMs: 30_000})
				if second.ID != id || second.Token == first.Token || second.LeaseVersion != 2 || second.Attempts != 2 ||
					second.RunID == first.RunID {
					t.Fatalf("second claim: %+v; want row %d with a new owner token and run id, lease version 2, attempt 2 (first: %+v)",
						second, id, first)
				}
				assertFenced(t, e, id, first.Token) // while the second worker holds it

				if got := e.heartbeat(30_000, []int64{id}, second.Token); len(got) != 1 {
					t.Fatalf("heartbeat by the current owner extended %v, want [%d]", got, id)
				}
				if got := e.complete(attemptEnd{ID: id, Token: second.Token, Outcome: "done"}); len(got) != 1 || got[0] != (idStatus{id, lease.StatusDone}) {
					t.Fatalf("complete done by the current owner: %v, want [{%d %d}]", got, id, lease.StatusDone)
				}
				if row := e.get(id); row.Status != lease.StatusDone || row.Token != nil || row.FinishedAt == nil {
					t.Fatalf("after done: %+v, want status done, no token, finished_at set", row)
				}

				runs := e.runs(id)
				if len(runs) != 2 {
					t.Fatalf("runs archive has %d rows for the item, want 2 (expired, done): %+v", len(runs), runs)
				}
				type runWant struct {
					outcome string
					attempt int32
					version int64
					token   uuid.UUID
					runID   uuid.UUID
					worker  string
				}
				// A row that moved to the done table is its last attempt, which
				// keeps no token (its run id names the claim).
				doneToken := second.Token
				if _, moves, err := lease.DoneTable(lease.Table(e.tbl.name)); err != nil {
					t.Fatal(err)
				} else if moves {
					doneToken = uuid.Nil
				}
				wants := []runWant{
					{"expired", 1, 1, first.Token, first.RunID, "w1"},
					{"done", 2, 2, doneToken, second.RunID, "w2"},
				}
				for i, w := range wants {
					r := runs[i]
					if r.Outcome != w.outcome || r.Attempt != w.attempt || r.LeaseVersion != w.version ||
						r.OwnerToken != w.token || r.RunID != w.runID || r.WorkerID != w.worker || r.Queue != queue {
						t.Errorf("run %d: %+v; want outcome %s, attempt %d, lease version %d, token %s, run id %s, worker %s",
							i, r, w.outcome, w.attempt, w.version, w.token, w.runID, w.worker)
					}
				}
				if deref(runs[0].Error) != wantErr {
					t.Errorf("expired run error %q, want %q", deref(runs[0].Error), wantErr)
				}
			})
		}
	}
}

// Two reapers and two claimers (one reclaiming expired leases itself) race
// over rows whose first lease has expired: each lost attempt is archived
// exactly once, no row is lost, and attempts count claims exactly.
func TestLeaseReapRaceFree(t *testing.T) {
	const rows = 600
	db := newLeaseDB(t, 8)
	for _, tbl := range leaseTables {
		t.Run(tbl.name, func(t *testing.T) {
			e := db.on(t, tbl)
			all := e.enqueue(enqueueSpec{queue: "default", n: rows})

			// First attempt of every row, with a lease that is over at once.
			lost := make(map[int64]claimedRow, rows)
			var firsts []claimedRow
			for len(lost) < rows {
				rs := e.claim(claimParams{queue: "default", workerID: "lost", leaseMs: 1, maxRows: 200})
				if len(rs) == 0 {
					t.Fatalf("first claims ran dry after %d of %d rows", len(lost), rows)
				}
				for _, r := range rs {
					lost[r.ID] = r
				}
				firsts = append(firsts, rs...)
			}
			e.waitExpired(firsts...)

			var (
				wg          sync.WaitGroup
				reapersLeft atomic.Int32
				reaped      [2][]idStatus
				claimed     [2][]claimedRow
				errs        [4]error
			)
			deadline := time.Now().Add(8 * time.Second)
			reapersLeft.Store(2)
			for r := 0; r < 2; r++ {
				wg.Add(1)
				go func(r int) {
					defer wg.Done()
					defer reapersLeft.Add(-1)
					for time.Now().Before(deadline) {
						got, err := reapRows(e.ctx, e.q, 16)
						if err != nil {
							errs[r] = err
							return
						}
						reaped[r] = append(reaped[r], got...)
						if len(got) > 0 {
							continue
						}
						var left int
						if err := e.pool.QueryRow(e.ctx, fmt.Sprintf(
							"select count(*) from workq.%s where status = $1 and locked_until <= now()", tbl.name), lease.StatusInProgress).Scan(&left); err != nil {
							errs[r] = err
							return
						}
						if left == 0 {
							return
						}
						time.Sleep(time.Millisecond)
					}
					errs[r] = fmt.Errorf("reaper %d: expired leases left at the deadline", r)
				}(r)
			}
			for c := 0; c < 2; c++ {
				wg.Add(1)
				go func(c int) {
					defer wg.Done()
					p := claimParams{queue: "default", workerID: fmt.Sprintf("claimer%d", c), leaseMs: 60_000, maxRows: 8,
						reclaimExpired: c == 1}
					// Stop as the reapers finish, so that some rows stay ready.
					for reapersLeft.Load() > 0 {
						got, err := tbl.claim(e.ctx, e.q, p)
						if err != nil {
							errs[2+c] = err
							return
						}
						claimed[c] = append(claimed[c], got...)
						if len(got) == 0 {
							time.Sleep(time.Millisecond)
						}
					}
				}(c)
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("goroutine %d: %v", i, err)
				}
			}

			reapedBy := make(map[int64]int)
			for r, got := range reaped {
				for _, x := range got {
					if prev, dup := reapedBy[x.ID]; dup {
						t.Errorf("row %d reaped twice (by reapers %d and %d)", x.ID, prev, r)
					}
					reapedBy[x.ID] = r
					if x.Status != lease.StatusReady {
						t.Errorf("reap returned row %d with status %d, want %d (attempts left)", x.ID, x.Status, lease.StatusReady)
					}
					if _, ok := lost[x.ID]; !ok {
						t.Errorf("reap returned row %d that was never claimed", x.ID)
					}
				}
			}
			second := make(map[int64]claimedRow)
			for _, got := range claimed {
				for _, c := range got {
					if _, dup := second[c.ID]; dup {
						t.Errorf("row %d claimed twice after its lease expired once", c.ID)
					}
					second[c.ID] = c
					if c.Attempts != 2 || c.LeaseVersion != 2 {
						t.Errorf("second claim of row %d: attempt %d lease version %d, want 2 and 2", c.ID, c.Attempts, c.LeaseVersion)
					}
				}
			}

			type state struct {
				status   lease.Status
				attempts int32
				version  int64
				token    *uuid.UUID
			}
			final := make(map[int64]state, rows)
			qrows, err := e.pool.Query(e.ctx, fmt.Sprintf("select id, status, attempts, lease_version, owner_token from workq.%s", tbl.name))
			if err != nil {
				t.Fatal(err)
			}
			for qrows.Next() {
				var id int64
				var s state
				if err := qrows.Scan(&id, &s.status, &s.attempts, &s.version, &s.token); err != nil {
					t.Fatal(err)
				}
				final[id] = s
			}
			if err := qrows.Err(); err != nil {
				t.Fatal(err)
			}
			if len(final) != rows {
				t.Fatalf("table has %d rows, want %d", len(final), rows)
			}
			ready := 0
			for _, id := range all {
				s := final[id]
				if c, ok := second[id]; ok {
					if s.status != lease.StatusInProgress || s.attempts != 2 || s.version != 2 || deref(s.token) != c.Token {
						t.Errorf("row %d claimed again: status %d attempts %d version %d token %v; want in progress, 2, 2, token %s",
							id, s.status, s.attempts, s.version, s.token, c.Token)
					}
					continue
				}
				ready++
				if s.status != lease.StatusReady || s.attempts != 1 || s.version != 1 || s.token != nil {
					t.Errorf("row %d not claimed again: status %d attempts %d version %d token %v; want ready, 1, 1, no token",
						id, s.status, s.attempts, s.version, s.token)
				}
			}

			// Exactly one archived attempt per row: the expired first one.
			type archived struct {
				n, expired int
				attempt    int32
				version    int64
				token      uuid.UUID
			}
			runs := make(map[int64]archived)
			rrows, err := e.pool.Query(e.ctx, `select item_id, count(*), count(*) filter (where outcome = 'expired'),
				max(attempt), max(lease_version), (array_agg(owner_token))[1]
				from workq.runs where work_table = $1 group by item_id`, tbl.name)
			if err != nil {
				t.Fatal(err)
			}
			for rrows.Next() {
				var id int64
				var a archived
				if err := rrows.Scan(&id, &a.n, &a.expired, &a.attempt, &a.version, &a.token); err != nil {
					t.Fatal(err)
				}
				runs[id] = a
			}
			if err := rrows.Err(); err != nil {
				t.Fatal(err)
			}
			for _, id := range all {
				a := runs[id]
				if a.n != 1 || a.expired != 1 || a.attempt != 1 || a.version != 1 || a.token != lost[id].Token {
					t.Errorf("runs of row %d: %+v; want exactly one 'expired' run of attempt 1, lease version 1, token %s",
						id, a, lost[id].Token)
				}
			}
			if len(runs) != rows {
				t.Errorf("runs archive covers %d items, want %d", len(runs), rows)
			}
			t.Logf("%d reaped by ReapExpired, %d by the reclaiming claim; %d claimed again, %d left ready",
				len(reapedBy), rows-len(reapedBy), len(second), ready)
		})
	}
}
