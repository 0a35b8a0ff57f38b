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

// A claim's client that gave up on it closes the connection, but its server
// process may not have read the statement yet: loaded, it shows as idle
// with the claim unread in its socket, then runs it and commits. A release
// that took "idle" for "settled" found nothing, and the late claim's rows
// sat until their leases expired, an attempt that never ran (outboxrt's
// TestFinalFailureBlockAndSkip saw [failed revived expired done] once, at
// load). ReleaseClaim waits until the process is gone.
func TestReleaseClaimWaitsForTheClaimsServerProcess(t *testing.T) {
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
	// The claim's connection: its process idle, as one is before it reads
	// a statement its client sent.
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	backend, token := conn.PgConn().PID(), uuid.New()

	if n, err := eng.ReleaseClaim(ctx, token, backend); !errors.Is(err, lease.ErrClaimInFlight) || n != 0 {
		t.Fatalf("ReleaseClaim while the claim's process exists: %d, %v; want 0, ErrClaimInFlight", n, err)
	}
	// The claim runs late on that process, and its client closes.
	tag, err := conn.Exec(ctx, `update workq.job_runs set status = 1, owner_token = $1, locked_until = now() + interval '1 minute',
		attempts = attempts + 1, lease_version = lease_version + 1, claimed_at = now(), claimed_by = 'late'
		where queue = 'rq' and status = 0`, token)
	if err != nil || tag.RowsAffected() != 2 {
		t.Fatalf("the late claim: %v, %v", tag, err)
	}
	if err := conn.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var n int
	for {
		n, err = eng.ReleaseClaim(ctx, token, backend)
		if !errors.Is(err, lease.ErrClaimInFlight) {
			break
		}
		time.Sleep(10 * time.Millisecond) // the process exits once it reads the closed connection
	}
	if err != nil || n != 2 {
		t.Fatalf("ReleaseClaim once the process exited: %d, %v; want 2 rows released", n, err)
	}
	var ready int
	if err := pool.QueryRow(ctx, `select count(*) from workq.job_runs where queue = 'rq' and status = 0 and owner_token is null`).Scan(&ready); err != nil {
		t.Fatal(err)
	}
	if ready != 2 {
		t.Fatalf("%d of the late claim's 2 rows are ready again, want 2", ready)
	}
}
