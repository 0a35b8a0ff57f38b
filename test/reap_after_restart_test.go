package test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/pgembed"
)

// Issue 32, goal 5: a lease that ran out while the server was down (a
// restart longer than the lease) is not reaped at once when the server is
// back: its owner may have finished the handler and be about to write the
// completion, which its token still fences. Leases waits 10 s after the
// server started; one that ran out after the start is reaped at once.
func TestReapWaitsAfterARestartForLeasesThatRanOutWhileDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, url := ownServer(t, pgembed.Options{})
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	// One job in progress whose lease ran out an hour ago: before the
	// restart below.
	if _, err := pool.Exec(ctx, `insert into workq.job_runs (queue, kind, status, owner_token, locked_until, attempts, claimed_at, claimed_by, lease_version)
		values ('q', 'k', 1, gen_random_uuid(), now() - interval '1 hour', 1, now() - interval '1 hour', 'w', 1)`); err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(ctx, pgembed.ShutdownFast); err != nil {
		t.Fatal(err)
	}
	pool.Reset()
	restarted := time.Now()
	e := lease.New(pool, lease.JobRuns)
	got, err := e.ReapExpired(ctx, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(restarted); got.Requeued != 0 && took < 9*time.Second {
		t.Fatalf("reaped %+v %s after the restart: want the lease that ran out before it held for 10 s", got, took)
	}
	// A lease that runs out after the restart is reaped at once.
	if _, err := pool.Exec(ctx, `insert into workq.job_runs (queue, kind, status, owner_token, locked_until, attempts, claimed_at, claimed_by, lease_version)
		values ('q', 'k', 1, gen_random_uuid(), clock_timestamp(), 1, now(), 'w', 1)`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	if got, err = e.ReapExpired(ctx, "", 10); err != nil || got.Requeued != 1 {
		t.Fatalf("reaped %+v (%v); want the lease that ran out after the restart", got, err)
	}
	// After the grace the old one goes too.
	time.Sleep(time.Until(restarted.Add(10*time.Second + 500*time.Millisecond)))
	if got, err = e.ReapExpired(ctx, "", 10); err != nil || got.Requeued != 1 {
		t.Fatalf("reaped %+v (%v) 10 s after the restart; want the lease that ran out before it", got, err)
	}
}
