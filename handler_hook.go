package workq

import (
	"context"
	"fmt"
	"slices"

	"github.com/workq/workq/internal/clienthook"
	"github.com/workq/workq/internal/worker"
)

// handlerRuntime is what a Client adds around the handlers it registers
// with its worker, kept for package workqtest (through clienthook) so that
// a handler under test runs as the worker would run it.
type handlerRuntime struct {
	mws    []WorkMiddleware
	policy RetryPolicy
	worker worker.Config // with the defaults of the fields an attempt uses
}

func newHandlerRuntime(cfg Config, wc worker.Config) handlerRuntime {
	wc = wc.WithDefaults() // as worker.New runs it
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
	h = wrapHandler(h, c.run.mws, c.run.policy)
	run := func(ctx context.Context, job *worker.Job) error { return h(withClient(ctx, c), job) } // as Start gives it
	return clienthook.Job{Handler: run, Worker: c.run.worker}, nil
}
