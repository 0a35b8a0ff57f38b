package inbox

import (
	"slices"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/worker"
)

// Processor works received messages on the shared runtime: a claimed
// message goes to the handler registered for its topic, else to the default
// handler. A message received without a topic has the topic "" and, as no
// handler can be registered for "", always goes to the default handler.
// Without a handler for it an attempt fails with a retryable error (during
// a rolling deploy a newer worker may know the topic), as on every table.
//
// A handler's result is the attempt's: nil marks the message processed
// (done), an error retries it with backoff until its attempts are used up
// and it is dead (failed), worker.Permanent(err) makes it dead at once.
type Processor struct {
	router *worker.Router
}

// NewProcessor returns a Processor without handlers.
func NewProcessor() *Processor { return &Processor{router: worker.NewTopicRouter()} }

// Handle sets the handler of a topic. Register before the worker starts.
func (p *Processor) Handle(topic string, h worker.HandlerFunc) error {
	return p.router.Handle(topic, h)
}

// HandleDefault sets the handler of every message whose topic has no
// handler of its own, including messages without a topic.
func (p *Processor) HandleDefault(h worker.HandlerFunc) { p.router.HandleDefault(h) }

// Topics lists the topics with a handler of their own.
func (p *Processor) Topics() []string { return p.router.Keys() }

// Empty reports whether the processor has no handler at all.
func (p *Processor) Empty() bool { return p.router.Empty() }

// Source returns the runtime source of the inbox queues (default: the
// queue "default"); pass it to (*worker.Worker).AddSource.
func (p *Processor) Source(queues ...string) worker.Source {
	if len(queues) == 0 {
		queues = []string{"default"}
	}
	return worker.Source{Table: lease.Inbox, Queues: slices.Clone(queues), Route: p.router.Route}
}
