package outboxrt_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/config"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/worker"
)

func TestMain(m *testing.M) { testdb.MainOwnCluster(m) }

var workerSeq atomic.Int64

// testConfig is a worker configuration for tests: quick polls and retries.
func testConfig() config.Config {
	cfg := config.Default()
	cfg.WorkerID = fmt.Sprintf("test-%d", workerSeq.Add(1))
	cfg.Concurrency, cfg.Batch = 8, 16
	cfg.Poll = 20 * time.Millisecond
	cfg.BackoffBase, cfg.BackoffCap = time.Millisecond, 20*time.Millisecond
	cfg.DrainTimeout = 5 * time.Second
	return cfg
}

// startWorker runs a worker with src until the test ends.
func startWorker(t *testing.T, pool *pgxpool.Pool, src worker.Source, opts worker.Options) *worker.Worker {
	t.Helper()
	w, err := worker.New(pool, testConfig().Worker(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AddSource(src); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := w.Stop(context.Background()); err != nil && err != worker.ErrNotRunning {
			t.Errorf("stop worker: %v", err)
		}
	})
	return w
}

// waitFor polls cond until it holds, failing the test after a generous bound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// claim claims directly with the lease engine (no worker), for tests that
// step through the ordered claim.
func claim(t *testing.T, pool *pgxpool.Pool, queue string, max int, opts lease.ClaimOptions) lease.Claim {
	t.Helper()
	c, err := lease.New(pool, lease.Outbox).Claim(context.Background(),
		lease.ClaimParams{Queue: queue, Max: max, Lease: time.Minute, WorkerID: "test", Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
