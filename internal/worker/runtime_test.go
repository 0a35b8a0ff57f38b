package worker_test

// Integration tests of the worker runtime against a real PostgreSQL: handler
// outcomes, lease loss, heartbeats, execution timeouts and graceful shutdown.
// Every test checks the job_runs row and the runs archive, not only the
// worker's callbacks.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/reaper"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/worker"
)

// outcomeCase is one handler behaviour and what it must leave in the database.
type outcomeCase struct {
	name        string
	kind        string // enqueued kind ("job" when empty)
	unhandled   bool   // register no handler for kind
	maxAttempts int
	// handler gets the number of the call (1 on the first call, whatever the
	// attempt number in the row).
	handler func(ctx context.Context, j *worker.Job, call int) error
	// settled says the job reached the state to check; nil: done or failed.
	settled func(row gen.JobRun, runs []gen.Run) bool

	wantStatus    lease.Status
	wantAttempts  int32
	wantRuns      []string // runs.outcome, in order
	wantRunsAtt   []int32  // runs.attempt, in order
	wantLastError string   // substring of last_error; "" means NULL
	check         func(t *testing.T, o *outcomeResult)
}

type outcomeResult struct {
	row     gen.JobRun
	runs    []gen.Run
	stats   worker.Stats
	results []worker.Result
	dbNow   time.Time
}

