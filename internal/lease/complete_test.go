package lease_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
)

// A retry that has no attempt left ends the item failed: its run_at must not
// move to the backoff time it will never be claimed at (a failed item
// showing a RUN AT after it ended), while a retry with attempts left is due
// after its delay, on every table.
func TestExhaustedRetryKeepsRunAt(t *testing.T) {
	inserts := map[lease.Table]string{
		lease.JobRuns: `insert into workq.job_runs (queue, kind, payload, max_attempts) values ('q', 'k', '{}', $1) returning id`,
		lease.Outbox:  `insert into workq.outbox (queue, topic, payload, max_attempts) values ('q', 't', '{}', $1) returning id`,
		lease.Inbox: `insert into workq.inbox (queue, topic, source, message_id, payload, payload_hash, max_attempts)
			values ('q', 't', 'src', gen_random_uuid()::text, '{}', '\x00', $1) returning id`,
		lease.Timers: `insert into workq.timers (queue, topic, payload, due_time, run_at, max_attempts) values ('q', 't', '{}', now(), now(), $1) returning id`,
	}
	cases := []struct {
		name        string
		maxAttempts int32
		wantStatus  lease.Status
		wantFuture  bool // run_at an hour ahead (the retry's delay)
	}{
		{"attempts left: due after the delay", 2, lease.StatusReady, true},
		{"no attempt left: failed, run_at unchanged", 1, lease.StatusFailed, false},
	}
	for _, table := range lease.Tables {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%s", table, c.name), func(t *testing.T) {
				ctx := context.Background()
				pool := testdb.Pool(t)
				var id int64
				if err := pool.QueryRow(ctx, inserts[table], c.maxAttempts).Scan(&id); err != nil {
					t.Fatal(err)
				}
				e := lease.New(pool, table)
				it, ok, err := e.ClaimByID(ctx, id, time.Minute, "w1")
				if err != nil || !ok {
					t.Fatalf("claim: %v %v", ok, err)
				}
				a, err := e.Complete(ctx, []lease.Completion{{ID: id, Token: it.OwnerToken, Outcome: lease.Retry, Error: "boom", Delay: time.Hour}})
				if err != nil || a.Status[id] != c.wantStatus {
					t.Fatalf("complete: %+v, %v; want status %v", a, err, c.wantStatus)
				}
				var future, finished bool
				err = pool.QueryRow(ctx, fmt.Sprintf(`select run_at > now() + interval '30 minutes', finished_at is not null and run_at <= finished_at
					from workq.%s where id = $1`, table), id).Scan(&future, &finished)
				if err != nil {
					t.Fatal(err)
				}
				if future != c.wantFuture {
					t.Errorf("run_at an hour ahead: %v, want %v", future, c.wantFuture)
				}
				if c.wantStatus == lease.StatusFailed && !finished {
					t.Errorf("a failed item's run_at is after its finished_at (or finished_at is unset)")
				}
			})
		}
	}
}

