// Package topicproc is the one Processor of the inbox and the timers: it
// routes the claimed items of one work table to handlers by topic on the
// shared runtime. (The outbox has a Relay of its own: ordered claims,
// rotation and hand-over by partition key.)
package topicproc

import (
	"context"
	"slices"
	"time"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/worker"
	"github.com/workq/workq/workqtype"
)

// NextDueFunc returns how long until the earliest ready item of queue is
// due; ok is false when there is none (worker.Source.NextDue).
type NextDueFunc func(ctx context.Context, db workqtype.DB, queue string) (wait time.Duration, ok bool, err error)

// Processor works a table's claimed items: an item goes to the handler
// registered for its topic, else to the default handler. An item without a
// topic (an inbox message received without one) has the topic "" and, as
// no handler can be registered for "", always goes to the default handler.
// Without a handler for it an attempt fails with a retryable error (during
// a rolling deploy a newer worker may know the topic), as on every table.
//
// A handler's result is the attempt's: nil marks the item done, an error
// retries it with backoff until its attempts are used up (failed),
// worker.Permanent(err) fails it at once, worker.Snooze runs it again
// later.
type Processor struct {
	table   lease.Table
	nextDue NextDueFunc
	router  *worker.Router
}

// New returns a Processor of table without handlers. nextDue, when not
// nil, wakes the worker at each queue's next due time when that comes
// before its next poll (the timers: a timer starts within milliseconds of
// falling due).
func New(table lease.Table, nextDue NextDueFunc) *Processor {
	return &Processor{table: table, nextDue: nextDue, router: worker.NewTopicRouter()}
}

// Handle sets the handler of a topic. Register before the worker starts.
func (p *Processor) Handle(topic string, h worker.HandlerFunc) error {
	return p.router.Handle(topic, h)
}

// HandleDefault sets the handler of every item whose topic has no handler
// of its own, including items without a topic.
func (p *Processor) HandleDefault(h worker.HandlerFunc) { p.router.HandleDefault(h) }

// Topics lists the topics with a handler of their own.
func (p *Processor) Topics() []string { return p.router.Keys() }

// Empty reports whether the processor has no handler at all.
func (p *Processor) Empty() bool { return p.router.Empty() }

// Source returns the runtime source of the table's queues (default: the
// queue "default"); pass it to (*worker.Worker).AddSource.
func (p *Processor) Source(queues ...string) worker.Source {
	if len(queues) == 0 {
		queues = []string{workqtype.DefaultQueue}
	}
	src := worker.Source{Table: p.table, Queues: slices.Clone(queues), Route: p.router.Route}
	if p.nextDue != nil {
		src.NextDue = p.nextDue
	}
	return src
}
