// Package startstop is the one start/stop lifecycle every long-lived
// service of workq shares (the maintenance, the scheduler, the worker
// runtime, the global-limit leader, the join deadline loop, the Client and
// the HTTP server). River's startstop is its model; it differs in one
// point: a service starts once. A Start after the first successful one,
// even after Stop, is refused with ErrStarted; a service is not restarted,
// a new one is made.
//
// A service embeds a Lifecycle (its zero value is ready) and writes its
// Start as:
//
//	func (s *Service) Start(ctx context.Context) error {
//		run, err := s.life.Begin(ctx)
//		if err != nil {
//			return err // ErrStarted
//		}
//		if err := s.prepare(); err != nil {
//			run.Abort() // not started: Start may be tried again
//			return err
//		}
//		go func() {
//			defer run.Stopped()
//			run.Started()
//			s.loop(run.Context()) // ends when Stop is called
//		}()
//		return nil
//	}
//
// Stop(ctx) is then Lifecycle.Stop: it ends the run's context (with the
// cause ErrStop), waits for Stopped at most until ctx ends, may be called
// from any goroutine, any number of times, and is nil once the service has
// stopped. A service whose stop needs more than a cancelled context (a
// drain cut short by Stop's ctx, a bound of its own) calls RequestStop and
// waits on the channel it returns itself.
package startstop

import (
	"context"
	"errors"
	"sync"
)

// ErrStarted is Start's error on a service that was started before
// (running, stopping or stopped): a service starts once.
var ErrStarted = errors.New("already started")

// ErrNotStarted is Stop's error on a service that was never started (or
// whose every Start failed).
var ErrNotStarted = errors.New("not started")

// ErrStop is the cause (context.Cause) of a run's context ended by Stop,
// telling a controlled stop from another cancellation.
var ErrStop = errors.New("service stopping")

// Service is what a service with this lifecycle offers.
type Service interface {
	// Start starts the service's goroutines and returns; ctx bounds the
	// start only, its values reach the service.
	Start(ctx context.Context) error
	// Stop stops the service and waits for it, at most until ctx ends.
	Stop(ctx context.Context) error
	// Started is closed once the service runs (or has stopped).
	Started() <-chan struct{}
	// Stopped is closed once the service's goroutines have returned.
	Stopped() <-chan struct{}
}

// Lifecycle is the state of one service: not started, running, stopping,
// stopped. Its zero value is a service not started; its methods are safe
// from any goroutine.
type Lifecycle struct {
	mu      sync.Mutex
	run     *Run // the current run; nil before Begin and after Abort
	started chan struct{}
	stopped chan struct{}
}

// Run is one start of a service, handed by Begin to the service's Start.
type Run struct {
	l      *Lifecycle
	ctx    context.Context
	cancel context.CancelCauseFunc
	once   sync.Once     // closes started
	end    sync.Once     // closes done (by Stopped or Abort)
	done   chan struct{} // closed by Stopped or Abort
}

// Begin claims the start of the service. It fails with ErrStarted when
// the service was started before, and with ctx's error when ctx has ended.
// The run's context keeps ctx's values but not its cancellation: it ends
// when Stop (or RequestStop, or Abort) is called.
func (l *Lifecycle) Begin(ctx context.Context) (*Run, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.run != nil {
		return nil, ErrStarted
	}
	l.channels()
	r := &Run{l: l, done: make(chan struct{})}
	r.ctx, r.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	l.run = r
	return r, nil
}

// channels makes started and stopped if a caller did not yet; l.mu held.
func (l *Lifecycle) channels() {
	if l.started == nil {
		l.started = make(chan struct{})
	}
	if l.stopped == nil {
		l.stopped = make(chan struct{})
	}
}

// Context is the run's context: it ends, with the cause ErrStop, when the
// service is asked to stop. The service's goroutines watch it.
func (r *Run) Context() context.Context { return r.ctx }

// Started reports that the service runs: Lifecycle.Started is closed.
// Calling it again does nothing.
func (r *Run) Started() {
	r.once.Do(func() {
		r.l.mu.Lock()
		defer r.l.mu.Unlock()
		close(r.l.started)
	})
}

// Stopped reports that the service's goroutines have returned:
// Lifecycle.Stopped is closed (and Started, if it was not), and every Stop
// waiting returns. Call it once, last, from the goroutine that owns the run.
func (r *Run) Stopped() {
	r.Started()
	r.end.Do(func() {
		r.cancel(ErrStop)
		close(r.l.stopped)
		close(r.done)
	})
}

// Abort undoes Begin when the start failed before any goroutine of the run
// started: the service counts as never started (Started and Stopped stay
// open), a later Start may be tried, and a Stop that raced with the failed
// start returns ErrNotStarted.
func (r *Run) Abort() {
	r.l.mu.Lock()
	if r.l.run == r {
		r.l.run = nil
	}
	r.l.mu.Unlock()
	r.end.Do(func() {
		r.cancel(errors.New("start failed"))
		close(r.done)
	})
}

// Began reports whether the service was started (a Start that did not
// fail): its configuration is frozen from then on.
func (l *Lifecycle) Began() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.run != nil
}

// Started is closed once the service runs, or has stopped. It may be taken
// before Start.
func (l *Lifecycle) Started() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.channels()
	return l.started
}

// Stopped is closed once the service has stopped. It may be taken before
// Start.
func (l *Lifecycle) Stopped() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.channels()
	return l.stopped
}

// RequestStop asks the service to stop (ends its run's context with the
// cause ErrStop) without waiting, and returns the channel that is closed
// once it has stopped (or its start failed). It fails with ErrNotStarted
// on a service never started. Calling it again returns the same channel.
func (l *Lifecycle) RequestStop() (<-chan struct{}, error) {
	l.mu.Lock()
	r := l.run
	l.mu.Unlock()
	if r == nil {
		return nil, ErrNotStarted
	}
	r.cancel(ErrStop)
	return r.done, nil
}

// Stop asks the service to stop and waits until it has: nil then. It
// returns ctx's error when ctx ends first (the service goes on stopping),
// and ErrNotStarted on a service never started. It is safe from any
// goroutine and idempotent: every call after the first waits for the same
// stop.
func (l *Lifecycle) Stop(ctx context.Context) error {
	done, err := l.RequestStop()
	if err != nil {
		return err
	}
	select {
	case <-done:
		return l.aborted(done)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// aborted is ErrNotStarted when the run whose done channel this is was
// aborted, nil when it stopped.
func (l *Lifecycle) aborted(done <-chan struct{}) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.run == nil || l.run.done != done {
		return ErrNotStarted
	}
	return nil
}
