package lease_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
)

// A claim's client that gave up on it closes the connection, but the
// claim's server process may not have finished with it: loaded, it can
// show as idle with the claim unread in its socket, then run it and commit
// (reproduced by hand: a backend stopped with SIGSTOP, the claim sent and
// the client closed, then SIGCONT: the claim committed); after a network
// partition it may not learn of the close for hours, idle, or active and
// blocked on the client, where a cancel is ignored. A release that took
// "idle" for "settled" found nothing, and such a claim's rows sat until
// their leases expired, an attempt that never ran (outboxrt's
// TestFinalFailureBlockAndSkip saw [failed revived expired done] once, at
// load). ReleaseClaim ends a process that is still the caller's connection's
// and releases once it is gone: pg_terminate_backend runs no statement the
// process has not read, aborts one it runs, and keeps one that committed.
func TestReleaseClaimEndsTheClaimsServerProcess(t *testing.T) {
	t.Run("idle after its claim committed", func(t *testing.T) {
		ctx, pool, eng, url := releaseEnv(t)
		conn, backend := claimConn(t, ctx, url)
		token := uuid.New()
		lateClaim(t, ctx, conn, token, 2)
		if n, err := eng.ReleaseClaim(ctx, token, backend); !errors.Is(err, lease.ErrClaimInFlight) || n != 0 {
			t.Fatalf("ReleaseClaim while the claim's process is there: %d, %v; want 0, ErrClaimInFlight", n, err)
		}
		if n := releaseUntilSettled(t, ctx, eng, token, backend); n != 2 {
			t.Fatalf("ReleaseClaim once the process ended released %d rows, want 2", n)
		}
		checkSettled(t, ctx, pool, conn, backend)
	})
	t.Run("active in its claim", func(t *testing.T) {
		ctx, pool, eng, url := releaseEnv(t)
		conn, backend := claimConn(t, ctx, url)
		token := uuid.New()
		// The claim holds its rows and does not end: as one blocked on a
		// client that is gone, which a cancel would not stop.
		claimErr := make(chan error, 1)
		go func() {
			_, err := conn.Exec(ctx, `with c as (`+lateClaimSQL+` returning id) select pg_sleep(60) from c limit 1`, token)
			claimErr <- err
		}()
		waitActive(t, ctx, pool, backend)
		if n := releaseUntilSettled(t, ctx, eng, token, backend); n != 0 {
			t.Fatalf("ReleaseClaim of an aborted claim released %d rows, want 0", n)
		}
		if err := <-claimErr; err == nil {
			t.Fatal("the claim ran to its end: its process was not ended")
		}
		var ready int
		if err := pool.QueryRow(ctx, `select count(*) from (select id from workq.job_runs where queue = 'rq' and status = 0 for update skip locked) r`).Scan(&ready); err != nil || ready != 2 {
			t.Fatalf("%d of the aborted claim's 2 rows ready and unlocked (%v), want 2", ready, err)
		}
		checkSettled(t, ctx, pool, conn, backend)
	})
}

// A process that is not the caller's by its client address and port (a
// pooler's, whose PID the client saw) is left alone: an idle one counts as
// settled, as before.
func TestReleaseClaimLeavesAnotherClientsProcess(t *testing.T) {
	ctx, _, eng, url := releaseEnv(t)
	other, backend := claimConn(t, ctx, url)
	backend.Port = 1 // no client of the server has port 1
	if n, err := eng.ReleaseClaim(ctx, uuid.New(), backend); err != nil || n != 0 {
		t.Fatalf("ReleaseClaim beside another client's idle process: %d, %v; want 0, nil", n, err)
	}
	if err := other.Ping(ctx); err != nil {
		t.Fatalf("the other client's connection: %v", err)
	}
}

const lateClaimSQL = `update workq.job_runs set status = 1, owner_token = $1, locked_until = now() + interval '1 minute',
	attempts = attempts + 1, lease_version = lease_version + 1, claimed_at = now(), claimed_by = 'late'
	where queue = 'rq' and status = 0`