func TestRuntimeHandlerOutcomes(t *testing.T) {
	t.Parallel()
	cases := []outcomeCase{
		{
			name:       "nil acks the job",
			handler:    func(ctx context.Context, j *worker.Job, call int) error { return nil },
			wantStatus: lease.StatusDone, wantAttempts: 1,
			wantRuns: []string{"done"}, wantRunsAtt: []int32{1},
			check: func(t *testing.T, o *outcomeResult) {
				if o.row.FinishedAt == nil || o.row.OwnerToken != nil || o.row.LockedUntil != nil {
					t.Errorf("done row: finished_at %v owner_token %v locked_until %v; want finished, no owner", o.row.FinishedAt, o.row.OwnerToken, o.row.LockedUntil)
				}
				if o.stats.Done != 1 || o.stats.Retried != 0 || o.stats.Failed != 0 {
					t.Errorf("stats %+v; want done 1", o.stats)
				}
			},
		},
		{
			name:        "error is retried after a backoff",
			maxAttempts: 4,
			handler: func(ctx context.Context, j *worker.Job, call int) error {
				if j.Attempt == 1 {
					return errors.New("transient failure on attempt 1")
				}
				return nil
			},
			wantStatus: lease.StatusDone, wantAttempts: 2,
			wantRuns: []string{"retry", "done"}, wantRunsAtt: []int32{1, 2},
			wantLastError: "transient failure on attempt 1",
			check: func(t *testing.T, o *outcomeResult) {
				retry, done := o.runs[0], o.runs[1]
				if deref(retry.Error) != "transient failure on attempt 1" {
					t.Errorf("retry run error %q", deref(retry.Error))
				}
				// The retry moved run_at into the future on the database clock
				// by Backoff(1, base, cap) = random(0, min(2*base, cap)]; the
				// next attempt was not claimed before it.
				delay := o.row.RunAt.Sub(retry.FinishedAt)
				if delay <= 0 || delay > 40*time.Millisecond {
					t.Errorf("retry delay (run_at - retry finished_at) = %s; want in (0, 40ms]", delay)
				}
				if done.StartedAt.Before(o.row.RunAt) {
					t.Errorf("attempt 2 started at %s, before run_at %s", done.StartedAt, o.row.RunAt)
				}
				if o.stats.Retried != 1 || o.stats.Done != 1 {
					t.Errorf("stats %+v; want retried 1, done 1", o.stats)
				}
			},
		},
		{
			name:        "error fails after max attempts",
			maxAttempts: 3,
			handler: func(ctx context.Context, j *worker.Job, call int) error {
				return fmt.Errorf("broken on attempt %d", j.Attempt)
			},
			wantStatus: lease.StatusFailed, wantAttempts: 3,
			wantRuns: []string{"retry", "retry", "failed"}, wantRunsAtt: []int32{1, 2, 3},
			wantLastError: "broken on attempt 3",
			check: func(t *testing.T, o *outcomeResult) {
				for i, r := range o.runs {
					if want := fmt.Sprintf("broken on attempt %d", i+1); deref(r.Error) != want {
						t.Errorf("run %d error %q, want %q", i, deref(r.Error), want)
					}
					if i > 0 && !r.StartedAt.After(o.runs[i-1].FinishedAt) {
						t.Errorf("attempt %d started %s, not after attempt %d ended %s", i+1, r.StartedAt, i, o.runs[i-1].FinishedAt)
					}
				}
				if o.row.FinishedAt == nil {
					t.Error("failed row has no finished_at")
				}
				if o.stats.Retried != 2 || o.stats.Failed != 1 {
					t.Errorf("stats %+v; want retried 2, failed 1", o.stats)
				}
			},
		},
		{
			name:        "Permanent fails at once",
			maxAttempts: 5,
			handler: func(ctx context.Context, j *worker.Job, call int) error {
				return worker.Permanent(errors.New("payload is unusable"))
			},
			wantStatus: lease.StatusFailed, wantAttempts: 1,
			wantRuns: []string{"failed"}, wantRunsAtt: []int32{1},
			wantLastError: "permanent: payload is unusable",
			check: func(t *testing.T, o *outcomeResult) {
				if o.row.FinishedAt == nil {
					t.Error("failed row has no finished_at")
				}
				if o.stats.Failed != 1 || o.stats.Retried != 0 {
					t.Errorf("stats %+v; want failed 1", o.stats)
				}
			},
		},
		{
			name:        "Snooze gives the attempt back",
			maxAttempts: 1, // a consumed attempt would leave none for the second run
			handler: func(ctx context.Context, j *worker.Job, call int) error {
				if call == 1 {
					return worker.Snooze(400 * time.Millisecond)
				}
				return nil
			},
			wantStatus: lease.StatusDone, wantAttempts: 1,
			wantRuns: []string{"snoozed", "done"}, wantRunsAtt: []int32{1, 1},
			check: func(t *testing.T, o *outcomeResult) {
				snoozed, done := o.runs[0], o.runs[1]
				if d := o.row.RunAt.Sub(snoozed.FinishedAt); d != 400*time.Millisecond {
					t.Errorf("snooze moved run_at by %s, want 400ms", d)
				}
				if done.StartedAt.Before(o.row.RunAt) {
					t.Errorf("run after snooze started %s, before run_at %s", done.StartedAt, o.row.RunAt)
				}
				if snoozed.RunID == done.RunID {
					t.Error("snoozed and done runs share a run_id")
				}
				if o.stats.Snoozed != 1 || o.stats.Done != 1 || o.stats.Retried != 0 {
					t.Errorf("stats %+v; want snoozed 1, done 1", o.stats)
				}
			},
		},
		{
			name: "Snooze leaves the row ready until now+d",
			handler: func(ctx context.Context, j *worker.Job, call int) error {
				return worker.Snooze(time.Hour)
			},
			settled:    func(row gen.JobRun, runs []gen.Run) bool { return len(runs) >= 1 },
			wantStatus: lease.StatusReady, wantAttempts: 0,
			wantRuns: []string{"snoozed"}, wantRunsAtt: []int32{1},
			check: func(t *testing.T, o *outcomeResult) {
				if d := o.row.RunAt.Sub(o.runs[0].FinishedAt); d != time.Hour {
					t.Errorf("snooze moved run_at by %s, want 1h", d)
				}
				if d := o.row.RunAt.Sub(o.dbNow); d <= time.Hour-30*time.Second || d > time.Hour {
					t.Errorf("run_at is now()+%s, want about now()+1h", d)
				}
				if o.row.OwnerToken != nil || o.row.LockedUntil != nil || o.row.FinishedAt != nil {
					t.Errorf("snoozed row still owned or finished: %+v", o.row)
				}
				if o.stats.Snoozed != 1 {
					t.Errorf("stats %+v; want snoozed 1", o.stats)
				}
			},
		},
		{
			name: "panic is recovered and retried",
			handler: func(ctx context.Context, j *worker.Job, call int) error {
				if j.Attempt == 1 {
					panic("kaboom in handler")
				}
				return nil
			},
			wantStatus: lease.StatusDone, wantAttempts: 2,
			wantRuns: []string{"retry", "done"}, wantRunsAtt: []int32{1, 2},
			wantLastError: "panic: kaboom in handler",
			check: func(t *testing.T, o *outcomeResult) {
				msg := deref(o.runs[0].Error)
				for _, want := range []string{"panic: kaboom in handler", "goroutine ", "runtime/debug.Stack", "worker_test.TestRuntimeHandlerOutcomes"} {
					if !strings.Contains(msg, want) {
						t.Errorf("retry error lacks %q (a stack trace); got:\n%s", want, msg)
					}
				}
				if o.stats.Panics != 1 || o.stats.Retried != 1 || o.stats.Done != 1 {
					t.Errorf("stats %+v; want panics 1, retried 1, done 1", o.stats)
				}
			},
		},
		{
			name:        "unknown kind is retried with an error naming it",
			kind:        "nobody.handles.this",
			unhandled:   true,
			maxAttempts: 2,
			wantStatus:  lease.StatusFailed, wantAttempts: 2,
			wantRuns: []string{"retry", "failed"}, wantRunsAtt: []int32{1, 2},
			wantLastError: `no handler registered for kind "nobody.handles.this"`,
			check: func(t *testing.T, o *outcomeResult) {
				for i, r := range o.runs {
					if !strings.Contains(deref(r.Error), `"nobody.handles.this"`) {
						t.Errorf("run %d error %q does not name the kind", i, deref(r.Error))
					}
				}
				if o.stats.Retried != 1 || o.stats.Failed != 1 {
					t.Errorf("stats %+v; want retried 1, failed 1", o.stats)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := testdb.Pool(t)
			kind := tc.kind
			if kind == "" {
				kind = "job"
			}
			var (
				mu      sync.Mutex
				results []worker.Result
				calls   atomic.Int32
			)
			handlers := map[string]worker.HandlerFunc{}
			if !tc.unhandled {
				handlers[kind] = func(ctx context.Context, j *worker.Job) error {
					return tc.handler(ctx, j, int(calls.Add(1)))
				}
			} else {
				handlers["some.other.kind"] = func(context.Context, *worker.Job) error { return nil }
			}
			cfg := rtConfig("outcomes-" + t.Name())
			w := startWorker(t, pool, cfg, worker.Options{OnResult: func(r worker.Result) {
				mu.Lock()
				results = append(results, r)
				mu.Unlock()
			}}, handlers)
			id := enqueue(t, pool, jobq.Job{Kind: kind, MaxAttempts: tc.maxAttempts, Payload: map[string]string{"case": tc.name}})

			var o outcomeResult
			waitFor(t, 10*time.Second, "the job to settle", func() bool {
				// One snapshot: the row and the runs of the same commits
				// (a settled check on the runs alone must not pair them
				// with a row read before the completion committed).
				o.row, o.runs = jobState(t, pool, id)
				mu.Lock()
				nres := len(results)
				mu.Unlock()
				// Results are reported after the flush that wrote the runs
				// rows: wait for them too, so Stats is final.
				if nres < len(o.runs) {
					return false
				}
				if tc.settled != nil {
					return tc.settled(o.row, o.runs)
				}
				st := lease.Status(o.row.Status)
				return st == lease.StatusDone || st == lease.StatusFailed
			})
			o.stats = w.Stats()
			o.dbNow = scalar[time.Time](t, pool, "select now()")
			mu.Lock()
			o.results = append([]worker.Result(nil), results...)
			mu.Unlock()

			if got := lease.Status(o.row.Status); got != tc.wantStatus {
				t.Errorf("status %s, want %s", got, tc.wantStatus)
			}
			if o.row.Attempts != tc.wantAttempts {
				t.Errorf("attempts %d, want %d", o.row.Attempts, tc.wantAttempts)
			}
			if got := outcomes(o.runs); fmt.Sprint(got) != fmt.Sprint(tc.wantRuns) {
				t.Fatalf("runs outcomes %v, want %v", got, tc.wantRuns)
			}
			if got := attemptsOf(o.runs); fmt.Sprint(got) != fmt.Sprint(tc.wantRunsAtt) {
				t.Errorf("runs attempts %v, want %v", got, tc.wantRunsAtt)
			}
			for _, r := range o.runs {
				if r.WorkerID != cfg.WorkerID {
					t.Errorf("run %s archived worker %q", r.RunID, r.WorkerID)
				}
			}
			switch {
			case tc.wantLastError == "" && o.row.LastError != nil:
				t.Errorf("last_error %q, want NULL", *o.row.LastError)
			case tc.wantLastError != "" && !strings.Contains(deref(o.row.LastError), tc.wantLastError):
				t.Errorf("last_error %q, want it to contain %q", deref(o.row.LastError), tc.wantLastError)
			}
			if len(o.results) != len(o.runs) {
				t.Errorf("%d OnResult calls for %d archived attempts", len(o.results), len(o.runs))
			}
			for i, r := range o.results {
				if !r.Applied || r.Item.ID != id || (i < len(o.runs) && string(r.Outcome) != o.runs[i].Outcome) {
					t.Errorf("result %d: %+v", i, r)
				}
			}
			if tc.check != nil {
				tc.check(t, &o)
			}
		})
	}
}

// stealLease expires job id's lease and, in the same transaction, makes
// another owner take it: reap (by the given method), then claim as "thief".
// The worker cannot claim the row back in between, since the transaction
// holds its row lock until commit.
func stealLease(t *testing.T, ctx context.Context, tx pgx.Tx, id int64, queue string, reap func(e *lease.Engine) error) lease.Item {
	t.Helper()
	tag, err := tx.Exec(ctx, "update workq.job_runs set locked_until = now() - interval '1 second' where id = $1 and status = 1", id)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("expire lease of %d: %v (%d rows)", id, err, tag.RowsAffected())
	}
	e := lease.New(tx, lease.JobRuns)
	if err := reap(e); err != nil {
		t.Fatal(err)
	}
	c, err := e.Claim(ctx, lease.ClaimParams{Queue: queue, Max: 1, Lease: time.Minute, WorkerID: "thief"})
	if err != nil {
		t.Fatalf("thief claim: %v", err)
	}
	if len(c.Items) != 1 || c.Items[0].ID != id {
		t.Fatalf("thief claimed %+v, want job %d", c.Items, id)
	}
	return c.Items[0]
}

