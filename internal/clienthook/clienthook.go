// Package clienthook lets package workqtest run a job handler exactly as a
// workq.Client's worker runs it (the Worker's Timeout and NextRetry, the
// Client's work middleware and retry policy, the runtime's execution
// timeout, lease and backoff) without the root package exporting how.
//
// The root package cannot be imported from here (it imports this package),
// so the one function is registered at run time: workq.NewClient calls
// Register, and only a Client made by NewClient is ever asked about.
// Nothing is registered at init.
package clienthook

import (
	"errors"
	"sync/atomic"

	"github.com/workq/workq/internal/worker"
)

// Job is a job kind's handler as a Client runs it.
type Job struct {
	// Handler is the kind's handler wrapped as the Client registers it
	// with its worker.
	Handler worker.HandlerFunc
	// Worker is the Client's runtime settings with their defaults:
	// ExecTimeout (0: none), Lease, BackoffBase and BackoffCap apply to
	// one attempt.
	Worker worker.Config
}

// JobFunc returns the handler of kind in workers (a *workq.Workers) as
// client (a *workq.Client) runs it.
type JobFunc func(client, workers any, kind string) (Job, error)

var jobFunc atomic.Pointer[JobFunc]

// Register sets the JobFunc; the first one registered stays (there is
// only one: the root package's).
func Register(f JobFunc) { jobFunc.CompareAndSwap(nil, &f) }

// JobHandler calls the registered JobFunc.
func JobHandler(client, workers any, kind string) (Job, error) {
	f := jobFunc.Load()
	if f == nil {
		return Job{}, errors.New("clienthook: no workq.Client was made by workq.NewClient")
	}
	return (*f)(client, workers, kind)
}
