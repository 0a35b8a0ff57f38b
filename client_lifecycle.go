package workq

import (
	"context"

	"github.com/workq/workq/internal/startstop"
)

// clientLife is the Client's start/stop lifecycle: package startstop's,
// which every service under the Client shares, plus what the Client's stop
// needs beyond a cancelled context.
type clientLife struct {
	startstop.Lifecycle
	// cut ends when the ctx of a Stop call ends, with that ctx's error as
	// its cause: the drain is cut short (set by serve, under Client.mu).
	cut      context.Context
	cutDrain context.CancelCauseFunc
	err      error // the stop's error, set before the run is Stopped
}

// serve leaves run waiting in a goroutine of its own for Stop, which then
// runs stop (the parts' stops) with the cut context.
func (l *clientLife) serve(run *startstop.Run, stop func(context.Context) error) {
	l.cut, l.cutDrain = context.WithCancelCause(context.WithoutCancel(run.Context()))
	go func() {
		defer run.Stopped()
		run.Started()
		<-run.Context().Done()
		l.err = stop(causeErr{l.cut})
	}()
}

// causeErr is a context whose Err is its cause: the parts' stops wrap the
// error of the ctx given to Client.Stop (context.DeadlineExceeded, say),
// as they did when Stop called them itself.
type causeErr struct{ context.Context }

func (c causeErr) Err() error {
	if c.Context.Err() == nil {
		return nil
	}
	return context.Cause(c.Context)
}

// stop asks for the stop and waits for it, the drain cut short when ctx
// ends; the caller holds no lock. It is ErrNotRunning when the Client was
// never started or had stopped before the call; calls during the stop all
// wait for it and return its error.
func (c *Client) stopLife(ctx context.Context) error {
	select {
	case <-c.life.Stopped():
		return ErrNotRunning
	default:
	}
	stopped, err := c.life.RequestStop()
	if err != nil {
		return ErrNotRunning
	}
	c.mu.Lock() // a Start in progress has served the run, or failed
	cut := c.life.cutDrain
	c.mu.Unlock()
	if cut != nil {
		defer context.AfterFunc(ctx, func() { cut(ctx.Err()) })()
	}
	<-stopped // within the stop bound (Client.Stop), whatever ctx does
	select {
	case <-c.life.Stopped():
		return c.life.err
	default: // the Start failed
		return ErrNotRunning
	}
}