func TestRuntimeLeaseLostMidHandler(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		reap func(ctx context.Context, t *testing.T) func(e *lease.Engine) error
	}{
		{"reaper statement", func(ctx context.Context, t *testing.T) func(e *lease.Engine) error {
			return func(e *lease.Engine) error {
				r, err := e.ReapExpired(ctx, "", 100)
				if err == nil && r.Requeued != 1 {
					err = fmt.Errorf("reaper requeued %d, failed %d; want 1 requeued", r.Requeued, r.Failed)
				}
				return err
			}
		}},
		{"reclaim of the queue", func(ctx context.Context, t *testing.T) func(e *lease.Engine) error {
			return func(e *lease.Engine) error {
				r, err := e.ReapExpired(ctx, "default", 100)
				if err == nil && r.Requeued != 1 {
					err = fmt.Errorf("reclaim requeued %d, failed %d; want 1 requeued", r.Requeued, r.Failed)
				}
				return err
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := testdb.Pool(t)
			cfg := rtConfig("victim")
			cfg.Lease = time.Second // the minimum: heartbeats every 333ms
			cfg.RunsDir = t.TempDir()
			started := newSignal[*worker.Job]()
			cause := newSignal[error]()
			var results atomic.Int32
			w := startWorker(t, pool, cfg, worker.Options{OnResult: func(worker.Result) { results.Add(1) }},
				map[string]worker.HandlerFunc{"block": func(ctx context.Context, j *worker.Job) error {
					started.fire(j)
					<-ctx.Done()
					cause.fire(context.Cause(ctx))
					return nil // a late "success" that must not be applied
				}})
			id := enqueue(t, pool, jobq.Job{Kind: "block"})
			job := started.wait(t, 5*time.Second, "the handler to start")
			waitClaimedBy(t, pool, id, "victim", 5*time.Second)

			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			thief := stealLease(t, ctx, tx, id, "default", tc.reap(ctx, t))
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			stolen := time.Now()
			if thief.OwnerToken == job.OwnerToken || thief.Attempt != 2 || thief.LeaseVersion <= job.LeaseVersion {
				t.Fatalf("thief item %+v vs victim %+v", thief, job.Item)
			}

			got := cause.wait(t, 5*time.Second, "the handler's ctx to be cancelled")
			t.Logf("lease loss noticed %s after the steal", time.Since(stolen).Round(time.Millisecond))
			if !errors.Is(got, worker.ErrLeaseLost) {
				t.Fatalf("context.Cause = %s, want worker.ErrLeaseLost", causeName(got))
			}
			waitFor(t, 5*time.Second, "the handler to return", func() bool { return w.Stats().InFlight == 0 })
			time.Sleep(300 * time.Millisecond) // ample time for a wrongly queued completion to flush

			row := jobRow(t, pool, id)
			if lease.Status(row.Status) != lease.StatusInProgress || deref(row.OwnerToken) != thief.OwnerToken ||
				deref(row.ClaimedBy) != "thief" || row.Attempts != 2 || mustRunID(t, id, row.LeaseVersion) != thief.RunID {
				t.Errorf("row after the late result: status %d owner %v claimed_by %q attempts %d lease_version %d; want in progress under the thief's token and run, attempts 2",
					row.Status, deref(row.OwnerToken), deref(row.ClaimedBy), row.Attempts, row.LeaseVersion)
			}
			// A claim released after its client-side timeout never ran
			// (ranRuns); every run that did is the victim's attempt 1, expired.
			runs, released := ranRuns(runRows(t, pool, id))
			if len(runs) != 1 || runs[0].Outcome != "expired" || runs[0].WorkerID != "victim" || runs[0].OwnerToken != job.OwnerToken || runs[0].Attempt != 1 {
				t.Errorf("runs that ran %+v; want only the victim's attempt 1, expired", runs)
			}
			// A released claim is counted after its release commits (see settle).
			st := statsWhen(w, func(st worker.Stats) bool { return st.ClaimsReleased == released })
			if st.LeaseLost < 1 || st.Done != 0 || results.Load() != 0 {
				t.Errorf("stats %+v, %d results; want lease_lost >= 1 and nothing applied", st, results.Load())
			}
			if st.ClaimsReleased != released {
				t.Errorf("%d released runs archived, but the worker released %d rows of lost claims", released, st.ClaimsReleased)
			}
			meta := readMeta(t, cfg.RunsDir, id, job.RunID)
			if meta.Outcome != "lease_lost" || meta.Applied != nil || meta.FinishedAt == nil {
				t.Errorf("meta.json of the lost attempt: %+v; want outcome lease_lost, no applied", meta)
			}

			// The row is still the thief's to finish.
			if err := lease.New(pool, lease.JobRuns).Ack(ctx, thief.OwnerToken, id); err != nil {
				t.Fatalf("thief ack: %v", err)
			}
			if row := jobRow(t, pool, id); lease.Status(row.Status) != lease.StatusDone || row.Attempts != 2 {
				t.Errorf("after the thief's ack: status %d attempts %d", row.Status, row.Attempts)
			}
			if ran, _ := ranRuns(runRows(t, pool, id)); fmt.Sprint(outcomes(ran)) != "[expired done]" {
				t.Errorf("runs that ran %v, want [expired done]", outcomes(ran))
			}
		})
	}
}

