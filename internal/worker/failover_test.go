package worker_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/ha"
	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/pgembed"
	"github.com/workq/workq/internal/worker"
	"github.com/workq/workq/migrate"
)

// syncBuffer is a bytes.Buffer safe for the logger's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A worker whose pool reaches a standby (read-only: LISTEN and claims
// answer SQLSTATE 25006) keeps retrying its listener with backoff, and
// once the standby is promoted listens again and works: a listener is
// re-established on the new primary.
func TestListenerRetriesOnStandbyUntilPromoted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	primary, err := pgembed.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = primary.Stop() })
	pcfg, err := pgxpool.ParseConfig(primary.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	pp, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pp.Close()
	m, err := migrate.New(pp, migrate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	standby, err := primary.StartStandby(ctx, pgembed.StandbyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = standby.Stop() })

	scfg, err := pgxpool.ParseConfig(standby.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	scfg.MaxConns = 4
	ha.ConfigurePool(scfg)
	sp, err := pgxpool.NewWithConfig(ctx, scfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sp.Close) // after the worker stops (cleanups run last first)

	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ran := make(chan int64, 1)
	cfg := rtConfig("failover", "q")
	cfg.Poll = time.Hour // only a wake-up (the listener's, once it listens) claims promptly
	startWorker(t, sp, cfg, worker.Options{Logger: log}, map[string]worker.HandlerFunc{
		"k": func(_ context.Context, j *worker.Job) error { ran <- j.ID; return nil },
	})
	waitLog := func(what string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(logs.String(), what) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in the worker's log:\n%s", what, logs.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitLog("cannot execute LISTEN during recovery")
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	waitLog("listener connected again")
	id, err := jobq.New(jobq.Options{}).Enqueue(ctx, sp, jobq.Job{Queue: "q", Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-ran:
		if got != id.ID {
			t.Fatalf("ran %d, want %d", got, id.ID)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the job enqueued on the promoted server did not run:\n%s", logs.String())
	}
}
