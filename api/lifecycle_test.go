package api

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/workq/workq/internal/startstop"
	"github.com/workq/workq/internal/testdb"
)

// The Server keeps package startstop's lifecycle: Stop before Start, or
// after a refused Start, is startstop.ErrNotStarted; it starts once; Stops
// at once from several goroutines all return nil.
func TestServerLifecycle(t *testing.T) {
	pool := testdb.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	refused, err := New(Options{DB: pool, Insecure: true, Addr: "0.0.0.0:0", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := refused.Start(ctx); !errors.Is(err, ErrNoTokens) {
		t.Fatalf("Start insecure on 0.0.0.0: %v, want ErrNoTokens", err)
	}
	if err := refused.Stop(ctx); !errors.Is(err, startstop.ErrNotStarted) {
		t.Fatalf("Stop after a refused Start: %v, want startstop.ErrNotStarted", err)
	}
	s, err := New(Options{DB: pool, Insecure: true, Addr: "127.0.0.1:0", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(ctx); !errors.Is(err, startstop.ErrNotStarted) {
		t.Fatalf("Stop before Start: %v, want startstop.ErrNotStarted", err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); !errors.Is(err, startstop.ErrStarted) {
		t.Fatalf("second Start: %v, want startstop.ErrStarted", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = s.Stop(ctx) }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Stop %d of %d at once: %v", i+1, len(errs), err)
		}
	}
	if err := s.Start(ctx); !errors.Is(err, startstop.ErrStarted) {
		t.Fatalf("Start after Stop: %v, want startstop.ErrStarted", err)
	}
}
