package maintain

import (
	"context"
	"time"

	"github.com/workq/workq/internal/lease"
)

// Observer is told what the maintenance service does, for metrics (package
// metrics implements it). Set it in Options.Observer; the built-in tasks
// (ReapTask, StuckTask) report through the Observer of the Service that
// runs them. Methods are called on the service's goroutines, concurrently
// for different tasks: they must be safe for concurrent use, return
// quickly and never block. Embed NopObserver to implement only some.
type Observer interface {
	// Leading reports that this service became the leader (true) or
	// stopped leading (false).
	Leading(leading bool)
	// TaskRound reports one round of a task: the rows it handled, how
	// long it took and its error.
	TaskRound(task string, rows int64, took time.Duration, err error)
	// Reaped reports what a round of ReapTask reaped on one table, per
	// queue (r.ByQueue); tables with nothing reaped are not reported.
	Reaped(table lease.Table, r lease.Reaped)
	// Stuck reports, for every table a round of StuckTask could count, the
	// queues with items in progress claimed more than twice the lease ago
	// (empty: none); a table whose count failed is not reported.
	Stuck(table lease.Table, counts []lease.StuckCount)
}

// NopObserver implements Observer and does nothing; embed it.
type NopObserver struct{}

func (NopObserver) Leading(bool)                                  {}
func (NopObserver) TaskRound(string, int64, time.Duration, error) {}
func (NopObserver) Reaped(lease.Table, lease.Reaped)              {}
func (NopObserver) Stuck(lease.Table, []lease.StuckCount)         {}

type observerKey struct{}

// observerFrom returns the Observer of the service running the task whose
// context ctx is, or nil.
func observerFrom(ctx context.Context) Observer {
	o, _ := ctx.Value(observerKey{}).(Observer)
	return o
}
