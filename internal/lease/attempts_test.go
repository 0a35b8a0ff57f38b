package lease_test

import (
	"fmt"
	"github.com/workq/workq/internal/lease"
	"strings"
	"testing"
	"time"
)

// runOutcomes lists the archived (outcome, attempt) pairs of a row, oldest first.
func runOutcomes(t *testing.T, e *leaseEnv, id int64) []string {
	t.Helper()
	var out []string
	for _, r := range e.runs(id) {
		out = append(out, fmt.Sprintf("%s@%d", r.Outcome, r.Attempt))
	}
	return out
}

func TestLeaseAttempts(t *testing.T) {
	db := newLeaseDB(t, 4)
	for _, tbl := range leaseTables {
		t.Run(tbl.name, func(t *testing.T) {
			t.Run("retry exhausts max_attempts", func(t *testing.T) {
				e := db.on(t, tbl)
				id := e.enqueue(enqueueSpec{queue: "retry", n: 1, maxAttempts: 3})[0]
				for attempt := int32(1); attempt <= 3; attempt++ {
					c := e.claimOne(claimParams{queue: "retry", workerID: "w", leaseMs: 30_000})
					if c.ID != id || c.Attempts != attempt || c.MaxAttempts != 3 {
						t.Fatalf("claim %d: row %d attempt %d of %d, want row %d attempt %d of 3", attempt, c.ID, c.Attempts, c.MaxAttempts, id, attempt)
					}
					wantStatus := lease.StatusReady
					if attempt == 3 {
						wantStatus = lease.StatusFailed
					}
					got := e.complete(attemptEnd{ID: id, Token: c.Token, Outcome: "retry", Error: fmt.Sprintf("boom %d", attempt)})
					if len(got) != 1 || got[0] != (idStatus{id, wantStatus}) {
						t.Fatalf("retry of attempt %d: %v, want [{%d %d}]", attempt, got, id, wantStatus)
					}
				}
				row := e.get(id)
				if row.Status != lease.StatusFailed || row.Attempts != 3 || deref(row.LastError) != "boom 3" || row.FinishedAt == nil || row.Token != nil {
					t.Fatalf("after 3 retries: status %d attempts %d last_error %q finished_at %v; want failed, 3, %q, set",
						row.Status, row.Attempts, deref(row.LastError), row.FinishedAt, "boom 3")
				}
				if rs := e.claim(claimParams{queue: "retry", workerID: "w", leaseMs: 30_000, maxRows: 10}); len(rs) != 0 {
					t.Fatalf("a failed row was claimed again: %v", claimedIDs(rs))
				}
				if got, want := runOutcomes(t, e, id), []string{"retry@1", "retry@2", "failed@3"}; strings.Join(got, " ") != strings.Join(want, " ") {
					t.Fatalf("runs %v, want %v", got, want)
				}
			})

			t.Run("lease expiry exhausts max_attempts", func(t *testing.T) {
				e := db.on(t, tbl)
				id := e.enqueue(enqueueSpec{queue: "expiry", n: 1, maxAttempts: 3})[0]
				for attempt := int32(1); attempt <= 3; attempt++ {
					c := e.claimOne(claimParams{queue: "expiry", workerID: "sleepy", leaseMs: 20})
					if c.Attempts != attempt {
						t.Fatalf("claim %d: attempt %d, want %d", attempt, c.Attempts, attempt)
					}
					e.waitExpired(c)
					wantStatus := lease.StatusReady
					if attempt == 3 {
						wantStatus = lease.StatusFailed
					}
					if got := e.reap(10); len(got) != 1 || got[0] != (idStatus{id, wantStatus}) {
						t.Fatalf("reap after attempt %d: %v, want [{%d %d}]", attempt, got, id, wantStatus)
					}
				}
				row := e.get(id)
				wantErr := "lease expired on attempt 3 of 3 (worker sleepy); no attempts left"
				if row.Status != lease.StatusFailed || row.Attempts != 3 || deref(row.LastError) != wantErr || row.FinishedAt == nil {
					t.Fatalf("after 3 expiries: status %d attempts %d last_error %q finished_at %v; want failed, 3, %q, set",
						row.Status, row.Attempts, deref(row.LastError), row.FinishedAt, wantErr)
				}
				if got, want := runOutcomes(t, e, id), []string{"expired@1", "expired@2", "expired@3"}; strings.Join(got, " ") != strings.Join(want, " ") {
					t.Fatalf("runs %v, want %v", got, want)
				}
			})

			t.Run("retry delay backs off", func(t *testing.T) {
				e := db.on(t, tbl)
				id := e.enqueue(enqueueSpec{queue: "backoff", n: 1, maxAttempts: 3})[0]
				c := e.claimOne(claimParams{queue: "backoff", workerID: "w", leaseMs: 30_000})
				before := e.dbNow()
				if got := e.complete(attemptEnd{ID: id, Token: c.Token, Outcome: "retry", Error: "later", DelayMs: 2000}); len(got) != 1 || got[0].Status != lease.StatusReady {
					t.Fatalf("retry with a delay: %v, want [{%d %d}]", got, id, lease.StatusReady)
				}
				row := e.get(id)
				if min := before.Add(1900 * time.Millisecond); row.RunAt.Before(min) {
					t.Fatalf("run_at %v after a 2s retry delay, want at least %v (database now %v + ~2s)", row.RunAt, min, before)
				}
				if row.Attempts != 1 || deref(row.LastError) != "later" {
					t.Fatalf("after retry: attempts %d last_error %q, want 1 and %q", row.Attempts, deref(row.LastError), "later")
				}
				if rs := e.claim(claimParams{queue: "backoff", workerID: "w", leaseMs: 30_000, maxRows: 10}); len(rs) != 0 {
					t.Fatalf("claim right after a 2s retry delay returned %v, want nothing", claimedIDs(rs))
				}
			})

			t.Run("snooze and release do not use an attempt", func(t *testing.T) {
				e := db.on(t, tbl)
				id := e.enqueue(enqueueSpec{queue: "snooze", n: 1, maxAttempts: 2})[0]
				steps := []struct {
					outcome      string
					wantAttempt  int32        // attempts seen by the claim
					wantStatus   lease.Status // after the outcome
					wantAttempts int32        // attempts after the outcome
				}{
					{"snoozed", 1, lease.StatusReady, 0},
					{"released", 1, lease.StatusReady, 0},
					{"retry", 1, lease.StatusReady, 1},
					{"snoozed", 2, lease.StatusReady, 1}, // the last attempt, snoozed: not failed
					{"released", 2, lease.StatusReady, 1},
					{"retry", 2, lease.StatusFailed, 2},
				}
				for i, s := range steps {
					c := e.claimOne(claimParams{queue: "snooze", workerID: "w", leaseMs: 30_000})
					if c.Attempts != s.wantAttempt || c.LeaseVersion != int64(i+1) {
						t.Fatalf("step %d: claim on attempt %d lease version %d, want attempt %d lease version %d",
							i, c.Attempts, c.LeaseVersion, s.wantAttempt, i+1)
					}
					got := e.complete(attemptEnd{ID: id, Token: c.Token, Outcome: s.outcome, Error: "e"})
					if len(got) != 1 || got[0] != (idStatus{id, s.wantStatus}) {
						t.Fatalf("step %d (%s): %v, want [{%d %d}]", i, s.outcome, got, id, s.wantStatus)
					}
					if row := e.get(id); row.Attempts != s.wantAttempts {
						t.Fatalf("step %d (%s): attempts %d afterwards, want %d", i, s.outcome, row.Attempts, s.wantAttempts)
					}
				}
				want := []string{"snoozed@1", "released@1", "retry@1", "snoozed@2", "released@2", "failed@2"}
				if got := runOutcomes(t, e, id); strings.Join(got, " ") != strings.Join(want, " ") {
					t.Fatalf("runs %v, want %v", got, want)
				}
			})

			t.Run("snooze delay defers the row", func(t *testing.T) {
				e := db.on(t, tbl)
				id := e.enqueue(enqueueSpec{queue: "snooze-delay", n: 1})[0]
				c := e.claimOne(claimParams{queue: "snooze-delay", workerID: "w", leaseMs: 30_000})
				before := e.dbNow()
				e.complete(attemptEnd{ID: id, Token: c.Token, Outcome: "snoozed", DelayMs: 5000})
				if row := e.get(id); row.RunAt.Before(before.Add(4900*time.Millisecond)) || row.LastError != nil {
					t.Fatalf("after a 5s snooze: run_at %v last_error %v, want >= %v and no error", row.RunAt, row.LastError, before.Add(5*time.Second))
				}
				if rs := e.claim(claimParams{queue: "snooze-delay", workerID: "w", leaseMs: 30_000, maxRows: 10}); len(rs) != 0 {
					t.Fatalf("claim right after a 5s snooze returned %v, want nothing", claimedIDs(rs))
				}
			})
		})
	}
}