// A job run that ends done leaves job_runs for job_runs_done in the
// completion's own statement, as the completion leaves it (done, lease
// cleared, finished, its output), and its attempt is archived; the rows a
// promise needs in place stay: a job unique over the completed state, a
// schedule's slot, a failed run, and one whose cancel was requested before
// its handler answered done. The other tables keep every done row.
func TestCompleteMovesDoneJobRuns(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	var sched int64
	if err := pool.QueryRow(ctx, `insert into workq.schedules (name, cron, queue, kind, payload)
		values ('every-minute', '* * * * *', 'q', 'k', '{}') returning id`).Scan(&sched); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		insert  string
		outcome lease.Outcome
		cancel  bool // cancel requested while it runs
		moves   bool
		status  lease.Status
	}{
		{"plain job, done: moves", `insert into workq.job_runs (queue, kind, payload) values ('q', 'k', '{"a":1}') returning id`,
			lease.Done, false, true, lease.StatusDone},
		{"unique over states without completed, done: moves",
			`insert into workq.job_runs (queue, kind, payload, unique_key, unique_states) values ('q', 'k', '{}', '\x01', 3) returning id`,
			lease.Done, false, true, lease.StatusDone},
		{"unique over completed, done: stays",
			`insert into workq.job_runs (queue, kind, payload, unique_key, unique_states) values ('q', 'k', '{}', '\x02', 7) returning id`,
			lease.Done, false, false, lease.StatusDone},
		{"a schedule's slot, done: stays",
			fmt.Sprintf(`insert into workq.job_runs (queue, kind, payload, schedule_id, scheduled_time) values ('q', 'k', '{}', %d, now()) returning id`, sched),
			lease.Done, false, false, lease.StatusDone},
		{"failed: stays", `insert into workq.job_runs (queue, kind, payload) values ('q', 'k', '{}') returning id`,
			lease.Failed, false, false, lease.StatusFailed},
		{"done with its cancel requested: stays, cancelled", `insert into workq.job_runs (queue, kind, payload) values ('q', 'k', '{}') returning id`,
			lease.Done, true, false, lease.StatusCancelled},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var id int64
			if err := pool.QueryRow(ctx, c.insert).Scan(&id); err != nil {
				t.Fatal(err)
			}
			e := lease.New(pool, lease.JobRuns)
			it, ok, err := e.ClaimByID(ctx, id, time.Minute, "w1")
			if err != nil || !ok {
				t.Fatalf("claim: %v %v", ok, err)
			}
			if c.cancel {
				if _, err := pool.Exec(ctx, `update workq.job_runs set cancel_requested_at = now() where id = $1`, id); err != nil {
					t.Fatal(err)
				}
			}
			a, err := e.Complete(ctx, []lease.Completion{{ID: id, Token: it.OwnerToken, Outcome: c.outcome, Error: "x", Output: []byte(`{"out":1}`)}})
			if err != nil || a.Status[id] != c.status {
				t.Fatalf("complete: %+v, %v; want status %v", a, err, c.status)
			}
			var inWork, inDone int
			if err := pool.QueryRow(ctx, `select (select count(*) from workq.job_runs where id = $1), (select count(*) from workq.job_runs_done where id = $1)`, id).
				Scan(&inWork, &inDone); err != nil {
				t.Fatal(err)
			}
			if c.moves != (inDone == 1 && inWork == 0) || inWork+inDone != 1 {
				t.Fatalf("rows with id %d: %d in job_runs, %d in job_runs_done; want it moved: %v", id, inWork, inDone, c.moves)
			}
			var status int16
			var token, lockedUntil any
			var finished, output bool
			var runs int
			if err := pool.QueryRow(ctx, `select status, owner_token, locked_until, finished_at is not null, output is not distinct from '{"out":1}',
					(select count(*) from workq.runs_all r where r.work_table = 'job_runs' and r.item_id = $1)
				from (select * from workq.job_runs union all select * from workq.job_runs_done) j where id = $1`, id).
				Scan(&status, &token, &lockedUntil, &finished, &output, &runs); err != nil {
				t.Fatal(err)
			}
			if lease.Status(status) != c.status || token != nil || lockedUntil != nil || !finished || runs != 1 {
				t.Fatalf("row after the completion: status %d, token %v, locked_until %v, finished %v, %d runs in runs_all", status, token, lockedUntil, finished, runs)
			}
			// A row that moved is its own last attempt: the archive has no run
			// for it (migration 00028), and its done row stands for it.
			var archived int
			if err := pool.QueryRow(ctx, `select count(*) from workq.runs where work_table = 'job_runs' and item_id = $1`, id).Scan(&archived); err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: 0, false: 1}[c.moves]; archived != want {
				t.Fatalf("%d runs in runs, want %d (moved: %v)", archived, want, c.moves)
			}
			atts, err := lease.Attempts(ctx, pool, lease.JobRuns, id)
			if err != nil || len(atts) != 1 || atts[0].RunID != it.RunID || atts[0].Attempt != 1 || atts[0].Worker != "w1" ||
				atts[0].Outcome != string(map[lease.Status]lease.Outcome{lease.StatusDone: lease.Done, lease.StatusFailed: lease.Failed,
					lease.StatusCancelled: lease.Cancelled}[c.status]) {
				t.Fatalf("attempts: %+v, %v; want one of run %s by w1 ending %v", atts, err, it.RunID, c.status)
			}
			// Resolve (a retried flush whose first try committed unseen) finds
			// the attempt in either place, and not under another claim's run id.
			found, err := e.Resolve(ctx, []lease.Completion{{ID: id, Token: it.OwnerToken, RunID: it.RunID, Outcome: c.outcome}})
			if err != nil || len(found) != 1 || found[id] != c.status {
				t.Fatalf("Resolve: %v, %v; want %d: %v", found, err, id, c.status)
			}
			other := it.RunID
			other[15]++ // the next lease version's run id
			if found, err := e.Resolve(ctx, []lease.Completion{{ID: id, Token: it.OwnerToken, RunID: other, Outcome: c.outcome}}); err != nil || len(found) != 0 {
				t.Fatalf("Resolve of another claim's run id: %v, %v; want it lost", found, err)
			}
			if c.status == lease.StatusDone && !output {
				t.Fatalf("the done row lost its output")
			}
			got, err := e.Statuses(ctx, id)
			if err != nil || got[id] != c.status {
				t.Fatalf("Statuses: %v, %v; want %v", got, err, c.status)
			}
			// Deleting the item keeps its attempts: a done row's goes to runs.
			if deleted, err := e.Delete(ctx, id); err != nil || len(deleted) != 1 {
				t.Fatalf("Delete: %v, %v; want %d deleted", deleted, err, id)
			}
			after, err := lease.Attempts(ctx, pool, lease.JobRuns, id)
			if err != nil || len(after) != 1 || after[0].RunID != it.RunID || after[0].Outcome != atts[0].Outcome ||
				!after[0].FinishedAt.Equal(atts[0].FinishedAt) || after[0].Worker != "w1" {
				t.Fatalf("attempts after Delete: %+v, %v; want %+v", after, err, atts)
			}
		})
	}
	t.Run("other tables keep done rows", func(t *testing.T) {
		var id int64
		if err := pool.QueryRow(ctx, `insert into workq.timers (queue, topic, payload, due_time, run_at) values ('q', 't', '{}', now(), now()) returning id`).Scan(&id); err != nil {
			t.Fatal(err)
		}
		e := lease.New(pool, lease.Timers)
		it, ok, err := e.ClaimByID(ctx, id, time.Minute, "w1")
		if err != nil || !ok {
			t.Fatalf("claim: %v %v", ok, err)
		}
		if _, err := e.Complete(ctx, []lease.Completion{{ID: id, Token: it.OwnerToken, Outcome: lease.Done}}); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := pool.QueryRow(ctx, `select count(*) from workq.timers where id = $1 and status = 2`, id).Scan(&n); err != nil || n != 1 {
			t.Fatalf("done timer in timers: %d, %v", n, err)
		}
	})
}

