package timers

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/worker"
	"github.com/workq/workq/workqtype"
)

// Processor routes due timers to handlers by topic on the shared runtime.
// Register handlers, then add Source(queues...) to a worker.Worker. A
// handler sees the timer's due time as job.DueTime and its topic as
// job.Topic; its result is the runtime's: nil acks (done), an error retries
// after the worker's backoff (failed once MaxAttempts are used),
// worker.Permanent fails at once, worker.Snooze runs it again later.
type Processor struct {
	router *worker.Router
}

// NewProcessor returns a Processor without handlers.
func NewProcessor() *Processor { return &Processor{router: worker.NewTopicRouter()} }

// Handle sets the handler of topic. Call it before the worker starts.
func (p *Processor) Handle(topic string, h worker.HandlerFunc) error {
	return p.router.Handle(topic, h)
}

// HandleDefault sets the handler of every topic without one of its own.
// Without it, a timer whose topic has no handler is retried (a newer worker
// may know the topic) until its attempts are used up.
func (p *Processor) HandleDefault(h worker.HandlerFunc) { p.router.HandleDefault(h) }

// Topics lists the topics with a handler of their own.
func (p *Processor) Topics() []string { return p.router.Keys() }

// Source returns the timers of queues (none: "default") as a worker source.
// The worker also wakes at each queue's next due time when that comes
// before its next poll (worker.Source.NextDue), so a timer starts within
// milliseconds of falling due.
func (p *Processor) Source(queues ...string) worker.Source {
	if len(queues) == 0 {
		queues = []string{"default"}
	}
	return worker.Source{Table: lease.Timers, Queues: queues, Route: p.router.Route, NextDue: NextDue}
}

// NextDue returns how long, on the database clock, until the earliest ready
// timer of queue is due (zero or negative: one is due already); ok is false
// when the queue has no ready timer. It reads one entry of the claim index.
func NextDue(ctx context.Context, db workqtype.DB, queue string) (wait time.Duration, ok bool, err error) {
	ms, err := gen.New(db).TimersNextDue(ctx, queue)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return time.Duration(ms) * time.Millisecond, true, nil
}
