package worker_test

// Integration tests of the worker runtime against a real PostgreSQL: the
// global limit W across workers, dedup keys and transactional enqueue, the run
// archive on disk, and LISTEN/NOTIFY wake-ups versus polling.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workq/workq/internal/jobq"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/worker"
)

func TestRuntimeGlobalLimitAcrossWorkers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.PoolWith(t, 30)
	const limit, n = 3, 200
	if err := lease.SetLimit(ctx, pool, lease.JobRuns, "limited", limit); err != nil {
		t.Fatal(err)
	}
	var running, peak atomic.Int32
	handler := func(ctx context.Context, j *worker.Job) error {
		now := running.Add(1)
		for p := peak.Load(); now > p && !peak.CompareAndSwap(p, now); p = peak.Load() {
		}
		time.Sleep(20 * time.Millisecond)
		running.Add(-1)
		return nil
	}
	workers := make([]*rtWorker, 3)
	for i := range workers {
		cfg := rtConfig(fmt.Sprintf("limited-%d", i), "limited")
		workers[i] = startWorker(t, pool, cfg, worker.Options{}, map[string]worker.HandlerFunc{"limited.job": handler})
	}

	// Sample the database's own view of the in-progress set meanwhile.
	sctx, stopSampler := context.WithCancel(ctx)
	var dbPeak atomic.Int64
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for sctx.Err() == nil {
			var k int64
			if err := pool.QueryRow(sctx, "select count(*) from workq.job_runs_all where queue = 'limited' and status = 1 and locked_until > now()").Scan(&k); err == nil && k > dbPeak.Load() {
				dbPeak.Store(k)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()

	jobs := make([]jobq.Job, n)
	for i := range jobs {
		jobs[i] = jobq.Job{Queue: "limited", Kind: "limited.job", Payload: map[string]int{"i": i}}
	}
	start := time.Now()
	if _, err := jobq.New(jobq.Options{}).EnqueueMany(ctx, pool, jobs); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "all limited jobs to be done", func() bool {
		return scalar[int64](t, pool, "select count(*) from workq.job_runs_all where queue = 'limited' and status = 2") == n
	})
	elapsed := time.Since(start)
	stopSampler()
	<-sampled

	if p := peak.Load(); p > limit {
		t.Errorf("%d handlers ran at once across the workers; the limit is %d", p, limit)
	}
	if p := dbPeak.Load(); p > limit {
		t.Errorf("the database saw %d in-progress rows at once; the limit is %d", p, limit)
	}
	if n := scalar[int64](t, pool, "select count(*) from workq.runs_all where queue = 'limited' and outcome = 'done'"); n != 200 {
		t.Errorf("%d done runs archived, want 200", n)
	}
	if n := scalar[int64](t, pool, "select count(*) from workq.runs_all where queue = 'limited' and outcome <> 'done'"); n != 0 {
		t.Errorf("%d non-done runs archived, want 0", n)
	}
	if a := scalar[int64](t, pool, "select coalesce(sum(attempts), 0)::bigint from workq.job_runs_all where queue = 'limited'"); a != n {
		t.Errorf("attempts sum to %d over %d jobs: some ran more than once", a, n)
	}
	rows, err := pool.Query(ctx, "select worker_id, count(*) from workq.runs_all where queue = 'limited' group by worker_id order by worker_id")
	if err != nil {
		t.Fatal(err)
	}
	var dist []string
	for rows.Next() {
		var w string
		var k int64
		if err := rows.Scan(&w, &k); err != nil {
			t.Fatal(err)
		}
		dist = append(dist, fmt.Sprintf("%s=%d", w, k))
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	// The done rows are visible before the workers count them (see settle).
	var sum int64
	settle(func() bool {
		sum = 0
		for _, w := range workers {
			sum += w.Stats().Done
		}
		return sum == n
	})
	if sum != n {
		t.Errorf("workers report %d done, want %d", sum, n)
	}
	t.Logf("%d jobs in %s; peak handlers %d, peak in-progress rows %d; per worker %v",
		n, elapsed.Round(time.Millisecond), peak.Load(), dbPeak.Load(), dist)
	if peak.Load() < 2 {
		t.Errorf("peak concurrency %d: the limit of %d was never used in parallel", peak.Load(), limit)
	}
}

func TestRuntimeDedupAndTransactionalEnqueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.Pool(t)
	c := jobq.New(jobq.Options{})
	count := func(where string, args ...any) int64 {
		return scalar[int64](t, pool, "select count(*) from workq.job_runs_all where "+where, args...)
	}

	// Enqueue twice with one key: one row, the second call reports it.
	first, err := c.Enqueue(ctx, pool, jobq.Job{Kind: "dedup", DedupKey: "k1", Payload: map[string]int{"n": 1}})
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.Enqueue(ctx, pool, jobq.Job{Kind: "dedup", DedupKey: "k1", Payload: map[string]int{"n": 2}})
	if err != nil {
		t.Fatal(err)
	}
	if first.Duplicate || !second.Duplicate || second.ID != first.ID {
		t.Fatalf("enqueue k1 twice: %+v then %+v; want the same id, the second a duplicate", first, second)
	}
	if k := count("dedup_key = 'k1'"); k != 1 {
		t.Fatalf("%d rows with key k1", k)
	}
	if n := scalar[int64](t, pool, "select (payload->>'n')::bigint from workq.job_runs_all where id = $1", first.ID); n != 1 {
		t.Errorf("k1's payload n = %d: the duplicate overwrote the first job", n)
	}

	// EnqueueMany: a key repeated inside the batch, and a key already live.
	many, err := c.EnqueueMany(ctx, pool, []jobq.Job{
		{Kind: "dedup", DedupKey: "k2"},
		{Kind: "dedup", DedupKey: "k3"},
		{Kind: "dedup", DedupKey: "k2"},
		{Kind: "dedup"},
		{Kind: "dedup", DedupKey: "k1"},
		{Kind: "dedup"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(many) != 6 {
		t.Fatalf("EnqueueMany returned %d results for 6 jobs", len(many))
	}
	wantDup := []bool{false, false, true, false, true, false}
	for i, e := range many {
		if e.Duplicate != wantDup[i] || e.ID == 0 {
			t.Errorf("EnqueueMany[%d] = %+v, want duplicate=%v and an id", i, e, wantDup[i])
		}
	}
	if many[2].ID != many[0].ID || many[4].ID != first.ID {
		t.Errorf("duplicates point at %d and %d, want %d (k2) and %d (k1)", many[2].ID, many[4].ID, many[0].ID, first.ID)
	}
	ids := map[int64]bool{first.ID: true}
	for _, i := range []int{0, 1, 3, 5} {
		ids[many[i].ID] = true
	}
	if len(ids) != 5 {
		t.Errorf("new jobs got ids %v, want 5 distinct", ids)
	}
	if k := count("true"); k != 5 {
		t.Errorf("%d job rows, want 5 (k1, k2, k3 and two without a key)", k)
	}
	for _, key := range []string{"k1", "k2", "k3"} {
		if k := count("dedup_key = $1", key); k != 1 {
			t.Errorf("%d rows with key %s", k, key)
		}
	}

	// Work them, recording every job a handler sees.
	var mu sync.Mutex
	seen := map[int64]string{}
	startWorker(t, pool, rtConfig("dedup"), worker.Options{}, map[string]worker.HandlerFunc{
		"dedup": func(ctx context.Context, j *worker.Job) error {
			mu.Lock()
			seen[j.ID] = "dedup"
			mu.Unlock()
			return nil
		},
		"tx": func(ctx context.Context, j *worker.Job) error {
			var p struct{ Which string }
			if err := j.Decode(&p); err != nil {
				return err
			}
			mu.Lock()
			seen[j.ID] = p.Which
			mu.Unlock()
			return nil
		},
	})
	waitFor(t, 10*time.Second, "the dedup jobs to be done", func() bool { return count("status = 2") == 5 })
	if k := scalar[int64](t, pool, "select count(*) from workq.runs_all"); k != 5 {
		t.Errorf("%d runs for 5 jobs", k)
	}

	// Transactional enqueue, rolled back: no row, nothing worked.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := c.Enqueue(ctx, tx, jobq.Job{Kind: "tx", Payload: map[string]string{"which": "rolled-back"}})
	if err != nil {
		t.Fatal(err)
	}
	if k := count("id = $1", rb.ID); k != 0 {
		t.Errorf("an uncommitted job is visible outside its transaction")
	}
	time.Sleep(300 * time.Millisecond) // the worker polls every 50ms meanwhile
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	// ... and committed: worked once the transaction commits, not before.
	tx, err = pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cm, err := c.Enqueue(ctx, tx, jobq.Job{Kind: "tx", Payload: map[string]string{"which": "committed"}})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	mu.Lock()
	_, early := seen[cm.ID]
	mu.Unlock()
	if early {
		t.Error("a job was worked before its enqueuing transaction committed")
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	row := waitStatus(t, pool, cm.ID, lease.StatusDone, 10*time.Second)
	if row.Attempts != 1 {
		t.Errorf("committed job attempts %d", row.Attempts)
	}
	time.Sleep(200 * time.Millisecond)
	if k := count("id = $1 or payload->>'which' = 'rolled-back'", rb.ID); k != 0 {
		t.Errorf("the rolled-back job exists (%d rows)", k)
	}
	if k := scalar[int64](t, pool, "select count(*) from workq.runs_all where item_id = $1", rb.ID); k != 0 {
		t.Errorf("the rolled-back job has %d runs", k)
	}
	mu.Lock()
	for id, which := range seen {
		if which == "rolled-back" || id == rb.ID {
			t.Errorf("handler worked job %d (%s) from a rolled-back transaction", id, which)
		}
	}
	if seen[cm.ID] != "committed" || len(seen) != 6 {
		t.Errorf("handler saw %v; want the 5 dedup jobs and the committed one", seen)
	}
	mu.Unlock()

	// A dedup key only holds while its job is live: k1 is done, so it is free.
	again, err := c.Enqueue(ctx, pool, jobq.Job{Kind: "dedup", DedupKey: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	if again.Duplicate || again.ID == first.ID {
		t.Errorf("enqueue k1 after it finished: %+v; want a new job", again)
	}
	waitStatus(t, pool, again.ID, lease.StatusDone, 10*time.Second)
}

// runMeta mirrors worker/rundir.go's meta.json.
type runMeta struct {
	Table        string          `json:"table"`
	ID           int64           `json:"id"`
	Queue        string          `json:"queue"`
	Kind         string          `json:"kind"`
	RunID        string          `json:"run_id"`
	Attempt      int32           `json:"attempt"`
	MaxAttempts  int32           `json:"max_attempts"`
	LeaseVersion int64           `json:"lease_version"`
	OwnerToken   string          `json:"owner_token"`
	WorkerID     string          `json:"worker_id"`
	Payload      json.RawMessage `json:"payload"`
	StartedAt    time.Time       `json:"started_at"`
	FinishedAt   *time.Time      `json:"finished_at"`
	Outcome      string          `json:"outcome"`
	Status       string          `json:"status"`
	Applied      *bool           `json:"applied"`
	Error        string          `json:"error"`
}

func metaPath(dir string, id int64, runID uuid.UUID) string {
	return filepath.Join(dir, "job_runs", strconv.FormatInt(id, 10), runID.String(), "meta.json")
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, b)
	}
}

// logLines parses an attempt.log (one JSON record a line).
func logLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: line %q: %v", path, sc.Text(), err)
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRuntimeRunArchive(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	cfg := rtConfig("archivist")
	cfg.RunsDir = t.TempDir()
	logged := func(j *worker.Job) {
		j.Logger().Info("hello from the handler", "marker", fmt.Sprintf("job-%d-attempt-%d", j.ID, j.Attempt))
	}
	var results atomic.Int32
	startWorker(t, pool, cfg, worker.Options{OnResult: func(worker.Result) { results.Add(1) }}, map[string]worker.HandlerFunc{
		"archive.ok": func(ctx context.Context, j *worker.Job) error { logged(j); return nil },
		"archive.bad": func(ctx context.Context, j *worker.Job) error {
			logged(j)
			return worker.Permanent(fmt.Errorf("cannot do job %d", j.ID))
		},
		"archive.flaky": func(ctx context.Context, j *worker.Job) error {
			logged(j)
			if j.Attempt == 1 {
				return fmt.Errorf("flaky job %d fails once", j.ID)
			}
			return nil
		},
	})
	ok := enqueue(t, pool, jobq.Job{Kind: "archive.ok", Payload: map[string]string{"hello": "world"}})
	bad := enqueue(t, pool, jobq.Job{Kind: "archive.bad"})
	flaky := enqueue(t, pool, jobq.Job{Kind: "archive.flaky"})
	waitStatus(t, pool, ok, lease.StatusDone, 10*time.Second)
	waitStatus(t, pool, bad, lease.StatusFailed, 10*time.Second)
	waitStatus(t, pool, flaky, lease.StatusDone, 10*time.Second)
	// meta.json gets its outcome after the flush, just before OnResult.
	waitFor(t, 5*time.Second, "every result to be reported", func() bool { return results.Load() == 4 })

	type wantRun struct{ outcome, status, errPrefix string }
	cases := []struct {
		name string
		id   int64
		kind string
		want []wantRun
	}{
		{"done", ok, "archive.ok", []wantRun{{"done", "done", ""}}},
		{"permanent failure", bad, "archive.bad", []wantRun{{"failed", "failed", "permanent: cannot do job"}}},
		{"retry then done", flaky, "archive.flaky", []wantRun{{"retry", "ready", "flaky job"}, {"done", "done", ""}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			runs := runRows(t, pool, tc.id)
			if len(runs) != len(tc.want) {
				t.Fatalf("runs table has %v for job %d, want %d attempts", outcomes(runs), tc.id, len(tc.want))
			}
			entries, err := os.ReadDir(filepath.Join(cfg.RunsDir, "job_runs", strconv.FormatInt(tc.id, 10)))
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != len(runs) {
				t.Errorf("%d attempt directories for %d archived runs", len(entries), len(runs))
			}
			for i, run := range runs {
				w := tc.want[i]
				m := readMeta(t, cfg.RunsDir, tc.id, run.RunID)
				if m.Table != "job_runs" || m.ID != tc.id || m.Kind != tc.kind || m.Queue != "default" ||
					m.RunID != run.RunID.String() || m.Attempt != run.Attempt || m.Attempt != int32(i+1) ||
					m.WorkerID != run.WorkerID || m.LeaseVersion != run.LeaseVersion ||
					// a done row that moved is its last attempt, with no token in
					// the archive; meta.json still has the attempt's own
					(m.OwnerToken != run.OwnerToken.String() &&
						(run.OwnerToken != uuid.UUID{} || run.Outcome != "done" || m.OwnerToken == uuid.UUID{}.String() || uuid.Validate(m.OwnerToken) != nil)) {
					t.Errorf("attempt %d meta.json identity %+v does not match the runs row %+v", i+1, m, run)
				}
				if m.Outcome != w.outcome || m.Applied == nil || !*m.Applied || m.Status != w.status || m.FinishedAt == nil {
					t.Errorf("attempt %d meta.json: outcome %q applied %v status %q finished %v; want %s, applied, %s",
						i+1, m.Outcome, m.Applied, m.Status, m.FinishedAt, w.outcome, w.status)
				}
				if run.Outcome != w.outcome {
					t.Errorf("attempt %d runs.outcome %q, want %q", i+1, run.Outcome, w.outcome)
				}
				if m.Error != deref(run.Error) || (w.errPrefix == "") != (m.Error == "") || !strings.HasPrefix(m.Error, w.errPrefix) {
					t.Errorf("attempt %d error: meta %q, runs %q; want prefix %q", i+1, m.Error, deref(run.Error), w.errPrefix)
				}
				if tc.kind == "archive.ok" {
					var p map[string]string
					if err := json.Unmarshal(m.Payload, &p); err != nil || len(p) != 1 || p["hello"] != "world" {
						t.Errorf("meta payload %s, want {\"hello\":\"world\"}", m.Payload)
					}
				}
				lines := logLines(t, filepath.Join(filepath.Dir(metaPath(cfg.RunsDir, tc.id, run.RunID)), "attempt.log"))
				marker := fmt.Sprintf("job-%d-attempt-%d", tc.id, i+1)
				found := false
				for _, l := range lines {
					if l["msg"] == "hello from the handler" && l["marker"] == marker && l["run_id"] == run.RunID.String() && l["level"] == "INFO" {
						found = true
					}
				}
				if !found || len(lines) != 1 {
					t.Errorf("attempt %d attempt.log has %v; want exactly the handler's line with marker %s", i+1, lines, marker)
				}
			}
		})
	}
}

// listeners counts sessions of the pool's database whose last statement was a
// LISTEN (the worker's notification connection).
func listeners(t *testing.T, pool *pgxpool.Pool) int64 {
	return scalar[int64](t, pool, "select count(*) from pg_stat_activity where datname = current_database() and query ilike 'listen %'")
}

func TestRuntimeNotifyWakeup(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		poll     time.Duration
		pollOnly bool
	}{
		// Polling every 10s cannot explain a start within a second.
		{"LISTEN wakes an idle worker", 10 * time.Second, false},
		{"PollOnly polls", 100 * time.Millisecond, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := testdb.Pool(t)
			cfg := rtConfig("waker")
			cfg.Poll, cfg.PollOnly = tc.poll, tc.pollOnly
			started := make(chan int64, 100)
			startWorker(t, pool, cfg, worker.Options{}, map[string]worker.HandlerFunc{"wake": func(ctx context.Context, j *worker.Job) error {
				started <- j.ID
				return nil
			}})
			if tc.pollOnly {
				time.Sleep(300 * time.Millisecond)
				if n := listeners(t, pool); n != 0 {
					t.Fatalf("a PollOnly worker opened %d LISTEN sessions", n)
				}
			} else {
				waitFor(t, 5*time.Second, "the worker to LISTEN", func() bool { return listeners(t, pool) == 1 })
				time.Sleep(300 * time.Millisecond) // its first claims are over: it now sleeps on the 10s poll
			}
			c := jobq.New(jobq.Options{})
			var worst time.Duration
			for i := range 5 {
				res, err := c.Enqueue(context.Background(), pool, jobq.Job{Kind: "wake", Payload: map[string]int{"i": i}})
				if err != nil {
					t.Fatal(err)
				}
				t0 := time.Now()
				select {
				case id := <-started:
					if id != res.ID {
						t.Fatalf("started job %d, want %d", id, res.ID)
					}
				case <-time.After(3 * time.Second):
					t.Fatalf("job %d not started within 3s of its enqueue (poll %s, poll-only %v)", res.ID, cfg.Poll, cfg.PollOnly)
				}
				worst = max(worst, time.Since(t0))
				row := waitStatus(t, pool, res.ID, lease.StatusDone, 5*time.Second)
				// The same on the database clock: claimed within a second of
				// being created.
				if d := row.ClaimedAt.Sub(row.CreatedAt); d > time.Second {
					t.Errorf("job %d claimed %s after it was created", res.ID, d)
				}
				time.Sleep(50 * time.Millisecond) // past the NOTIFY debounce, and let the worker go idle
			}
			t.Logf("slowest enqueue-to-start %s (poll %s, poll-only %v)", worst.Round(time.Millisecond), cfg.Poll, cfg.PollOnly)
			if worst > time.Second {
				t.Errorf("a job took %s to start, want within 1s", worst)
			}
			if n := scalar[int64](t, pool, "select count(*) from workq.job_runs_all where status = 2"); n != 5 {
				t.Errorf("%d jobs done, want 5", n)
			}
		})
	}
}

// The listener's reconnect backoff starts over after every connection that
// got as far as LISTEN: a long-lived worker whose connection is cut now and
// then (failovers, pgbouncer restarts) reconnects in well under a second
// each time, instead of up to 5s once it has lost six connections in its life.
func TestRuntimeListenerBackoffResets(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	cfg := rtConfig("relisten")
	cfg.Poll = 10 * time.Second
	startWorker(t, pool, cfg, worker.Options{}, nil)
	listener := func() int32 {
		return scalar[int32](t, pool, "select coalesce(max(pid), 0) from pg_stat_activity where datname = current_database() and query ilike 'listen %'")
	}
	var worst time.Duration
	for i := range 10 {
		var pid int32
		waitFor(t, 10*time.Second, "a LISTEN session", func() bool { pid = listener(); return pid != 0 })
		if _, err := pool.Exec(context.Background(), "select pg_terminate_backend($1)", pid); err != nil {
			t.Fatal(err)
		}
		cut := time.Now()
		waitFor(t, 10*time.Second, "the listener to reconnect", func() bool { p := listener(); return p != 0 && p != pid })
		if i >= 6 { // past the point where a never-reset backoff reaches its 5s cap
			worst = max(worst, time.Since(cut))
		}
	}
	t.Logf("slowest of the last reconnects: %s", worst.Round(time.Millisecond))
	if worst > time.Second {
		t.Errorf("reconnect after the 7th-10th lost connection took up to %s, want under 1s", worst)
	}
}

// A producer claims beyond its free handler slots only what its handlers
// start within a few milliseconds at their observed pace: slow handlers hold
// no extra row back from other workers, however large the batch.
func TestRuntimeSlowHandlersHoldNoExtraRows(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	cfg := rtConfig("slow")
	cfg.Concurrency, cfg.Batch = 2, 50
	w := startWorker(t, pool, cfg, worker.Options{}, map[string]worker.HandlerFunc{
		"slow": func(ctx context.Context, j *worker.Job) error {
			select {
			case <-time.After(150 * time.Millisecond):
			case <-ctx.Done():
			}
			return nil
		}})
	var jobs []jobq.Job
	for range 12 {
		jobs = append(jobs, jobq.Job{Kind: "slow"})
	}
	if _, err := jobq.New(jobq.Options{}).EnqueueMany(context.Background(), pool, jobs); err != nil {
		t.Fatal(err)
	}
	// In flight: claimed and not yet returned by a handler, running or queued.
	var most atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			if n := w.Stats().InFlight; n > most.Load() {
				most.Store(n)
			}
		}
	}()
	waitFor(t, 20*time.Second, "every slow job to finish", func() bool {
		return scalar[int64](t, pool, "select count(*) from workq.job_runs_all where status = 2") == 12
	})
	close(stop)
	<-sampled
	if m := most.Load(); m > int64(cfg.Concurrency) {
		t.Errorf("up to %d items claimed at once with %d handlers of 150ms each; want at most %d", m, cfg.Concurrency, cfg.Concurrency)
	}
}
