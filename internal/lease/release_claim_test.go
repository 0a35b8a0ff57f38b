package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
)

// A claim's client that gave up on it closes the connection, but the claim's
// server process may not have finished with it: loaded, it can show as idle
// with the claim unread in its socket, then run it and commit (verified by
// hand: a backend stopped with SIGSTOP, the claim sent and the client
// closed, then SIGCONT: the claim committed); after a network partition it
// may not learn of the close for hours. A release that took "idle" for
// "settled" found nothing, and such a claim's rows sat until their leases
// expired, an attempt that never ran (outboxrt's
// TestFinalFailureBlockAndSkip saw [failed revived expired done] once, at
// load). ReleaseClaim ends a process that is still the caller's (by its
// client port) and releases once it is gone; pg_terminate_backend runs no
// statement the process has not read.
func TestReleaseClaimEndsTheClaimsServerProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := testdb.URL(t)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `insert into workq.job_runs (queue, kind) values ('rq', 'k'), ('rq', 'k')`); err != nil {
		t.Fatal(err)
	}
	eng := lease.New(pool, lease.JobRuns)
	// The claim's connection, and its claim, which committed on the server
	// while the client gave up: the server has not seen the client close.
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// The port as the server sees it: the worker passes its connection's
	// local port, the same on a direct connection (through NAT or a proxy
	// the two differ, and the release falls back to taking an idle process
	// for settled).
	backend, token := lease.ClaimBackend{PID: conn.PgConn().PID()}, uuid.New()
	if err := conn.QueryRow(ctx, `select client_port from pg_stat_activity where pid = pg_backend_pid()`).Scan(&backend.Port); err != nil || backend.Port <= 0 {
		t.Fatalf("the claim connection's client port: %d, %v (the test server must be reached over TCP)", backend.Port, err)
	}
	tag, err := conn.Exec(ctx, `update workq.job_runs set status = 1, owner_token = $1, locked_until = now() + interval '1 minute',
		attempts = attempts + 1, lease_version = lease_version + 1, claimed_at = now(), claimed_by = 'late'
		where queue = 'rq' and status = 0`, token)
	if err != nil || tag.RowsAffected() != 2 {
		t.Fatalf("the late claim: %v, %v", tag, err)
	}

	if n, err := eng.ReleaseClaim(ctx, token, backend); !errors.Is(err, lease.ErrClaimInFlight) || n != 0 {
		t.Fatalf("ReleaseClaim while the claim's process is there: %d, %v; want 0, ErrClaimInFlight", n, err)
	}
	n := releaseUntilSettled(t, ctx, eng, token, backend)
	if n != 2 {
		t.Fatalf("ReleaseClaim once the process ended released %d rows, want 2", n)
	}
	var ready, present int
	if err := pool.QueryRow(ctx, `select (select count(*) from workq.job_runs where queue = 'rq' and status = 0 and owner_token is null),
		(select count(*) from pg_stat_activity where pid = $1)`, int32(backend.PID)).Scan(&ready, &present); err != nil {
		t.Fatal(err)
	}
	if ready != 2 || present != 0 {
		t.Fatalf("%d of the late claim's 2 rows ready again, the claim's process present %d times; want 2 and 0", ready, present)
	}
	if err := conn.Ping(ctx); err == nil {
		t.Fatal("the claim's connection still answers after its server process was ended")
	}
}

// A process that is not the caller's by its client port (a pooler's, whose
// PID the client saw): an idle one counts as settled, as before, and is
// left alone.
func TestReleaseClaimLeavesAnotherClientsProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := testdb.URL(t)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	other, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.WithoutCancel(ctx))
	backend := lease.ClaimBackend{PID: other.PgConn().PID(), Port: 1} // no client of the server has port 1
	if n, err := lease.New(pool, lease.JobRuns).ReleaseClaim(ctx, uuid.New(), backend); err != nil || n != 0 {
		t.Fatalf("ReleaseClaim beside another client's idle process: %d, %v; want 0, nil", n, err)
	}
	if err := other.Ping(ctx); err != nil {
		t.Fatalf("the other client's connection: %v", err)
	}
}

func releaseUntilSettled(t *testing.T, ctx context.Context, eng *lease.Engine, token uuid.UUID, backend lease.ClaimBackend) int {
	t.Helper()
	for {
		n, err := eng.ReleaseClaim(ctx, token, backend)
		if !errors.Is(err, lease.ErrClaimInFlight) {
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		time.Sleep(10 * time.Millisecond)
	}
}
