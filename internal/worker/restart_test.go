package worker_test

// Issue 18, item 12: a database restart or failover shorter than the lease.
// The outage is real: the test database stops accepting connections (ALTER
// DATABASE ... ALLOW_CONNECTIONS false) and every session on it but the
// test's own is terminated, which is what the worker sees of a restarting
// server (its connections break, new ones are refused), until the test lets
// connections in again.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/testutil"
	"github.com/workq/workq/internal/worker"
)

// dbOutage is a switch for the outage of one test database.
type dbOutage struct {
	t    *testing.T
	name string // the database taken down
	down atomic.Bool
	mu   sync.Mutex
	conn *pgx.Conn // the test's session, on the server's postgres database; under mu
}

// newOutagePool returns a pool on a new database, for the worker, and the
// switch that takes that database down and up.
func newOutagePool(t *testing.T) (*pgxpool.Pool, *dbOutage) {
	t.Helper()
	url := testdb.URL(t)
	ctx := context.Background()
	cc, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	name := cc.Database
	cc.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		t.Fatalf("connect to the server's postgres database: %v", err)
	}
	o := &dbOutage{t: t, conn: conn, name: name}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		o.Up() // before the pool closes and the database is dropped
		pool.Close()
		o.mu.Lock()
		defer o.mu.Unlock()
		_ = conn.Close(ctx)
	})
	return pool, o
}

// Down refuses new connections to the database and terminates every session
// on it.
func (o *dbOutage) Down() {
	o.mu.Lock()
	defer o.mu.Unlock()
	ctx := context.Background()
	if _, err := o.conn.Exec(ctx, "alter database "+pgx.Identifier{o.name}.Sanitize()+" with allow_connections false"); err != nil {
		o.t.Errorf("outage: %v", err)
		return
	}
	o.down.Store(true)
	if _, err := o.conn.Exec(ctx, `select pg_terminate_backend(pid) from pg_stat_activity where datname = $1`, o.name); err != nil {
		o.t.Errorf("outage: terminate the sessions: %v", err)
	}
}

// Up lets connections in again.
func (o *dbOutage) Up() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.down.Load() {
		return
	}
	_, err := o.conn.Exec(context.Background(), "alter database "+pgx.Identifier{o.name}.Sanitize()+" with allow_connections true")
	if err != nil {
		o.t.Errorf("end the outage: %v", err)
		return
	}
	o.down.Store(false)
}

// A job's handler finishes just as the database goes away for 3 s, longer
// than the ~1.6 s a completion flush used to retry, shorter than the lease
// deadline (LocalTTL of 5 s: 4.5 s). The flush keeps retrying until the
// database is back and applies the completion: the job is done on its one
// attempt, the worker reports it applied, nothing is left to the reaper,
// and the handler does not run again.
func TestRuntimeCompletionOutlivesADatabaseOutageShorterThanTheLease(t *testing.T) {
	t.Parallel()
	pool, outage := newOutagePool(t)
	cfg := rtConfig("flush-outage")
	cfg.Lease = 5 * time.Second
	const downFor = 3 * time.Second
	var runs atomic.Int32
	results := make(chan worker.Result, 4)
	id := enqueue(t, pool, jobq.Job{Kind: "once"})
	w := startWorker(t, pool, cfg, worker.Options{OnResult: func(r worker.Result) { results <- r }},
		map[string]worker.HandlerFunc{
			"once": func(ctx context.Context, j *worker.Job) error {
				if runs.Add(1) == 1 {
					outage.Down()
					time.AfterFunc(downFor, outage.Up)
				}
				return nil
			},
		})
	var r worker.Result
	select {
	case r = <-results:
	case <-time.After(30 * time.Second):
		t.Fatal("no result within 30s")
	}
	if r.Item.ID != id || !r.Applied || r.Status != lease.StatusDone {
		t.Errorf("result %+v; want job %d applied, done (the flush gave up during the outage?)", r, id)
	}
	if took := r.Finished.Sub(r.Started); took > downFor {
		t.Errorf("the handler took %s, want it to return at once", took)
	}
	waitFor(t, 10*time.Second, "the outage to end", func() bool { return !outage.down.Load() })
	waitStatus(t, pool, id, lease.StatusDone, 30*time.Second)
	if got := outcomes(runRows(t, pool, id)); len(got) != 1 || got[0] != "done" {
		t.Errorf("runs %v, want [done]", got)
	}
	st := w.Stats()
	if st.Unflushed != 0 || st.LeaseLost != 0 || st.Done != 1 || st.FlushErrors == 0 {
		t.Errorf("stats %+v; want unflushed 0, lease_lost 0, done 1 and the outage's flush errors", st)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want once", n)
	}
}

