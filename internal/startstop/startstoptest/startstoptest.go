// Package startstoptest checks that a service keeps the lifecycle of
// package startstop, for the tests of each service.
package startstoptest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/workq/workq/internal/startstop"
)

// Deadline bounds each wait of Check: generous, for a loaded machine.
const Deadline = 30 * time.Second

// StartStopper is a service with Start and Stop; one that also has
// Started and Stopped (startstop.Service) gets them checked too.
type StartStopper interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// Check runs svc, a service not started yet, through its lifecycle: Stop
// before Start is ErrNotStarted; Start closes Started; a second Start is
// ErrStarted; Stops from several goroutines at once all return nil and
// close Stopped; a Start after the stop is ErrStarted and a Stop after it
// is nil.
func Check(t testing.TB, svc StartStopper) {
	t.Helper()
	var started, stopped <-chan struct{}
	full, _ := svc.(startstop.Service)
	ctx, cancel := context.WithTimeout(context.Background(), Deadline)
	defer cancel()
	if err := svc.Stop(ctx); !errors.Is(err, startstop.ErrNotStarted) {
		t.Fatalf("Stop before Start: %v, want startstop.ErrNotStarted", err)
	}
	if full != nil {
		started, stopped = full.Started(), full.Stopped()
	}
	if err := svc.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if full != nil {
		select {
		case <-started:
		case <-ctx.Done():
			t.Fatal("Started not closed after Start")
		}
	}
	if err := svc.Start(ctx); !errors.Is(err, startstop.ErrStarted) {
		t.Fatalf("second Start: %v, want startstop.ErrStarted", err)
	}
	select {
	case <-stopped:
		t.Fatal("Stopped closed before Stop")
	default:
	}
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = svc.Stop(ctx) }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Stop %d of %d at once: %v", i+1, len(errs), err)
		}
	}
	if full != nil {
		select {
		case <-stopped:
		default:
			t.Fatal("Stop returned before Stopped was closed")
		}
	}
	if err := svc.Start(ctx); !errors.Is(err, startstop.ErrStarted) {
		t.Fatalf("Start after Stop: %v, want startstop.ErrStarted", err)
	}
	if err := svc.Stop(ctx); err != nil {
		t.Fatalf("Stop of a stopped service: %v, want nil", err)
	}
}
