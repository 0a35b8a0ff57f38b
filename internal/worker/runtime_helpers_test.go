package worker_test

// Helpers of the worker runtime integration tests (runtime_test.go): start a
// real Worker on a per-test database, read job_runs and runs back, wait for
// database conditions.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workq/workq/internal/jobq"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/config"
	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/worker"
)

// rtConfig is a valid worker config tuned for tests: fast polling, small
// backoff, modest concurrency.
func rtConfig(workerID string, queues ...string) config.Config {
	cfg := config.Default()
	cfg.WorkerID = workerID
	if len(queues) > 0 {
		cfg.Queues = queues
	}
	cfg.Concurrency = 10
	cfg.Batch = 10
	cfg.Lease = 5 * time.Second
	cfg.Poll = 50 * time.Millisecond
	cfg.BackoffBase = 20 * time.Millisecond
	cfg.BackoffCap = 100 * time.Millisecond
	cfg.DrainTimeout = 2 * time.Second
	return cfg
}

// rtWorker is a Worker running on its own goroutine.
type rtWorker struct {
	*worker.Worker
	cancel  context.CancelFunc
	done    chan error
	mu      sync.Mutex
	stopped bool
}

// startWorker registers handlers and runs a worker until stop (or the end of
// the test).
func startWorker(t *testing.T, pool *pgxpool.Pool, cfg config.Config, o worker.Options, handlers map[string]worker.HandlerFunc) *rtWorker {
	t.Helper()
	w, err := worker.New(pool, cfg.Worker(), o)
	if err != nil {
		t.Fatalf("worker.New: %v", err)
	}
	for kind, h := range handlers {
		if err := w.Register(kind, h); err != nil {
			t.Fatalf("Register(%q): %v", kind, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	rw := &rtWorker{Worker: w, cancel: cancel, done: make(chan error, 1)}
	go func() { rw.done <- w.Run(ctx) }()
	t.Cleanup(func() { rw.stop(t, 30*time.Second) })
	return rw
}

// stop cancels Run and waits for it to return; it returns how long that took.
func (w *rtWorker) stop(t *testing.T, timeout time.Duration) time.Duration {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return 0
	}
	w.stopped = true
	start := time.Now()
	w.cancel()
	select {
	case err := <-w.done:
		if err != nil {
			t.Errorf("worker Run returned %v", err)
		}
	case <-time.After(timeout):
		t.Errorf("worker Run did not return within %s of cancellation", timeout)
	}
	return time.Since(start)
}

// enqueue adds one job on the pool and returns its id.
func enqueue(t *testing.T, pool *pgxpool.Pool, j jobq.Job) int64 {
	t.Helper()
	res, err := jobq.New(jobq.Options{}).Enqueue(context.Background(), pool, j)
	if err != nil {
		t.Fatalf("enqueue %+v: %v", j, err)
	}
	return res.ID
}

// jobRow reads one job_runs row.
func jobRow(t *testing.T, db gen.DBTX, id int64) gen.JobRun {
	t.Helper()
	r, err := gen.New(db).JobRunsGet(context.Background(), id)
	if err != nil {
		t.Fatalf("read job_runs %d: %v", id, err)
	}
	return r
}

// jobState reads one job_runs row and its archived attempts from one
// snapshot (a repeatable-read transaction). The completion statement updates
// the row and archives the attempt together; two separate reads can see the
// attempt archived by a commit that landed after the row was read, i.e. a
// row still in progress next to the run that ended it.
func jobState(t *testing.T, pool *pgxpool.Pool, id int64) (gen.JobRun, []gen.Run) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		t.Fatalf("begin snapshot of job %d: %v", id, err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	return jobRow(t, tx, id), runRows(t, tx, id)
}

// runRows reads the archived attempts of one job run, in the order they ended.
func runRows(t *testing.T, db gen.DBTX, id int64) []gen.Run {
	t.Helper()
	rows, err := db.Query(context.Background(), `select run_id, work_table, item_id, queue, attempt, lease_version,
		coalesce(owner_token, '00000000-0000-0000-0000-000000000000'), worker_id, started_at, finished_at, outcome, error
		from workq.runs_all where work_table = 'job_runs' and item_id = $1 order by finished_at, started_at`, id)
	if err != nil {
		t.Fatalf("read runs of %d: %v", id, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[gen.Run])
	if err != nil {
		t.Fatalf("read runs of %d: %v", id, err)
	}
	return out
}

func outcomes(runs []gen.Run) []string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = r.Outcome
	}
	return out
}

// ranRuns leaves out the runs archived as released: claims whose result came
// back after their client-side timeout (a loaded machine) are released by
// token without using an attempt, and their handler never ran. It returns
// the runs that did run and how many were left out, which the caller checks
// against the worker's ClaimsReleased.
func ranRuns(runs []gen.Run) (ran []gen.Run, released int64) {
	for _, r := range runs {
		if r.Outcome == "released" {
			released++
			continue
		}
		ran = append(ran, r)
	}
	return ran, released
}

func attemptsOf(runs []gen.Run) []int32 {
	out := make([]int32, len(runs))
	for i, r := range runs {
		out[i] = r.Attempt
	}
	return out
}

// scalar runs a one-value query.
func scalar[T any](t *testing.T, pool *pgxpool.Pool, sql string, args ...any) T {
	t.Helper()
	var v T
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

// waitFor polls cond every 20ms until it holds or timeout passes; it returns
// how long it waited.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		if cond() {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// settle polls cond every 20ms until it holds or 10s pass, and reports
// whether it held. It is for a worker's in-process counts, which trail the
// database commit the test observed (a completion is counted once its
// statement has returned, a released claim once its release has): the
// caller then asserts exactly as before, on a fresh read.
func settle(cond func() bool) bool {
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// statsWhen is w's Stats once cond holds of them, or after 10s the last
// snapshot (for the caller's assertion to report): see settle.
func statsWhen(w interface{ Stats() worker.Stats }, cond func(worker.Stats) bool) worker.Stats {
	var st worker.Stats
	settle(func() bool { st = w.Stats(); return cond(st) })
	return st
}

// waitStatus waits until job id has status want and returns the row.
func waitStatus(t *testing.T, pool *pgxpool.Pool, id int64, want lease.Status, timeout time.Duration) gen.JobRun {
	t.Helper()
	var row gen.JobRun
	waitFor(t, timeout, fmt.Sprintf("job %d to be %s", id, want), func() bool {
		row = jobRow(t, pool, id)
		return lease.Status(row.Status) == want
	})
	return row
}

// waitClaimedBy waits until job id is in progress under workerID.
func waitClaimedBy(t *testing.T, pool *pgxpool.Pool, id int64, workerID string, timeout time.Duration) gen.JobRun {
	t.Helper()
	var row gen.JobRun
	waitFor(t, timeout, fmt.Sprintf("job %d in progress on %s", id, workerID), func() bool {
		row = jobRow(t, pool, id)
		return lease.Status(row.Status) == lease.StatusInProgress && deref(row.ClaimedBy) == workerID
	})
	return row
}

// mustRunID is the run id of job id's attempt under leaseVersion.
func mustRunID(t *testing.T, id, leaseVersion int64) uuid.UUID {
	t.Helper()
	u, err := lease.RunID(lease.JobRuns, id, leaseVersion)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// signal is a one-shot, value-carrying event set from a handler goroutine.
type signal[T any] struct {
	once sync.Once
	ch   chan T
}

func newSignal[T any]() *signal[T] { return &signal[T]{ch: make(chan T, 1)} }

func (s *signal[T]) fire(v T) { s.once.Do(func() { s.ch <- v; close(s.ch) }) }

func (s *signal[T]) wait(t *testing.T, timeout time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-s.ch:
		return v
	case <-time.After(timeout):
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
	var zero T
	return zero
}

// causeName names a context cancellation cause for messages.
func causeName(err error) string {
	switch {
	case err == nil:
		return "<nil>"
	case errors.Is(err, worker.ErrLeaseLost):
		return "ErrLeaseLost"
	case errors.Is(err, worker.ErrShutdown):
		return "ErrShutdown"
	case errors.Is(err, context.DeadlineExceeded):
		return "DeadlineExceeded"
	}
	return strings.TrimSpace(err.Error())
}