// While the database refuses connections, the retries of a completion whose
// lease deadline is far away (30 s lease) do not hold Stop past its bound:
// Stop returns within the drain timeout plus StopBound, and the completion
// is counted unflushed.
func TestRuntimeStopIsBoundedWhileTheDatabaseRefusesConnections(t *testing.T) {
	t.Parallel()
	pool, outage := newOutagePool(t)
	cfg := rtConfig("stop-refused")
	cfg.Lease = 30 * time.Second
	cfg.DrainTimeout = time.Second
	finished := newSignal[int64]()
	enqueue(t, pool, jobq.Job{Kind: "quick"})
	w := startWorker(t, pool, cfg, worker.Options{}, map[string]worker.HandlerFunc{
		"quick": func(ctx context.Context, j *worker.Job) error {
			outage.Down()
			finished.fire(j.ID)
			return nil
		},
	})
	finished.wait(t, 10*time.Second, "the handler to run")
	time.Sleep(200 * time.Millisecond) // the flush is failing and retrying
	took := w.stop(t, time.Minute)
	bound := cfg.DrainTimeout + worker.StopBound
	t.Logf("Stop took %s (bound %s)", took.Round(time.Millisecond), bound)
	if took > bound+time.Second {
		t.Errorf("Stop took %s with the database refusing connections, want at most the drain timeout + StopBound (%s)", took, bound)
	}
	if st := w.Stats(); st.Unflushed != 1 {
		t.Errorf("stats %+v: want the completion that could not be flushed counted as unflushed", st)
	}
}

