package workq

import (
	"fmt"

	"github.com/workq/workq/internal/clienthook"
	"github.com/workq/workq/internal/worker"
)

// registerSurface registers with internal/clienthook what cmd/workq and
// workqtest need of the root but the root does not export (raw
// *worker.Job job handlers, and the typed views made from a *worker.Job):
// River has no raw handler API, and neither has workq's. NewWorkers and
// NewClient call it; nothing is registered at init.
func registerSurface() {
	clienthook.RegisterSurface(clienthook.Surface{HandleJob: hookHandleJob, Fill: hookFill})
}

func workersOf(workers any) (*Workers, error) {
	ws, ok := workers.(*Workers)
	if !ok || ws == nil {
		return nil, fmt.Errorf("workq: %T is not a *workq.Workers", workers)
	}
	return ws, nil
}

func hookHandleJob(workers any, kind string, h worker.HandlerFunc) error {
	ws, err := workersOf(workers)
	if err != nil {
		return err
	}
	return ws.addJob(kind, h)
}

// filler is a *Job[T] or a *Message[T].
type filler interface{ fill(raw *worker.Job) error }

func hookFill(dst any, raw *worker.Job) error {
	f, ok := dst.(filler)
	if !ok {
		return fmt.Errorf("workq: %T is not a *workq.Job[T] or *workq.Message[T]", dst)
	}
	return f.fill(raw)
}
