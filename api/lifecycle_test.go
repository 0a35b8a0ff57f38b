package api

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/startstop"
	"github.com/workq/workq/internal/startstop/startstoptest"
	"github.com/workq/workq/internal/testdb"
)

// The Server keeps package startstop's lifecycle (startstoptest.Check):
// Stop before Start, or after a refused Start, is startstop.ErrNotStarted;
// it starts once; Stops at once from several goroutines all return nil.
func TestServerLifecycle(t *testing.T) {
	pool := testdb.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	refused, err := New(testClient(t, pool, workq.Config{}), Options{Insecure: true, Addr: "0.0.0.0:0", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := refused.Start(ctx); !errors.Is(err, ErrNoTokens) {
		t.Fatalf("Start insecure on 0.0.0.0: %v, want ErrNoTokens", err)
	}
	if err := refused.Stop(ctx); !errors.Is(err, startstop.ErrNotStarted) {
		t.Fatalf("Stop after a refused Start: %v, want startstop.ErrNotStarted", err)
	}
	s, err := New(testClient(t, pool, workq.Config{}), Options{Insecure: true, Addr: "127.0.0.1:0", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	startstoptest.Check(t, s)
}