// releaseEnv is a new database with two ready job runs on queue rq.
func releaseEnv(t *testing.T) (context.Context, *pgxpool.Pool, *lease.Engine, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	url := testdb.URL(t)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, `insert into workq.job_runs (queue, kind) values ('rq', 'k'), ('rq', 'k')`); err != nil {
		t.Fatal(err)
	}
	return ctx, pool, lease.New(pool, lease.JobRuns), url
}

// claimConn opens a claim's connection and names its server process as the
// worker does (its local TCP address), checking that the server sees the
// same client.
func claimConn(t *testing.T, ctx context.Context, url string) (*pgx.Conn, lease.ClaimBackend) {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.WithoutCancel(ctx)) })
	b := lease.ClaimBackend{PID: conn.PgConn().PID()}
	addr, ok := conn.PgConn().Conn().LocalAddr().(*net.TCPAddr)
	if !ok {
		t.Fatalf("the test server's connection is not TCP (%T): the release tells the claim's process by its client address", conn.PgConn().Conn().LocalAddr())
	}
	ap := addr.AddrPort()
	b.Addr, b.Port = ap.Addr().Unmap(), int(ap.Port())
	var seenAddr netip.Addr
	var seenPort int
	if err := conn.QueryRow(ctx, `select client_addr, client_port from pg_stat_activity where pid = pg_backend_pid()`).Scan(&seenAddr, &seenPort); err != nil {
		t.Fatal(err)
	}
	if seenAddr != b.Addr || seenPort != b.Port {
		t.Fatalf("the server sees the client at %s:%d, the client is at %s:%d", seenAddr, seenPort, b.Addr, b.Port)
	}
	return conn, b
}

func lateClaim(t *testing.T, ctx context.Context, conn *pgx.Conn, token uuid.UUID, want int64) {
	t.Helper()
	tag, err := conn.Exec(ctx, lateClaimSQL, token)
	if err != nil || tag.RowsAffected() != want {
		t.Fatalf("the late claim: %v, %v", tag, err)
	}
}

func waitActive(t *testing.T, ctx context.Context, pool *pgxpool.Pool, b lease.ClaimBackend) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		var active bool
		if err := pool.QueryRow(ctx, `select exists (select 1 from pg_stat_activity where pid = $1 and state = 'active' and query like '%pg_sleep%')`, int32(b.PID)).Scan(&active); err != nil {
			t.Fatal(err)
		}
		if active {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the claim's process did not start the claim within 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// releaseUntilSettled calls ReleaseClaim until it is no longer in flight,
// for at most 10 s (a process that was ended is gone in milliseconds).
func releaseUntilSettled(t *testing.T, ctx context.Context, eng *lease.Engine, token uuid.UUID, b lease.ClaimBackend) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		n, err := eng.ReleaseClaim(ctx, token, b)
		if !errors.Is(err, lease.ErrClaimInFlight) {
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		if time.Now().After(deadline) {
			t.Fatal("ReleaseClaim still in flight after 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checkSettled checks that the rows of queue rq are ready again and the
// claim's process and connection are gone.
func checkSettled(t *testing.T, ctx context.Context, pool *pgxpool.Pool, conn *pgx.Conn, b lease.ClaimBackend) {
	t.Helper()
	var ready, present int
	if err := pool.QueryRow(ctx, `select (select count(*) from workq.job_runs where queue = 'rq' and status = 0 and owner_token is null),
		(select count(*) from pg_stat_activity where pid = $1)`, int32(b.PID)).Scan(&ready, &present); err != nil {
		t.Fatal(err)
	}
	if ready != 2 || present != 0 {
		t.Fatalf("%d of queue rq's 2 rows ready, the claim's process present %d times; want 2 and 0", ready, present)
	}
	if err := conn.Ping(ctx); err == nil {
		t.Fatal("the claim's connection still answers after its server process was ended")
	}
}
