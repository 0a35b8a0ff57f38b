package workq_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/worker"
)

// StopArgs is the job of the Stop tests.
type StopArgs struct{}

func (StopArgs) Kind() string { return "stop.test" }

// jobRow is what the Stop tests read of a job run.
type jobRow struct {
	status   lease.Status
	owned    bool // owner_token is set
	attempts int
}

func readJob(t *testing.T, pool *pgxpool.Pool, id int64) jobRow {
	t.Helper()
	var r jobRow
	if err := pool.QueryRow(context.Background(),
		`select status, owner_token is not null, attempts from workq.job_runs_all where id = $1`, id).Scan(&r.status, &r.owned, &r.attempts); err != nil {
		t.Fatal(err)
	}
	return r
}

// Issue 28, item 3: Stop with a context that has already ended (what
// signal.NotifyContext gives after Ctrl-C) cuts the drain short, but still
// releases the lease of the job it was running before it returns, within
// a small fixed bound, and returns nil: the job is ready again at once,
// owner token cleared, its attempt given back (as at the end of a drain
// timeout), not left in progress until its lease expires. A handler that
// ignores its context does not hold Stop up; its late result is fenced
// off.
func TestClientStopWithEndedContextReleasesLeases(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		ignoresCtx    bool
		cancelledWhen string // "before" Stop is called, or "during" it
		sharded       bool   // a Client of NewShardedClient over two databases
	}{
		{name: "handler returns on cancel", cancelledWhen: "before"},
		{name: "handler ignores its context", ignoresCtx: true, cancelledWhen: "before"},
		{name: "context ends during the drain", cancelledWhen: "during"},
		{name: "sharded Client", cancelledWhen: "before", sharded: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := testdb.Pool(t)
			started := make(chan int64, 1)
			unblock := make(chan struct{})
			returned := make(chan error, 1)
			workers := workq.NewWorkers()
			workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[StopArgs]) error {
				started <- job.ID
				if tc.ignoresCtx {
					<-unblock
					returned <- nil
					return nil
				}
				<-ctx.Done()
				returned <- context.Cause(ctx)
				return ctx.Err()
			}))
			// A lease and a drain timeout far longer than the test: only
			// Stop can have released the job.
			cfg := workq.Config{Workers: workers,
				LeaseTTL: 5 * time.Minute, DrainTimeout: 5 * time.Minute, FetchPollInterval: 50 * time.Millisecond}
			var client *workq.Client
			var err error
			if tc.sharded {
				client, err = workq.NewShardedClient([]workq.Shard{{Name: "a", Pool: pool}, {Name: "b", Pool: testdb.Pool(t)}}, cfg)
			} else {
				client, err = workq.NewClient(pool, cfg)
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := client.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			stopped := false
			t.Cleanup(func() {
				close(unblock)
				if !stopped {
					_ = client.Stop(context.Background())
				}
			})
			res, err := client.Enqueue(context.Background(), StopArgs{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.sharded {
				sc, err := client.Shard(res.Shard)
				if err != nil {
					t.Fatal(err)
				}
				pool = sc.Pool()
			}
			select {
			case <-started:
			case <-time.After(30 * time.Second):
				t.Fatal("the handler did not start within 30s")
			}
			if r := readJob(t, pool, res.ID); r.status != lease.StatusInProgress || !r.owned || r.attempts != 1 {
				t.Fatalf("running job %+v, want in progress, owned, attempt 1", r)
			}

			ctx, cancel := context.WithCancel(context.Background())
			if tc.cancelledWhen == "before" {
				cancel()
			} else {
				time.AfterFunc(200*time.Millisecond, cancel)
			}
			began := time.Now()
			err = client.Stop(ctx)
			took := time.Since(began)
			stopped = true
			cancel()
			if err != nil {
				t.Errorf("Stop: %v; want nil: every lease was released", err)
			}
			// The drain is cut short, then StopBound; a second for the
			// maintenance's leadership and a loaded machine.
			if bound := worker.StopBound + 2*time.Second; took > bound {
				t.Errorf("Stop took %s, want at most %s once its context has ended", took, bound)
			}
			want := jobRow{status: lease.StatusReady, owned: false, attempts: 0}
			if r := readJob(t, pool, res.ID); r != want {
				t.Errorf("job after Stop returned: %+v, want %+v (ready, lease released, attempt given back)", r, want)
			}
			if tc.ignoresCtx {
				// The handler finishes after Stop: its success is not
				// applied (the release's owner token fenced it off).
				unblock <- struct{}{}
				select {
				case <-returned:
				case <-time.After(10 * time.Second):
					t.Fatal("the handler did not return")
				}
				time.Sleep(200 * time.Millisecond) // a completion, were there one, would be flushed by now
				if r := readJob(t, pool, res.ID); r != want {
					t.Errorf("job after the late handler returned: %+v, want %+v", r, want)
				}
				return
			}
			select {
			case cause := <-returned:
				if cause != worker.ErrShutdown {
					t.Errorf("handler's context cancelled with %v, want worker.ErrShutdown", cause)
				}
			default:
				t.Error("Stop returned before the handler that honours its context returned")
			}
		})
	}
}