func TestRuntimeHeartbeatKeepsLongHandler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.Pool(t)
	cfg := rtConfig("steady")
	// Heartbeats every 667ms; the handler runs for two and a half leases.
	// (A 1s lease left a claim 500ms before its client-side timeout, which a
	// loaded machine exceeded.)
	cfg.Lease = 2 * time.Second
	cfg.Concurrency, cfg.Batch = 1, 1
	const sleep = 5 * time.Second
	cause := newSignal[error]()
	w := startWorker(t, pool, cfg, worker.Options{}, map[string]worker.HandlerFunc{"long": func(ctx context.Context, j *worker.Job) error {
		select {
		case <-time.After(sleep):
			cause.fire(nil)
			return nil
		case <-ctx.Done():
			cause.fire(context.Cause(ctx))
			return ctx.Err()
		}
	}})

	id := enqueue(t, pool, jobq.Job{Kind: "long", MaxAttempts: 5})
	waitClaimedBy(t, pool, id, "steady", 5*time.Second)
	// Would-be thieves, from the moment the worker holds the job: the
	// reaper, and a claimer that reclaims expired leases (and would claim the
	// job as soon as it were ready again).
	bg, stopBG := context.WithCancel(ctx)
	var wg sync.WaitGroup
	r, err := reaper.New(pool, 100*time.Millisecond, 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	wg.Add(2)
	go func() { defer wg.Done(); _ = r.Run(bg) }()
	var stolen atomic.Int32
	go func() {
		defer wg.Done()
		e := lease.New(pool, lease.JobRuns)
		for bg.Err() == nil {
			if _, err := e.ReapExpired(bg, "default", 10); err != nil && bg.Err() == nil {
				t.Errorf("thief reclaim: %v", err)
			}
			c, err := e.Claim(bg, lease.ClaimParams{Queue: "default", Max: 10, Lease: time.Minute, WorkerID: "thief"})
			if err == nil {
				stolen.Add(int32(len(c.Items)))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	defer func() { stopBG(); wg.Wait() }()
	var maxLease time.Duration // locked_until - claimed_at: grows with each heartbeat
	waitFor(t, 20*time.Second, "the long job to finish", func() bool {
		row := jobRow(t, pool, id)
		if row.LockedUntil != nil && row.ClaimedAt != nil {
			maxLease = max(maxLease, row.LockedUntil.Sub(*row.ClaimedAt))
		}
		return lease.Status(row.Status) >= lease.StatusDone
	})
	if got := cause.wait(t, time.Second, "the handler to end"); got != nil {
		t.Fatalf("handler ctx cancelled: %s", causeName(got))
	}
	// A claim released after its client-side timeout never ran (ranRuns):
	// the one attempt that ran held its lease to the end.
	runs, released := ranRuns(runRows(t, pool, id))
	if fmt.Sprint(outcomes(runs)) != "[done]" || runs[0].WorkerID != "steady" {
		t.Fatalf("runs that ran %+v; want one done run by steady", runs)
	}
	row := jobRow(t, pool, id)
	if lease.Status(row.Status) != lease.StatusDone || row.Attempts != 1 || row.LeaseVersion != runs[0].LeaseVersion {
		t.Errorf("status %d attempts %d lease_version %d; want done on the first attempt (lease_version %d)", row.Status, row.Attempts, row.LeaseVersion, runs[0].LeaseVersion)
	}
	if d := runs[0].FinishedAt.Sub(runs[0].StartedAt); d < sleep {
		t.Errorf("attempt took %s, less than the handler's %s", d, sleep)
	}
	if n := scalar[int64](t, pool, "select count(*) from workq.runs where outcome = 'expired'"); n != 0 || stolen.Load() != 0 {
		t.Errorf("%d expired runs, %d rows claimed by the thief; want none", n, stolen.Load())
	}
	if maxLease < sleep {
		t.Errorf("lease reached at most claimed_at+%s; heartbeats should have carried it past the handler's %s", maxLease, sleep)
	}
	// Counts trail the commits seen above (see settle).
	if st := statsWhen(w, func(st worker.Stats) bool { return st.ClaimsReleased == released && st.Done == 1 }); st.LeaseLost != 0 || st.ClaimsReleased != released || st.Done != 1 {
		t.Errorf("stats %+v; want no lease lost, done 1 and %d claims released (the released runs archived)", st, released)
	}
	t.Logf("lease extended to claimed_at+%s over a %s handler with a %s lease", maxLease.Round(time.Millisecond), sleep, cfg.Lease)
}

func TestRuntimeExecTimeout(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	cfg := rtConfig("timeout")
	cfg.ExecTimeout = 300 * time.Millisecond
	cause := newSignal[error]()
	var results atomic.Int32
	w := startWorker(t, pool, cfg, worker.Options{OnResult: func(worker.Result) { results.Add(1) }}, map[string]worker.HandlerFunc{"slow": func(ctx context.Context, j *worker.Job) error {
		if j.Attempt > 1 {
			return nil
		}
		<-ctx.Done()
		cause.fire(context.Cause(ctx))
		return ctx.Err()
	}})
	id := enqueue(t, pool, jobq.Job{Kind: "slow", MaxAttempts: 3})
	row := waitStatus(t, pool, id, lease.StatusDone, 10*time.Second)
	// The done row is visible as soon as the flush commits; the worker
	// counts it once the statement has returned, then reports it. Stats is
	// final after the second report.
	waitFor(t, 10*time.Second, "both attempts to be reported", func() bool { return results.Load() >= 2 })
	if got := cause.wait(t, time.Second, "the first attempt"); !errors.Is(got, context.DeadlineExceeded) {
		t.Errorf("context.Cause = %s, want DeadlineExceeded", causeName(got))
	}
	runs := runRows(t, pool, id)
	if fmt.Sprint(outcomes(runs)) != "[retry done]" || row.Attempts != 2 {
		t.Fatalf("runs %v, attempts %d; want [retry done], 2", outcomes(runs), row.Attempts)
	}
	if e := deref(runs[0].Error); !strings.Contains(e, "deadline") {
		t.Errorf("timed-out attempt error %q does not mention the deadline", e)
	}
	if !strings.Contains(deref(row.LastError), "deadline") {
		t.Errorf("last_error %q", deref(row.LastError))
	}
	if d := runs[0].FinishedAt.Sub(runs[0].StartedAt); d < 300*time.Millisecond || d > 3*time.Second {
		t.Errorf("timed-out attempt lasted %s, want about 300ms", d)
	}
	if st := w.Stats(); st.Retried != 1 || st.Done != 1 || st.Pending != 0 || st.InFlight != 0 || results.Load() != 2 {
		t.Errorf("stats %+v, %d results; want retried 1, done 1, nothing pending or in flight, 2 results", st, results.Load())
	}
}

func TestRuntimeGracefulShutdown(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	cfg := rtConfig("drainer")
	cfg.DrainTimeout = time.Second
	cfg.RunsDir = t.TempDir()
	quickStarted, stubbornStarted := newSignal[struct{}](), newSignal[struct{}]()
	quickErr, stubbornCause := newSignal[error](), newSignal[error]()
	w := startWorker(t, pool, cfg, worker.Options{}, map[string]worker.HandlerFunc{
		"quick": func(ctx context.Context, j *worker.Job) error {
			quickStarted.fire(struct{}{})
			time.Sleep(600 * time.Millisecond) // finishes inside the drain timeout
			quickErr.fire(ctx.Err())
			return nil
		},
		"stubborn": func(ctx context.Context, j *worker.Job) error {
			stubbornStarted.fire(struct{}{})
			<-ctx.Done()
			stubbornCause.fire(context.Cause(ctx))
			return ctx.Err()
		},
	})
	quick := enqueue(t, pool, jobq.Job{Kind: "quick"})
	stubborn := enqueue(t, pool, jobq.Job{Kind: "stubborn"})
	quickStarted.wait(t, 5*time.Second, "quick to start")
	stubbornStarted.wait(t, 5*time.Second, "stubborn to start")

	took := w.stop(t, cfg.DrainTimeout+10*time.Second)
	// Run has returned: everything below must already be in the database.
	t.Logf("Run returned %s after cancellation (drain timeout %s)", took.Round(time.Millisecond), cfg.DrainTimeout)
	if took < cfg.DrainTimeout || took > cfg.DrainTimeout+3*time.Second {
		t.Errorf("Run returned after %s; want between the drain timeout %s and %s", took, cfg.DrainTimeout, cfg.DrainTimeout+3*time.Second)
	}
	q := jobRow(t, pool, quick)
	if lease.Status(q.Status) != lease.StatusDone || q.Attempts != 1 || fmt.Sprint(outcomes(runRows(t, pool, quick))) != "[done]" {
		t.Errorf("quick: status %d attempts %d runs %v; want done, 1, [done]", q.Status, q.Attempts, outcomes(runRows(t, pool, quick)))
	}
	if err := quickErr.wait(t, time.Second, "quick to return"); err != nil {
		t.Errorf("quick's ctx was cancelled (%v) although it finished within the drain timeout", err)
	}
	s := jobRow(t, pool, stubborn)
	if lease.Status(s.Status) != lease.StatusReady || s.Attempts != 0 || s.OwnerToken != nil || s.LockedUntil != nil || s.LastError != nil {
		t.Errorf("stubborn after shutdown: status %d attempts %d owner %v locked_until %v last_error %v; want ready, attempts 0, unowned",
			s.Status, s.Attempts, s.OwnerToken, s.LockedUntil, s.LastError)
	}
	runs := runRows(t, pool, stubborn)
	if len(runs) != 1 || runs[0].Outcome != "released" || runs[0].Attempt != 1 || runs[0].WorkerID != "drainer" {
		t.Errorf("stubborn runs %+v; want one released attempt 1", runs)
	}
	// The run archive has the final word on both attempts too.
	if m := readMeta(t, cfg.RunsDir, stubborn, runs[0].RunID); m.Outcome != "released" || m.Applied == nil || !*m.Applied || m.Status != "ready" || m.FinishedAt == nil {
		t.Errorf("stubborn meta.json: outcome %q applied %v status %q finished_at %v; want released, applied, ready, finished",
			m.Outcome, m.Applied, m.Status, m.FinishedAt)
	}
	if qr := runRows(t, pool, quick); len(qr) == 1 {
		if m := readMeta(t, cfg.RunsDir, quick, qr[0].RunID); m.Outcome != "done" || m.Status != "done" {
			t.Errorf("quick meta.json: outcome %q status %q; want done", m.Outcome, m.Status)
		}
	}
	select {
	case got := <-stubbornCause.ch:
		if !errors.Is(got, worker.ErrShutdown) {
			t.Errorf("stubborn ctx cause %s, want worker.ErrShutdown", causeName(got))
		}
	default:
		t.Error("Run returned while the stubborn handler's ctx was still live")
	}
	if st := w.Stats(); st.Done != 1 || st.Released != 1 || st.InFlight != 0 {
		t.Errorf("stats %+v; want done 1, released 1", st)
	}
	// Released means claimable at once by another worker, with a fresh attempt.
	c, err := lease.New(pool, lease.JobRuns).Claim(context.Background(), lease.ClaimParams{Queue: "default", Max: 10, Lease: time.Minute, WorkerID: "next"})
	if err != nil || len(c.Items) != 1 || c.Items[0].ID != stubborn || c.Items[0].Attempt != 1 {
		t.Errorf("claim after shutdown: %+v, %v; want the stubborn job on attempt 1", c.Items, err)
	}
}

// readMeta parses <dir>/job_runs/<id>/<run_id>/meta.json.
func readMeta(t *testing.T, dir string, id int64, runID uuid.UUID) runMeta {
	t.Helper()
	var m runMeta
	readJSON(t, metaPath(dir, id, runID), &m)
	return m
}