// A row that another transaction changes while a completion waits for its
// lock is ended all the same, by whichever part of the statement did not
// take it: the move decides on the row it read first, and the update takes
// every row the move did not. A schedule deleted meanwhile (ON DELETE SET
// NULL rewrites the running slot, which then no longer stays) left the job
// in progress until its lease expired, to run again; a cancel requested
// meanwhile ends the job cancelled at once.
func TestCompleteEndsARowChangedMeanwhile(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	cases := []struct {
		name   string
		insert string // $1: a schedule's id
		change string // $1: the schedule's id, $2: the job's id
		status lease.Status
	}{
		{"its schedule deleted",
			`insert into workq.job_runs (queue, kind, payload, schedule_id, scheduled_time) values ('q', 'k', '{}', $1, now()) returning id`,
			`delete from workq.schedules where id = $1 and $2::bigint > 0`, lease.StatusDone},
		{"its cancel requested",
			`insert into workq.job_runs (queue, kind, payload) select 'q', 'k', '{}' where $1::bigint > 0 returning id`,
			`update workq.job_runs set cancel_requested_at = now(), last_error = 'cancelled by test' where id = $2 and $1::bigint > 0`, lease.StatusCancelled},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var sched, id int64
			if err := pool.QueryRow(ctx, `insert into workq.schedules (name, cron, queue, kind, payload)
				values ($1, '* * * * *', 'q', 'k', '{}') returning id`, fmt.Sprintf("changed-%d", i)).Scan(&sched); err != nil {
				t.Fatal(err)
			}
			if err := pool.QueryRow(ctx, c.insert, sched).Scan(&id); err != nil {
				t.Fatal(err)
			}
			e := lease.New(pool, lease.JobRuns)
			it, ok, err := e.ClaimByID(ctx, id, time.Minute, "w1")
			if err != nil || !ok {
				t.Fatalf("claim: %v %v", ok, err)
			}
			holder, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = holder.Rollback(ctx) }()
			var holderPID uint32
			if err := holder.QueryRow(ctx, `select pg_backend_pid()`).Scan(&holderPID); err != nil {
				t.Fatal(err)
			}
			if _, err := holder.Exec(ctx, c.change, sched, id); err != nil {
				t.Fatal(err)
			}
			type result struct {
				a   lease.Applied
				err error
			}
			done := make(chan result, 1)
			go func() {
				a, err := e.Complete(ctx, []lease.Completion{{ID: id, Token: it.OwnerToken, Outcome: lease.Done}})
				done <- result{a, err}
			}()
			for waiting := false; !waiting; time.Sleep(time.Millisecond) {
				select {
				case r := <-done:
					t.Fatalf("the completion returned (%+v, %v) without waiting for the row the other transaction changed", r.a, r.err)
				default:
				}
				if err := pool.QueryRow(ctx, `select exists (select 1 from pg_stat_activity where $1::int = any(pg_blocking_pids(pid)))`,
					int32(holderPID)).Scan(&waiting); err != nil {
					t.Fatal(err)
				}
			}
			if err := holder.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			r := <-done
			if r.err != nil || r.a.Status[id] != c.status {
				t.Fatalf("complete: %+v, %v; want status %v", r.a, r.err, c.status)
			}
			var status int16
			var token any
			var runs int
			if err := pool.QueryRow(ctx, `select status, owner_token,
					(select count(*) from workq.runs r where r.work_table = 'job_runs' and r.item_id = $1)
				from workq.job_runs_all where id = $1`, id).Scan(&status, &token, &runs); err != nil {
				t.Fatal(err)
			}
			if lease.Status(status) != c.status || token != nil || runs != 1 {
				t.Fatalf("row after the completion: status %d, token %v, %d runs; want status %d, no token, 1 run", status, token, runs, c.status)
			}
		})
	}
}

