package worker_test

// Regression tests of the runtime's lease safety (issue 7, defects 1, 2 and
// 7): a finished attempt keeps its lease until its completion commits, a
// worker cut off from the database stops its handlers before their leases
// can expire, and Stop is bounded whatever the database does.

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/reaper"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/testutil"
	"github.com/workq/workq/internal/worker"
)

// proxiedPool opens a pool on a new database through a proxy the test can
// cut, and a direct pool on the same database for the test's own reads.
func proxiedPool(t *testing.T) (through, direct *pgxpool.Pool, px *testutil.Proxy) {
	t.Helper()
	url := testdb.URL(t)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	host := cfg.ConnConfig.Host
	if strings.HasPrefix(host, "/") {
		t.Fatalf("this test cuts a TCP connection; the test server is on a Unix socket (%s): set TEST_DATABASE_URL to a TCP address", host)
	}
	px = testutil.NewProxy(t, net.JoinHostPort(host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	phost, pport, _ := net.SplitHostPort(px.Addr())
	port, _ := strconv.Atoi(pport)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Fallbacks = phost, uint16(port), nil
	cfg.MaxConns = 20
	through, err = pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Restore before closing: closing a connection the proxy holds silent waits
	// for pgxpool's 15s terminate timeout.
	t.Cleanup(func() { px.Restore(); through.Close() })
	direct, err = pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(direct.Close)
	return through, direct, px
}

// Defect 1: an attempt that finished but waits for its completion flush is
// still heartbeated. With a 1s lease, a 1s flush interval and a 500ms
// handler, the lease would lapse before the flush; a reaper running all the
// while would then archive the successful attempt as expired and, with one
// attempt allowed, fail the job.
func TestRuntimePendingCompletionKeepsItsLease(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	cfg := rtConfig("pending")
	cfg.Lease = time.Second
	cfg.FlushInterval = time.Second
	r, err := reaper.New(pool, 100*time.Millisecond, 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stopReaper := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = r.Run(ctx) }()
	defer func() { stopReaper(); wg.Wait() }()

	w := startWorker(t, pool, cfg, worker.Options{}, map[string]worker.HandlerFunc{
		"half-second": func(ctx context.Context, j *worker.Job) error {
			select {
			case <-time.After(500 * time.Millisecond):
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}})
	id := enqueue(t, pool, jobq.Job{Kind: "half-second", MaxAttempts: 1})
	row := waitStatus(t, pool, id, lease.StatusDone, 10*time.Second)
	if row.Attempts != 1 {
		t.Errorf("attempts %d, want 1", row.Attempts)
	}
	// A claim whose result came back after its client-side timeout (a loaded
	// machine) is released by token without using an attempt and archived as
	// released; that attempt never ran. What must not happen is an expired
	// lease: exactly one attempt, done.
	runs, released := ranRuns(runRows(t, pool, id))
	if ran := outcomes(runs); len(ran) != 1 || ran[0] != "done" {
		t.Errorf("runs that ran %v, want [done]: the finished attempt's lease lapsed before its flush", ran)
	}
	// The done row is visible before the worker counts it (see settle).
	st := statsWhen(w, func(st worker.Stats) bool { return st.ClaimsReleased == released && st.Done == 1 })
	if st.ClaimsReleased != released {
		t.Errorf("%d released runs archived, but the worker released %d rows of lost claims", released, st.ClaimsReleased)
	}
	if st.Done != 1 || st.LeaseLost != 0 {
		t.Errorf("stats %+v, want done 1 and no lost lease", st)
	}
}

// Defect 2: a worker cut off from the database cancels its handler before
// the lease can expire by the database's clock, so no other worker can
// claim the item while this one still runs it.
func TestRuntimeCutOffWorkerStopsBeforeItsLeaseExpires(t *testing.T) {
	t.Parallel()
	pool, direct, px := proxiedPool(t)
	cfg := rtConfig("cut-off")
	cfg.Lease = 4 * time.Second
	cfg.DrainTimeout = 100 * time.Millisecond
	type cancelled struct {
		cause      error
		stillValid bool // the database's lease had not expired at that moment
		after      time.Duration
	}
	started := newSignal[int64]()
	done := newSignal[cancelled]()
	var cutAt time.Time
	var cutMu sync.Mutex
	w := startWorker(t, pool, cfg, worker.Options{}, map[string]worker.HandlerFunc{
		"block": func(ctx context.Context, j *worker.Job) error {
			started.fire(j.ID)
			<-ctx.Done()
			c := cancelled{cause: context.Cause(ctx)}
			cutMu.Lock()
			c.after = time.Since(cutAt)
			cutMu.Unlock()
			err := direct.QueryRow(context.Background(),
				"select locked_until > clock_timestamp() from workq.job_runs_all where id = $1", j.ID).Scan(&c.stillValid)
			if err != nil {
				c.cause = err
			}
			done.fire(c)
			return nil
		}})
	id := enqueue(t, direct, jobq.Job{Kind: "block"})
	if got := started.wait(t, 10*time.Second, "the handler to start"); got != id {
		t.Fatalf("started %d, want %d", got, id)
	}
	cutMu.Lock()
	cutAt = time.Now()
	px.Cut()
	cutMu.Unlock()
	got := done.wait(t, 2*cfg.Lease, "the cut-off handler to be cancelled")
	t.Logf("cancelled %s after the cut", got.after.Round(time.Millisecond))
	if !errors.Is(got.cause, worker.ErrLeaseLost) {
		t.Fatalf("handler context cause %s, want ErrLeaseLost", causeName(got.cause))
	}
	if !got.stillValid {
		t.Errorf("the handler was cancelled %s after the cut, when its lease had already expired in the database: another worker could have claimed the item", got.after)
	}
	if got.after >= cfg.Lease {
		t.Errorf("cancelled %s after the cut, want within the lease (%s)", got.after, cfg.Lease)
	}
	if st := w.Stats(); st.LeaseLost != 1 {
		t.Errorf("stats %+v, want lease_lost 1", st)
	}
	px.Restore()
}

// Defect 7: Stop returns within the drain timeout plus StopBound even when
// the database stops answering with a handler running that ignores its
// context, a completion waiting for its flush, and the claim loop,
// heartbeats and listener all waiting on the network.
func TestRuntimeStopIsBoundedWhenTheDatabaseIsGone(t *testing.T) {
	t.Parallel()
	pool, direct, px := proxiedPool(t)
	cfg := rtConfig("stop-bound")
	cfg.DrainTimeout = time.Second
	cfg.FlushInterval = time.Second // the quick job's completion waits in the completer when the cut comes
	blocked := newSignal[int64]()
	quick := newSignal[int64]()
	unblock := make(chan struct{})
	t.Cleanup(func() { close(unblock) })
	w := startWorker(t, pool, cfg, worker.Options{}, map[string]worker.HandlerFunc{
		// Ignores its context: Stop cannot wait for it.
		"block": func(ctx context.Context, j *worker.Job) error {
			blocked.fire(j.ID)
			<-unblock
			return nil
		},
		"quick": func(ctx context.Context, j *worker.Job) error { quick.fire(j.ID); return nil },
	})
	enqueue(t, direct, jobq.Job{Kind: "block"})
	blocked.wait(t, 10*time.Second, "the blocking handler to start")
	enqueue(t, direct, jobq.Job{Kind: "quick"})
	quick.wait(t, 10*time.Second, "the quick handler to run")
	px.Cut()
	time.Sleep(100 * time.Millisecond) // let the claim loop and heartbeat reach the dead network
	took := w.stop(t, time.Minute)
	bound := cfg.DrainTimeout + worker.StopBound
	t.Logf("Stop took %s (bound %s)", took.Round(time.Millisecond), bound)
	if took > bound+time.Second {
		t.Errorf("Stop took %s with the database unreachable, want at most the drain timeout + StopBound (%s)", took, bound)
	}
	if st := w.Stats(); st.Unflushed == 0 {
		t.Errorf("stats %+v: want the completions that could not be flushed counted as unflushed", st)
	}
	px.Restore() // so that the pools close at once
}

// A heartbeat that finds a held row locked by another statement (here a
// transaction of the test; in production a heartbeat that timed out on the
// client while its statement still runs, or a completion) does not know the
// lease is lost and must not cancel the handler: the local deadline covers
// the case where nothing confirms the lease in time.
//
// The worker tolerates one heartbeat that does not extend the lease (the
// local deadline, lease.LocalTTL, is 0.9 lease; heartbeats come every
// lease/3), not two in a row. So the test holds the lock across exactly one
// heartbeat, observed through a tracer on the worker's pool rather than
// guessed from sleeps: a fixed lock window of half the lease covered two
// heartbeats whenever it began in the second half of an interval, and lost
// the lease.
func TestRuntimeLockedRowIsNotALostLease(t *testing.T) {
	t.Parallel()
	beats := newHeartbeatTracer()
	pool := tracedPool(t, beats)
	cfg := rtConfig("locked-row")
	cfg.Lease = 3 * time.Second // heartbeats every second
	release := make(chan struct{})
	started := newSignal[int64]()
	cause := make(chan error, 1)
	w := startWorker(t, pool, cfg, worker.Options{}, map[string]worker.HandlerFunc{
		"block": func(ctx context.Context, j *worker.Job) error {
			started.fire(j.ID)
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				cause <- context.Cause(ctx)
				return context.Cause(ctx)
			}
		}})
	id := enqueue(t, pool, jobq.Job{Kind: "block"})
	started.wait(t, 10*time.Second, "the handler to start")
	ctx := context.Background()
	lockedUntil := func() time.Time {
		t.Helper()
		var u time.Time
		if err := pool.QueryRow(ctx, "select locked_until from workq.job_runs_all where id = $1", id).Scan(&u); err != nil {
			t.Fatal(err)
		}
		return u
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "select 1 from workq.job_runs where id = $1 for update", id); err != nil {
		t.Fatal(err)
	}
	locked := time.Now()
	before := lockedUntil() // read by another connection: a plain select does not wait for the lock
	// One heartbeat sent after the lock was taken, so it met the locked row.
	beats.next(t, locked, 10*time.Second)
	if got := lockedUntil(); !got.Equal(before) {
		t.Fatalf("locked_until moved from %s to %s while the test held the row's lock", before, got)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// The next heartbeat extends the lease again, within the local deadline.
	beats.next(t, time.Now(), 10*time.Second)
	if got := lockedUntil(); !got.After(before) {
		t.Errorf("locked_until %s after the heartbeat that followed the lock, want later than %s: the lease was not extended again", got, before)
	}
	select {
	case c := <-cause:
		t.Fatalf("handler cancelled (%s) because its row was locked by another statement", causeName(c))
	default:
	}
	close(release)
	waitStatus(t, pool, id, lease.StatusDone, 10*time.Second)
	if st := w.Stats(); st.LeaseLost != 0 {
		t.Errorf("stats %+v, want no lost lease", st)
	}
}

// tracedPool is a pool on a new database whose queries tr observes.
func tracedPool(t *testing.T, tr pgx.QueryTracer) *pgxpool.Pool {
	t.Helper()
	return testdb.PoolTraced(t, tr)
}

// heartbeatTracer records when each heartbeat statement that completed was
// sent.
type heartbeatTracer struct {
	mu    sync.Mutex
	sent  []time.Time   // of the heartbeats that completed, in completion order
	ended chan struct{} // a heartbeat completed (capacity 1)
}

func newHeartbeatTracer() *heartbeatTracer { return &heartbeatTracer{ended: make(chan struct{}, 1)} }

type heartbeatSent struct{}

func (h *heartbeatTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.HasPrefix(d.SQL, "-- name: LeaseHeartbeat ") {
		return context.WithValue(ctx, heartbeatSent{}, time.Now())
	}
	return ctx
}

func (h *heartbeatTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	sent, ok := ctx.Value(heartbeatSent{}).(time.Time)
	if !ok {
		return
	}
	h.mu.Lock()
	h.sent = append(h.sent, sent)
	h.mu.Unlock()
	select {
	case h.ended <- struct{}{}:
	default:
	}
}

// next waits for a heartbeat sent after after to complete.
func (h *heartbeatTracer) next(t *testing.T, after time.Time, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		h.mu.Lock()
		for _, s := range h.sent {
			if s.After(after) {
				h.mu.Unlock()
				return
			}
		}
		h.mu.Unlock()
		select {
		case <-h.ended:
		case <-deadline:
			t.Fatalf("no heartbeat sent after %s completed within %s", after.Format(time.StampMilli), timeout)
		}
	}
}

// A claim that times out on the client while its statement waits on the
// server (here for the lock of its queue's limit row, held by the test) is
// not over on the server: a client that gives up does not stop it, and it
// would commit once the lock is free, leaving rows under a token nobody
// runs. pgx sends a cancel request when it abandons the connection, which
// usually ends it; the worker does not rely on that (a cancel request can
// be lost or arrive after the commit): it cancels the statement on its
// server process itself and releases by token only once that process is
// done. Either way the job runs on its first attempt.
func TestRuntimeTimedOutClaimIsSettledBeforeItsRelease(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	ctx := context.Background()
	if err := lease.SetLimit(ctx, pool, lease.JobRuns, "limited", 5); err != nil {
		t.Fatal(err)
	}
	id := enqueue(t, pool, jobq.Job{Queue: "limited", Kind: "ok"})
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "select 1 from workq.queue_limits where queue = 'limited' for update"); err != nil {
		t.Fatal(err)
	}
	cfg := rtConfig("settle", "limited")
	cfg.Lease = 2 * time.Second // claims time out after 1s
	w := startWorker(t, pool, cfg, worker.Options{}, map[string]worker.HandlerFunc{
		"ok": func(ctx context.Context, j *worker.Job) error { return nil },
	})
	waitFor(t, 10*time.Second, "a claim to time out", func() bool { return w.Stats().ClaimErrors > 0 })
	if err := tx.Commit(ctx); err != nil { // the lock frees: a claim still running would commit now
		t.Fatal(err)
	}
	row := waitStatus(t, pool, id, lease.StatusDone, 10*time.Second)
	if row.Attempts != 1 {
		t.Errorf("attempts %d, want 1: a timed-out claim committed after its release and the lease had to expire", row.Attempts)
	}
	for _, o := range outcomes(runRows(t, pool, id)) {
		if o == "expired" {
			t.Errorf("runs %v: an attempt expired under a claim nobody ran", outcomes(runRows(t, pool, id)))
		}
	}
}
