package worker

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

type batchKey struct{}

func TestBatchContext(t *testing.T) {
	values := context.WithValue(context.WithoutCancel(context.Background()), batchKey{}, "v")
	cause := errors.New("lease lost")
	tests := []struct {
		name      string
		timeout   time.Duration
		act       func(b *batchContext, own context.CancelCauseFunc)
		wantErr   error
		wantCause error
	}{
		{"deadline", 20 * time.Millisecond, func(b *batchContext, _ context.CancelCauseFunc) { <-b.Done() },
			context.DeadlineExceeded, context.DeadlineExceeded},
		{"own cause", time.Hour, func(_ *batchContext, own context.CancelCauseFunc) { own(cause) },
			context.Canceled, cause},
		{"batch ended by its last attempt", time.Hour, func(b *batchContext, _ context.CancelCauseFunc) { b.finish(); b.finish() },
			context.Canceled, context.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBatchContext(values, tc.timeout, 2)
			defer b.timer.Stop()
			ctx, own := context.WithCancelCause(b)
			defer own(nil)
			if d, ok := ctx.Deadline(); !ok || !d.Equal(b.deadline) {
				t.Errorf("Deadline() = %v, %v; want the batch's %v", d, ok, b.deadline)
			}
			if v := ctx.Value(batchKey{}); v != "v" {
				t.Errorf("Value = %v; want the worker's values through the batch", v)
			}
			tc.act(b, own)
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("the attempt's context is not done")
			}
			if err := ctx.Err(); !errors.Is(err, tc.wantErr) || err != tc.wantErr {
				t.Errorf("Err() = %v; want %v", err, tc.wantErr)
			}
			if c := context.Cause(ctx); c != tc.wantCause {
				t.Errorf("Cause = %v; want %v", c, tc.wantCause)
			}
		})
	}
}

// The context package registers an attempt's context with its batch
// through AfterFunc: not in a map, and not with a goroutine per context
// (what it does for a parent it knows nothing of). A context made after
// the batch ended is done at once.
func TestBatchContextRegistersThroughAfterFunc(t *testing.T) {
	const n = 1000
	b := newBatchContext(context.Background(), time.Hour, n+1)
	defer b.timer.Stop()
	before := runtime.NumGoroutine()
	ctxs := make([]context.Context, n)
	for i := range ctxs {
		var cancel context.CancelCauseFunc
		ctxs[i], cancel = context.WithCancelCause(b)
		defer cancel(nil)
	}
	b.mu.Lock()
	registered := len(b.funcs)
	b.mu.Unlock()
	if registered != n {
		t.Fatalf("%d contexts registered with the batch; want %d", registered, n)
	}
	if g := runtime.NumGoroutine(); g > before+10 {
		t.Fatalf("%d goroutines after making %d contexts, %d before: the context package watches them with goroutines", g, n, before)
	}
	// An attempt's context that ends leaves the batch (its slot cleared):
	// a batch whose one handler never returns keeps nothing of the others.
	ended, endIt := context.WithCancelCause(b)
	endIt(nil)
	b.mu.Lock()
	cleared := b.funcs[len(b.funcs)-1] == nil
	b.mu.Unlock()
	if !cleared || ended.Err() != context.Canceled {
		t.Errorf("an ended context's registration: cleared %v, Err %v; want cleared, Canceled", cleared, ended.Err())
	}
	b.end(context.DeadlineExceeded)
	if context.Cause(ended) != context.Canceled {
		t.Errorf("the batch's end reached a context that had ended: cause %v", context.Cause(ended))
	}
	for i, ctx := range ctxs {
		if ctx.Err() != context.DeadlineExceeded {
			t.Fatalf("context %d: Err() = %v after the batch's deadline; want DeadlineExceeded", i, ctx.Err())
		}
	}
	late, cancel := context.WithCancelCause(b)
	defer cancel(nil)
	if late.Err() != context.DeadlineExceeded {
		t.Errorf("a context made after the batch ended: Err() = %v; want DeadlineExceeded", late.Err())
	}
	b.finish() // the last attempt ending after the deadline changes nothing
	if b.Err() != context.DeadlineExceeded {
		t.Errorf("batch Err() = %v after finish; want DeadlineExceeded kept", b.Err())
	}
}
