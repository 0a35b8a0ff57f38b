package worker

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// batchContext is the parent of the handler contexts of one claimed batch:
// it carries the batch's execution deadline (Config.ExecTimeout, one timer
// per batch rather than one per job) and is done when the deadline passes
// or the batch's last attempt ends (finish).
//
// It exists for its AfterFunc method. A context.WithCancelCause over a
// standard cancelling parent (context.WithTimeout) registers in the parent's
// map of children, and its cancel takes itself out again: a map insert
// and delete per job under the parent's lock, which the handler goroutines
// share. That was about 9% of the worker's CPU in a burn-down
// (docs/throughput.md). Over a parent that implements AfterFunc the
// context package registers through it instead, and batchContext keeps the
// registrations in a slice: an attempt's context that ends clears its slot
// (stop), so an ended attempt is not kept for the batch's sake, and a
// handler that never returns keeps only its own.
//
// An attempt's context, a child of it, ends as before: with its own cause
// (ErrLeaseLost, ErrCancelled, ErrShutdown), or with Err
// context.DeadlineExceeded, and that cause, at the deadline.
type batchContext struct {
	values   context.Context // Worker.base: the values, never cancelled
	deadline time.Time
	done     chan struct{}
	timer    *time.Timer
	left     atomic.Int32 // attempts not yet ended

	mu    sync.Mutex
	err   error
	funcs []func() // what the context package asked to run at the end (AfterFunc)
}

func newBatchContext(values context.Context, timeout time.Duration, attempts int) *batchContext {
	b := &batchContext{values: values, deadline: time.Now().Add(timeout), done: make(chan struct{}), funcs: make([]func(), 0, attempts)}
	b.left.Store(int32(attempts))
	b.timer = time.AfterFunc(timeout, func() { b.end(context.DeadlineExceeded) })
	return b
}

func (b *batchContext) Deadline() (time.Time, bool) { return b.deadline, true }
func (b *batchContext) Done() <-chan struct{}       { return b.done }
func (b *batchContext) Value(key any) any           { return b.values.Value(key) }

func (b *batchContext) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// AfterFunc arranges for f to run when the batch ends (the context
// package's afterFuncer: what a child context registers); stop clears f's
// slot and reports whether f was still to run.
func (b *batchContext) AfterFunc(f func()) (stop func() bool) {
	b.mu.Lock()
	if b.err != nil {
		b.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	i := len(b.funcs)
	b.funcs = append(b.funcs, f)
	b.mu.Unlock()
	return func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		if i >= len(b.funcs) || b.funcs[i] == nil { // ended, or stopped before
			return false
		}
		b.funcs[i] = nil
		return true
	}
}

// finish notes the end of one of the batch's attempts; the last one ends
// the batch (a nil batch, of a worker without an execution timeout, has
// nothing to end).
func (b *batchContext) finish() {
	if b != nil && b.left.Add(-1) == 0 {
		b.timer.Stop()
		b.end(context.Canceled)
	}
}

// end makes the batch done with err, once, and cancels the contexts
// registered with it.
func (b *batchContext) end(err error) {
	b.mu.Lock()
	if b.err != nil {
		b.mu.Unlock()
		return
	}
	b.err = err
	funcs := b.funcs
	b.funcs = nil
	close(b.done)
	b.mu.Unlock()
	for _, f := range funcs {
		if f != nil {
			f()
		}
	}
}
