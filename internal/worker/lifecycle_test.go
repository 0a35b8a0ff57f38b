package worker_test

import (
	"context"
	"errors"
	"testing"

	"github.com/workq/workq/internal/startstop/startstoptest"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/worker"
)

// The worker keeps the one lifecycle of package startstop: it starts once,
// Stop before Start is ErrNotRunning (startstop.ErrNotStarted), Stop is
// idempotent, and a Register after Start is refused.
func TestWorkerLifecycle(t *testing.T) {
	w, err := worker.New(testdb.Pool(t), rtConfig("lifecycle").Worker(), worker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	noop := func(context.Context, *worker.Job) error { return nil }
	if err := w.Register("k", noop); err != nil {
		t.Fatal(err)
	}
	if err := w.Stop(context.Background()); !errors.Is(err, worker.ErrNotRunning) {
		t.Fatalf("Stop before Start: %v, want ErrNotRunning", err)
	}
	startstoptest.Check(t, w)
	if err := w.Register("late", noop); err == nil {
		t.Fatal("Register after Start succeeded")
	}
}
