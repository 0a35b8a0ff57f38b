package workq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
)

type blockArgs struct{ N int }

func (blockArgs) Kind() string { return "block" }

// blockWorker blocks until its context ends, then reports the cause and
// returns nil: a cancelled job must end cancelled whatever its handler
// returns.
type blockWorker struct {
	started chan int64
	ended   chan error // context.Cause
}

func (w *blockWorker) Work(ctx context.Context, job *workq.Job[blockArgs]) error {
	w.started <- job.ID
	<-ctx.Done()
	w.ended <- context.Cause(ctx)
	return nil
}

// startBlocking starts a Client that works blockArgs with cfg and returns
// the worker that reports its handler's start and end.
func startBlocking(t *testing.T, pool *pgxpool.Pool, cfg workq.Config) *blockWorker {
	t.Helper()
	w := &blockWorker{started: make(chan int64, 4), ended: make(chan error, 4)}
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.Worker[blockArgs](w))
	cfg.Workers, cfg.Maintenance = workers, workq.MaintenanceConfig{Disabled: true}
	c, err := workq.NewClient(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := c.Stop(sctx); err != nil {
			t.Error(err)
		}
	})
	return w
}

// waitStatus waits up to d for job id to reach want.
func waitStatus(t *testing.T, pool *pgxpool.Pool, id int64, want lease.Status, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		st, _, err := lease.New(pool, lease.JobRuns).Status(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if st == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d is %s after %s, want %s", id, st, d, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Cancelling a running job from another Client (another process, as far as
// the worker can tell) cancels its handler's context within about a second
// through the cancel notification, with context.Cause ErrCancelled, and the
// job ends cancelled although the handler returned nil; the attempt is
// archived as cancelled. The lease is long (heartbeats every 20 s), so only
// the notification can be that quick. With the worker polling only (no
// LISTEN: the notification is lost to it), its heartbeat finds the request
// within lease/3.
func TestClientCancelRunningJob(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    workq.Config
		within time.Duration
	}{
		{"notification", workq.Config{LeaseTTL: time.Minute}, time.Second},
		{"heartbeat, no LISTEN", workq.Config{LeaseTTL: 3 * time.Second, PollOnly: true, FetchPollInterval: 50 * time.Millisecond}, time.Second + 500*time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := testdb.Pool(t)
			ctx := context.Background()
			w := startBlocking(t, pool, tc.cfg)
			canceller, err := workq.NewClient(pool, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
			if err != nil {
				t.Fatal(err)
			}
			job, err := canceller.Enqueue(ctx, blockArgs{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			select {
			case id := <-w.started:
				if id != job.ID {
					t.Fatalf("started job %d, want %d", id, job.ID)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the job did not start")
			}
			sent := time.Now()
			res, err := canceller.Cancel(ctx, workq.JobRef(job.ID), nil)
			if err != nil || res != workq.CancelRequested {
				t.Fatalf("Cancel of a running job: %v, %v; want CancelRequested", res, err)
			}
			select {
			case cause := <-w.ended:
				if took := time.Since(sent); took > tc.within {
					t.Errorf("the handler's context ended %s after Cancel, want within %s", took, tc.within)
				}
				if !errors.Is(cause, workq.ErrCancelled) {
					t.Errorf("context.Cause = %v, want ErrCancelled", cause)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the handler's context was not cancelled")
			}
			waitStatus(t, pool, job.ID, lease.StatusCancelled, 5*time.Second)
			atts, err := admin.Attempts(ctx, pool, lease.JobRuns, job.ID)
			if err != nil || len(atts) != 1 || atts[0].Outcome != "cancelled" || atts[0].Attempt != 1 {
				t.Fatalf("archive: %+v (%v), want one attempt ended cancelled", atts, err)
			}
			// Finished: a second cancel changes nothing and says so.
			if _, err := canceller.Cancel(ctx, workq.JobRef(job.ID), nil); !errors.Is(err, workq.ErrFinished) {
				t.Fatalf("Cancel of a cancelled job: %v, want ErrFinished", err)
			}
		})
	}
}

// A job that is not running is cancelled at once and never runs; a
// finished one cannot be cancelled (ErrFinished, with its state); a missing
// one is ErrNotFound; a retry undoes a cancel.
func TestClientCancelReadyFinishedMissing(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	c, err := workq.NewClient(pool, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	job, err := c.Enqueue(ctx, blockArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := c.Cancel(ctx, workq.JobRef(job.ID), nil); err != nil || res != workq.CancelledNow {
		t.Fatalf("Cancel of a ready job: %v, %v; want CancelledNow", res, err)
	}
	waitStatus(t, pool, job.ID, lease.StatusCancelled, 0)
	_, err = c.Cancel(ctx, workq.JobRef(job.ID), nil)
	var fe *workq.FinishedError
	if !errors.As(err, &fe) || fe.State != "cancelled" || !errors.Is(err, workq.ErrFinished) {
		t.Fatalf("second Cancel: %v, want a FinishedError in state cancelled", err)
	}
	if _, err := c.Cancel(ctx, workq.JobRef(job.ID+1000), nil); !errors.Is(err, workq.ErrNotFound) {
		t.Fatalf("Cancel of a missing job: %v, want ErrNotFound", err)
	}
	if _, err := c.Cancel(ctx, workq.JobRef(0), nil); !errors.Is(err, workq.ErrInvalid) {
		t.Fatalf("Cancel(0): %v, want ErrInvalid", err)
	}
	r, err := admin.Retry(ctx, pool, lease.JobRuns, admin.Actor{Name: "test"}, job.ID)
	if err != nil || len(r.Applied) != 1 {
		t.Fatalf("retry of a cancelled job: %+v, %v", r, err)
	}
	waitStatus(t, pool, job.ID, lease.StatusReady, 0)

	// Done jobs stay done.
	if _, err := pool.Exec(ctx, "update workq.job_runs set status = 2, finished_at = now() where id = $1", job.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cancel(ctx, workq.JobRef(job.ID), nil); !errors.As(err, &fe) || fe.State != "done" {
		t.Fatalf("Cancel of a done job: %v, want a FinishedError in state done", err)
	}
}
