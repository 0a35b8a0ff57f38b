package builtin

import (
	"context"

	"github.com/workq/workq/internal/worker"
)

// NoopKind is the job kind of the no-op handler, for health checks and for
// benchmarking a standalone `workq worker`.
const NoopKind = "noop"

// Noop acks every job at once.
func Noop(context.Context, *worker.Job) error { return nil }
