package lease_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/workq/workq/internal/lease"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/db/gen"
)

func strp(s string) *string { return &s }

func TestLeaseEnqueueJobRunsDedupKey(t *testing.T) {
	e := newLeaseEnv(t, jobRunsTable, 4)
	enq := func(key string) gen.JobRunsEnqueueRow {
		t.Helper()
		r, err := e.q.JobRunsEnqueue(e.ctx, gen.JobRunsEnqueueParams{
			Queue: "default", Kind: "k", Payload: json.RawMessage(`{"n":1}`), MaxAttempts: 3, DedupKey: strp(key),
		})
		if err != nil {
			t.Fatalf("enqueue with dedup key %q: %v", key, err)
		}
		return r
	}
	liveWithKey := func(key string) int {
		t.Helper()
		return e.count("dedup_key = $1 and status < $2", key, lease.StatusDone) // not finished
	}

	first := enq("order-1")
	if !first.Inserted {
		t.Fatalf("first enqueue of a key: inserted = false, want true")
	}
	again := enq("order-1")
	if again.Inserted || again.ID != first.ID {
		t.Fatalf("second enqueue of a live key: %+v, want id %d and inserted = false", again, first.ID)
	}
	if n := e.count("dedup_key = 'order-1'"); n != 1 {
		t.Fatalf("%d rows with the key, want 1", n)
	}

	// In progress is still live.
	c := e.claimOne(claimParams{queue: "default", workerID: "w", leaseMs: 30_000})
	if c.ID != first.ID {
		t.Fatalf("claimed %d, want %d", c.ID, first.ID)
	}
	if r := enq("order-1"); r.Inserted || r.ID != first.ID {
		t.Fatalf("enqueue while the holder is in progress: %+v, want id %d and inserted = false", r, first.ID)
	}

	// Once the holder is done the key is free again.
	e.complete(attemptEnd{ID: c.ID, Token: c.Token, Outcome: "done"})
	next := enq("order-1")
	if !next.Inserted || next.ID == first.ID {
		t.Fatalf("enqueue after the holder finished: %+v, want a new row (not %d) with inserted = true", next, first.ID)
	}
	if n := e.count("dedup_key = 'order-1'"); n != 2 {
		t.Fatalf("%d rows with the key, want 2 (one done, one ready)", n)
	}
	if n := liveWithKey("order-1"); n != 1 {
		t.Fatalf("%d live rows with the key, want 1", n)
	}

	// A failed holder frees the key too.
	c = e.claimOne(claimParams{queue: "default", workerID: "w", leaseMs: 30_000})
	e.complete(attemptEnd{ID: c.ID, Token: c.Token, Outcome: "failed", Error: "bad"})
	if r := enq("order-1"); !r.Inserted {
		t.Fatalf("enqueue after the holder failed: inserted = false, want a new row")
	}

	// Without a key nothing is deduplicated.
	for i := 0; i < 2; i++ {
		r, err := e.q.JobRunsEnqueue(e.ctx, gen.JobRunsEnqueueParams{Queue: "default", Kind: "k", Payload: json.RawMessage(`{}`), MaxAttempts: 3})
		if err != nil || !r.Inserted {
			t.Fatalf("enqueue without a key: %+v, %v; want inserted", r, err)
		}
	}

	// EnqueueMany skips keys held by a live run, and repeats within the batch.
	enq("held")
	n := 6
	rows, err := e.q.JobRunsEnqueueMany(e.ctx, gen.JobRunsEnqueueManyParams{
		Queues:      fill(n, "default"),
		Kinds:       fill(n, "k"),
		Payloads:    fill(n, `{}`),
		Priorities:  fill(n, int16(0)),
		DelaysMs:    fill(n, int64(0)),
		MaxAttempts: fill(n, int32(3)),
		DedupKeys:   []string{"new-1", "held", "", "new-2", "new-1", ""},
	})
	if err != nil {
		t.Fatalf("enqueue many: %v", err)
	}
	var keys []string
	for _, r := range rows {
		keys = append(keys, deref(r.DedupKey))
	}
	sort.Strings(keys)
	want := []string{"", "", "new-1", "new-2"}
	if len(keys) != len(want) {
		t.Fatalf("enqueue many inserted keys %q, want %q (the live key and the repeat skipped)", keys, want)
	}
	for i := range want {
		if keys[i] != want[i] {
			t.Fatalf("enqueue many inserted keys %q, want %q", keys, want)
		}
	}
	if n := liveWithKey("held"); n != 1 {
		t.Fatalf("%d live rows hold key %q, want 1", n, "held")
	}
	if n := liveWithKey("new-1"); n != 1 {
		t.Fatalf("%d live rows hold key %q, want 1", n, "new-1")
	}
	live, err := e.q.JobRunsLiveByDedupKeys(e.ctx, []string{"held", "new-1", "new-2", "absent"})
	if err != nil || len(live) != 3 {
		t.Fatalf("live runs by key: %v, %v; want 3", live, err)
	}
}