// Issue 18, item 13: a running worker whose schema disappears (dropped,
// rolled back, a restore of an older dump) says so once, as one error that
// names the fix, instead of a warning with the raw SQL error at every claim,
// and keeps retrying quietly; once the schema is back it claims again.
func TestRuntimeSchemaThatDisappearsIsReportedOnce(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	var logs testutil.Buffer
	cfg := rtConfig("schema-gone")
	ran := make(chan int64, 4)
	startWorker(t, pool, cfg, worker.Options{Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))},
		map[string]worker.HandlerFunc{"ok": func(_ context.Context, j *worker.Job) error { ran <- j.ID; return nil }})
	exec := func(sql string) {
		t.Helper()
		if _, err := pool.Exec(context.Background(), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`alter table workq.job_runs rename to job_runs_elsewhere`)
	renamed := true
	t.Cleanup(func() {
		if renamed {
			exec(`alter table workq.job_runs_elsewhere rename to job_runs`)
		}
	})
	// Long enough for the claim loop (polling every 50ms), the reclaim
	// (every second) and the claim backoff to fail many times over.
	time.Sleep(4 * time.Second)
	var errs, warns []map[string]any
	for _, r := range logs.Records() {
		switch r["level"] {
		case "ERROR":
			errs = append(errs, r)
		case "WARN":
			warns = append(warns, r)
		}
	}
	if len(errs) != 1 || !strings.Contains(fmt.Sprint(errs[0]["msg"]), "run 'workq migrate up'") ||
		!strings.Contains(fmt.Sprint(errs[0]["err"]), "42P01") {
		t.Errorf("error lines %v; want exactly one, saying to run 'workq migrate up', with the undefined_table error", errs)
	}
	if len(warns) != 0 {
		t.Errorf("%d warnings while the schema was missing, want none (said once as an error): %v", len(warns), warns)
	}
	exec(`alter table workq.job_runs_elsewhere rename to job_runs`)
	renamed = false
	id := enqueue(t, pool, jobq.Job{Kind: "ok"})
	select {
	case got := <-ran:
		if got != id {
			t.Errorf("ran job %d, want %d", got, id)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the worker did not claim within 15s of the schema coming back")
	}
	// The claim loop logs it after handing the job to a handler.
	back := func() int {
		n := 0
		for _, r := range logs.Records() {
			if r["msg"] == "workq's schema is there again; claiming" {
				n++
			}
		}
		return n
	}
	waitFor(t, 10*time.Second, "the 'schema is there again' line", func() bool { return back() > 0 })
	if n := back(); n != 1 {
		t.Errorf("%d 'schema is there again' lines, want 1; the log:\n%s", n, logs.String())
	}
}

// Issue 28, item 3: Stop with a context already cancelled (Ctrl-C's) cuts
// the drain short but still releases the running job's lease before it
// returns, within StopBound: nil when the release was applied; when the
// database refuses connections, an error wrapping the context's, returned
// once the stop has given up on the release (counted unflushed), not at
// once with the release still to come.
func TestRuntimeStopWithCancelledContextReleasesBeforeReturning(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		outage bool
	}{
		{name: "database up"},
		{name: "database refusing connections", outage: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool, outage := newOutagePool(t)
			cfg := rtConfig("stop-cancelled")
			cfg.Lease = 5 * time.Minute
			cfg.DrainTimeout = 5 * time.Minute
			w, err := worker.New(pool, cfg.Worker(), worker.Options{})
			if err != nil {
				t.Fatal(err)
			}
			running := newSignal[int64]()
			if err := w.Register("block", func(ctx context.Context, j *worker.Job) error {
				running.fire(j.ID)
				<-ctx.Done()
				return ctx.Err()
			}); err != nil {
				t.Fatal(err)
			}
			id := enqueue(t, pool, jobq.Job{Kind: "block"})
			if err := w.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			running.wait(t, 30*time.Second, "the handler to start")
			if tc.outage {
				outage.Down()
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			began := time.Now()
			err = w.Stop(ctx)
			took := time.Since(began)
			if bound := worker.StopBound + time.Second; took > bound {
				t.Errorf("Stop took %s, want at most %s once its context has ended", took, bound)
			}
			st := w.Stats()
			if !tc.outage {
				if err != nil {
					t.Errorf("Stop: %v, want nil: the lease was released", err)
				}
				if st.Released != 1 || st.Unflushed != 0 {
					t.Errorf("stats %+v, want the job released", st)
				}
				var status lease.Status
				var attempts int
				var owned bool
				if err := pool.QueryRow(context.Background(), `select status, attempts, owner_token is not null from workq.job_runs_all where id = $1`, id).
					Scan(&status, &attempts, &owned); err != nil {
					t.Fatal(err)
				}
				if status != lease.StatusReady || attempts != 0 || owned {
					t.Errorf("job after Stop: status %s, attempts %d, owned %t; want ready, 0 (given back), not owned", status, attempts, owned)
				}
				return
			}
			if !errors.Is(err, context.Canceled) || !strings.Contains(fmt.Sprint(err), "could not be flushed") {
				t.Errorf("Stop: %v, want an error wrapping context.Canceled saying the release could not be flushed", err)
			}
			if st.Unflushed != 1 {
				t.Errorf("stats %+v, want the release that could not be flushed counted as unflushed when Stop returned", st)
			}
		})
	}
}
