package workq_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
)

// listenGate holds every LISTEN statement until open is closed: a listener
// that connects late (a loaded host, a cold pool).
type listenGate struct{ open chan struct{} }

func (g listenGate) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.HasPrefix(strings.ToLower(strings.TrimSpace(d.SQL)), "listen ") {
		select {
		case <-g.open:
		case <-ctx.Done():
		}
	}
	return ctx
}

func (listenGate) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// A cancel requested while the job runs but before the worker's listener
// listens (its notification unheard) cancels the handler as soon as the
// listener listens, not a third of the lease later at the next heartbeat
// (TestClientCancelRunningJob/notification failed so at load 15).
func TestClientCancelBeforeListening(t *testing.T) {
	gate := listenGate{open: make(chan struct{})}
	pool := testdb.PoolTraced(t, gate)
	ctx := context.Background()
	canceller, err := workq.NewClient(pool, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	// Enqueued before Start: the claim loop's first claim takes it, with
	// the listener held at its LISTEN.
	job, err := canceller.Enqueue(ctx, blockArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	opened := false
	defer func() {
		if !opened {
			close(gate.open)
		}
	}()
	w := startBlocking(t, pool, workq.Config{LeaseTTL: time.Minute})
	select {
	case <-w.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the job did not start")
	}
	if res, err := canceller.Cancel(ctx, workq.JobRef(job.ID), nil); err != nil || res != workq.CancelRequested {
		t.Fatalf("Cancel of a running job: %v, %v; want CancelRequested", res, err)
	}
	opened = true
	close(gate.open)
	select {
	case cause := <-w.ended:
		if !errors.Is(cause, workq.ErrCancelled) {
			t.Errorf("context.Cause = %v, want ErrCancelled", cause)
		}
	case <-time.After(10 * time.Second): // the heartbeat is 20s away
		t.Fatal("the handler's context was not cancelled once the listener listened")
	}
}
