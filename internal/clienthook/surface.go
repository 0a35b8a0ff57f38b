package clienthook

import (
	"errors"
	"sync/atomic"

	"github.com/workq/workq/internal/worker"
)

// Surface is what the root package keeps out of its exported API but
// cmd/workq and workqtest need: raw handlers of the
// runtime's *worker.Job and the typed views made from one. Every argument
// typed any is the root's value (a *workq.Workers, a *workq.Job[T] or a
// *workq.Message[T]).
type Surface struct {
	// HandleJob registers an untyped handler for a job kind on workers.
	HandleJob func(workers any, kind string, h worker.HandlerFunc) error
	// Fill sets dst (a *workq.Job[T] or *workq.Message[T]) to the typed
	// view of raw, its payload decoded (an error made with
	// worker.Permanent when it does not decode).
	Fill func(dst any, raw *worker.Job) error
}

var surface atomic.Pointer[Surface]

// RegisterSurface sets the Surface; the first one registered stays (there
// is only one: the root package's, registered by NewWorkers and
// NewClient, so before any value these functions take exists).
func RegisterSurface(s Surface) { surface.CompareAndSwap(nil, &s) }

var errNoSurface = errors.New("clienthook: no workq.Workers or workq.Client was made yet")

func loaded() (*Surface, error) {
	s := surface.Load()
	if s == nil {
		return nil, errNoSurface
	}
	return s, nil
}

// HandleJob calls the registered Surface.HandleJob.
func HandleJob(workers any, kind string, h worker.HandlerFunc) error {
	s, err := loaded()
	if err != nil {
		return err
	}
	return s.HandleJob(workers, kind, h)
}

// Fill calls the registered Surface.Fill.
func Fill(dst any, raw *worker.Job) error {
	s, err := loaded()
	if err != nil {
		return err
	}
	return s.Fill(dst, raw)
}