// Producers racing to enqueue one dedup key create exactly one row. A loser
// whose statement snapshot predates the winner's commit gets no row back
// (pgx.ErrNoRows: the insert and the fallback read share that snapshot), and
// a retry, as jobq.Client.Enqueue does, returns the winner's id.
func TestLeaseEnqueueJobRunsDedupKeyRace(t *testing.T) {
	const racers, keys = 8, 40
	e := newLeaseEnv(t, jobRunsTable, racers+2)
	noRows := 0
	for k := 0; k < keys; k++ {
		key := fmt.Sprintf("race-%d", k)
		arg := gen.JobRunsEnqueueParams{Queue: "q", Kind: "k", Payload: json.RawMessage(`{}`), MaxAttempts: 3, DedupKey: &key}
		res := make([]gen.JobRunsEnqueueRow, racers)
		errs := make([]error, racers)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := 0; i < racers; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				<-start
				res[i], errs[i] = e.q.JobRunsEnqueue(e.ctx, arg)
			}(i)
		}
		close(start)
		wg.Wait()

		var winner int64
		inserted := 0
		for i := range res {
			if errs[i] == nil && res[i].Inserted {
				inserted++
				winner = res[i].ID
			}
		}
		if inserted != 1 {
			t.Fatalf("key %s: %d racers inserted, want exactly 1 (results %+v, errors %v)", key, inserted, res, errs)
		}
		for i := range res {
			switch {
			case errors.Is(errs[i], pgx.ErrNoRows):
				noRows++
				r, err := e.q.JobRunsEnqueue(e.ctx, arg)
				if err != nil || r.Inserted || r.ID != winner {
					t.Fatalf("key %s: retry after no row: %+v, %v; want the winner %d, not inserted", key, r, err, winner)
				}
			case errs[i] != nil:
				t.Fatalf("key %s racer %d: %v", key, i, errs[i])
			case res[i].ID != winner:
				t.Fatalf("key %s racer %d got id %d, want the winner %d", key, i, res[i].ID, winner)
			}
		}
		if n := e.count("dedup_key = $1", key); n != 1 {
			t.Fatalf("key %s: %d rows, want 1", key, n)
		}
	}
	t.Logf("%d of %d racing enqueues got no row and needed the retry", noRows, racers*keys)
}

// InboxReceive stores each (source, message_id) once and answers a repeat
// from the stored row without writing it; package inbox tests the client's
// semantics on top (duplicates, conflicts, concurrency, batches).
func TestLeaseEnqueueInboxReceive(t *testing.T) {
	e := newLeaseEnv(t, inboxTable, 4)
	rec := func(msgIDs []string, payloads []string) []gen.InboxReceiveRow {
		t.Helper()
		n := len(msgIDs)
		rows, err := e.q.InboxReceive(e.ctx, gen.InboxReceiveParams{
			Queues: fill(n, "default"), Sources: fill(n, "billing"), MessageIds: msgIDs, Topics: fill(n, ""),
			Payloads: payloads, Priorities: fill(n, int16(0)), MaxAttempts: fill(n, int32(3)),
		})
		if err != nil || len(rows) != n {
			t.Fatalf("receive %v: %v, %v", msgIDs, rows, err)
		}
		return rows
	}
	first := rec([]string{"m-1"}, []string{`{"amount": 10, "currency": "EUR"}`})[0]
	if !first.Inserted || !first.SamePayload || lease.Status(first.Status) != lease.StatusReady {
		t.Fatalf("first receive: %+v, want inserted, same payload, ready", first)
	}
	var xmin string
	e.scalar(&xmin, "select xmin::text from workq.inbox where id = $1", first.ID)
	// The same JSON value written differently, then another value: neither
	// is inserted, and neither writes the stored row (its xmin stays).
	got := rec([]string{"m-1", "m-1"}, []string{`{"currency":"EUR","amount":10}`, `{"amount": 11, "currency": "EUR"}`})
	if got[0].Inserted || got[0].ID != first.ID || !got[0].SamePayload {
		t.Fatalf("repeat with the same payload: %+v, want id %d, same payload", got[0], first.ID)
	}
	if got[1].Inserted || got[1].ID != first.ID || got[1].SamePayload {
		t.Fatalf("repeat with another payload: %+v, want id %d, same_payload = false", got[1], first.ID)
	}
	var after string
	e.scalar(&after, "select xmin::text from workq.inbox where id = $1", first.ID)
	if after != xmin {
		t.Fatalf("a repeat wrote the stored row (xmin %s -> %s)", xmin, after)
	}
	if n := e.count("source = 'billing' and message_id = 'm-1'"); n != 1 {
		t.Fatalf("%d rows for one message, want 1", n)
	}
}

