package workq

import (
	"fmt"
	"slices"

	"github.com/workq/workq/internal/clienthook"
	"github.com/workq/workq/worker"
)

// handlerRuntime is what a Client adds around the handlers it registers
// with its worker, kept for package workqtest (through clienthook) so that
// a handler under test runs as the worker would run it.
type handlerRuntime struct {
	mws    []WorkMiddleware
	policy RetryPolicy
	worker worker.Config // with the defaults of the fields an attempt uses
}

func newHandlerRuntime(cfg Config) handlerRuntime {
	wc, d := cfg.Worker, worker.DefaultConfig()
	// worker.Config's defaults of the fields one attempt uses, as
	// worker.New applies them.
	switch {
	case wc.ExecTimeout == 0:
		wc.ExecTimeout = d.ExecTimeout
	case wc.ExecTimeout < 0:
		wc.ExecTimeout = 0
	}
	if wc.Lease == 0 {
		wc.Lease = d.Lease
	}
	if wc.BackoffBase == 0 {
		wc.BackoffBase = d.BackoffBase
	}
	if wc.BackoffCap == 0 {
		wc.BackoffCap = max(d.BackoffCap, wc.BackoffBase)
	}
	return handlerRuntime{mws: slices.Clone(cfg.WorkMiddleware), policy: cfg.RetryPolicy, worker: wc}
}

// clientJob is the clienthook.JobFunc of package workq: kind's handler in
// workers, wrapped as newWorker wraps it for client's worker.
func clientJob(client, workers any, kind string) (clienthook.Job, error) {
	c, ok := client.(*Client)
	if !ok || c == nil {
		return clienthook.Job{}, fmt.Errorf("workq: %T is not a *workq.Client", client)
	}
	ws, ok := workers.(*Workers)
	if !ok || ws == nil {
		return clienthook.Job{}, fmt.Errorf("workq: %T is not a *workq.Workers", workers)
	}
	h := ws.jobs[kind]
	if h == nil {
		return clienthook.Job{}, fmt.Errorf("workq: kind %q has no worker", kind)
	}
	return clienthook.Job{Handler: wrapHandler(h, c.run.mws, c.run.policy), Worker: c.run.worker}, nil
}