// One completion statement ends a batch of done jobs, each moved with the
// output its own completion carried (or none), and a job claimed twice
// (lost and claimed again) is ended once, by its current claim: the older
// claim's completion in the same batch takes nothing. The same attempt
// twice in one call is refused, and nothing is written.
func TestCompleteBatchMovesEachRowWithItsOwnOutput(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	e := lease.New(pool, lease.JobRuns)
	const queue = "batch-move"
	ids := make([]int64, 4)
	for i := range ids {
		if err := pool.QueryRow(ctx, `insert into workq.job_runs (queue, kind, payload) values ($1, 'k', '{}') returning id`, queue).Scan(&ids[i]); err != nil {
			t.Fatal(err)
		}
	}
	claim := func(id int64) lease.Item {
		t.Helper()
		it, ok, err := e.ClaimByID(ctx, id, time.Minute, "w1")
		if err != nil || !ok {
			t.Fatalf("claim %d: %v %v", id, ok, err)
		}
		return it
	}
	a, b, c, dup := ids[0], ids[1], ids[2], ids[3]
	oldA := claim(a)
	// a's lease expires and the reaper gives it back; it is claimed again.
	if _, err := pool.Exec(ctx, `update workq.job_runs set locked_until = now() - interval '1 second' where id = $1`, a); err != nil {
		t.Fatal(err)
	}
	if r, err := e.ReapExpired(ctx, queue, 10); err != nil {
		t.Fatalf("reap: %+v, %v", r, err)
	}
	newA, itB, itC, itDup := claim(a), claim(b), claim(c), claim(dup)
	if newA.OwnerToken == oldA.OwnerToken {
		t.Fatal("the second claim has the first claim's token")
	}

	applied, err := e.Complete(ctx, []lease.Completion{
		{ID: a, Token: oldA.OwnerToken, Outcome: lease.Done, Output: []byte(`{"from":"lost claim"}`)},
		{ID: b, Token: itB.OwnerToken, Outcome: lease.Done},
		{ID: a, Token: newA.OwnerToken, Outcome: lease.Done, Output: []byte(`{"from":"current claim"}`)},
		{ID: c, Token: itC.OwnerToken, Outcome: lease.Done, Output: []byte(`{"c":3}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{a, b, c} {
		if applied.Status[id] != lease.StatusDone {
			t.Errorf("id %d: status %v, want done (applied %+v)", id, applied.Status[id], applied)
		}
	}
	want := map[int64]string{a: `{"from": "current claim"}`, b: "", c: `{"c": 3}`}
	rows, err := pool.Query(ctx, `select id, coalesce(output::text, ''), lease_version, status, owner_token is null from workq.job_runs_done where queue = $1`, queue)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]string{}
	for rows.Next() {
		var id, version int64
		var out string
		var status int16
		var noToken bool
		if err := rows.Scan(&id, &out, &version, &status, &noToken); err != nil {
			t.Fatal(err)
		}
		if _, twice := got[id]; twice {
			t.Errorf("id %d moved twice", id)
		}
		got[id] = out
		if status != int16(lease.StatusDone) || !noToken {
			t.Errorf("done row %d: status %d, token cleared %v", id, status, noToken)
		}
		if id == a && version != newA.LeaseVersion {
			t.Errorf("done row %d has lease version %d, want the current claim's %d", id, version, newA.LeaseVersion)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("done rows' outputs: %v, want %v", got, want)
	}

	// The same attempt twice: refused before the statement runs.
	twice := lease.Completion{ID: dup, Token: itDup.OwnerToken, Outcome: lease.Done}
	if _, err := e.Complete(ctx, []lease.Completion{twice, twice}); err == nil {
		t.Fatal("completing one attempt twice in a call: no error")
	}
	var status int16
	var moved int
	if err := pool.QueryRow(ctx, `select status, (select count(*) from workq.job_runs_done where id = $1) from workq.job_runs where id = $1`, dup).
		Scan(&status, &moved); err != nil || status != int16(lease.StatusInProgress) || moved != 0 {
		t.Fatalf("after the refused call: status %d, %d done rows, %v; want it still running", status, moved, err)
	}
}