func TestLeaseEnqueueTimersCancel(t *testing.T) {
	e := newLeaseEnv(t, timersTable, 4)
	ids := e.enqueue(enqueueSpec{queue: "default", n: 3})
	later := e.enqueue(enqueueSpec{queue: "default", n: 1, delayMs: int64(time.Hour / time.Millisecond)})[0]
	// ids[0] in progress, ids[1] done, ids[2] ready (due), later ready (not due).
	c := e.claim(claimParams{queue: "default", workerID: "w", leaseMs: 30_000, maxRows: 2})
	if len(c) != 2 {
		t.Fatalf("claimed %d timers, want 2", len(c))
	}
	byID := map[int64]claimedRow{c[0].ID: c[0], c[1].ID: c[1]}
	done := byID[ids[1]]
	e.complete(attemptEnd{ID: done.ID, Token: done.Token, Outcome: "done"})

	got, err := e.q.TimersCancel(e.ctx, []int64{ids[0], ids[1], ids[2], later, 999_999})
	if err != nil {
		t.Fatalf("cancel: %v", err)
	}
	got = sortedIDs(got)
	want := sortedIDs([]int64{ids[2], later})
	if !equalIDs(got, want) {
		t.Fatalf("cancel returned %v, want only the ready timers %v", got, want)
	}
	for _, id := range want {
		r := e.get(id)
		if r.Status != lease.StatusCancelled || deref(r.LastError) != "cancelled" || r.FinishedAt == nil {
			t.Errorf("cancelled timer %d: status %d last_error %q, want cancelled, %q, finished", id, r.Status, deref(r.LastError), "cancelled")
		}
	}
	if r := e.get(ids[0]); r.Status != lease.StatusInProgress || r.LastError != nil {
		t.Errorf("in-progress timer after cancel: status %d last_error %v, want untouched", r.Status, r.LastError)
	}
	if r := e.get(ids[1]); r.Status != lease.StatusDone {
		t.Errorf("done timer after cancel: status %d, want done", r.Status)
	}
	// The in-progress timer's owner can still finish it.
	ip := byID[ids[0]]
	if res := e.complete(attemptEnd{ID: ip.ID, Token: ip.Token, Outcome: "done"}); len(res) != 1 {
		t.Errorf("completing the in-progress timer after a cancel applied to %v, want it", res)
	}
}

// Rows that break a check constraint are rejected with SQLSTATE 23514, and a
// batch with one bad row inserts nothing.
func TestLeaseEnqueueRejectsInvalidQueue(t *testing.T) {
	db := newLeaseDB(t, 2)
	for _, tbl := range leaseTables {
		t.Run(tbl.name, func(t *testing.T) {
			e := db.on(t, tbl)
			for _, queue := range []string{"bad queue!", "", "ünïcode"} {
				_, err := tbl.enqueue(e.ctx, e.q, enqueueSpec{queue: queue, n: 1})
				if err == nil {
					t.Fatalf("enqueue into queue %q succeeded, want a check violation", queue)
				}
				if code := sqlState(err); code != "23514" {
					t.Fatalf("enqueue into queue %q: %v (SQLSTATE %q), want check_violation 23514", queue, err, code)
				}
			}
			if n := e.count("true"); n != 0 {
				t.Fatalf("%d rows inserted by rejected enqueues, want 0", n)
			}
			if ids := e.enqueue(enqueueSpec{queue: "good-queue_1.a:b", n: 2}); len(ids) != 2 {
				t.Fatalf("valid queue name rejected")
			}
		})
	}

	t.Run("job_runs batch is atomic", func(t *testing.T) {
		e := db.on(t, jobRunsTable)
		_, err := e.q.JobRunsEnqueueMany(e.ctx, gen.JobRunsEnqueueManyParams{
			Queues:      []string{"ok", "bad queue!"},
			Kinds:       fill(2, "k"),
			Payloads:    fill(2, `{}`),
			Priorities:  fill(2, int16(0)),
			DelaysMs:    fill(2, int64(0)),
			MaxAttempts: fill(2, int32(3)),
			DedupKeys:   fill(2, ""),
		})
		if sqlState(err) != "23514" {
			t.Fatalf("batch with a bad queue name: %v, want check_violation 23514", err)
		}
		if n := e.count("queue = 'ok'"); n != 0 {
			t.Fatalf("%d rows inserted by a rejected batch, want 0", n)
		}
	})

	t.Run("job_runs other checks", func(t *testing.T) {
		e := db.on(t, jobRunsTable)
		cases := []struct {
			name string
			p    gen.JobRunsEnqueueParams
		}{
			{"bad kind", gen.JobRunsEnqueueParams{Queue: "q", Kind: "no spaces", Payload: json.RawMessage(`{}`), MaxAttempts: 3}},
			{"max_attempts 0", gen.JobRunsEnqueueParams{Queue: "q", Kind: "k", Payload: json.RawMessage(`{}`), MaxAttempts: 0}},
			{"empty dedup key", gen.JobRunsEnqueueParams{Queue: "q", Kind: "k", Payload: json.RawMessage(`{}`), MaxAttempts: 3, DedupKey: strp("")}},
		}
		for _, c := range cases {
			if _, err := e.q.JobRunsEnqueue(e.ctx, c.p); sqlState(err) != "23514" {
				t.Errorf("%s: %v, want check_violation 23514", c.name, err)
			}
		}
		if n := e.count("queue = 'q'"); n != 0 {
			t.Fatalf("%d rows inserted by rejected enqueues, want 0", n)
		}
	})
}
