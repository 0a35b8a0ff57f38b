package worker

import (
	"fmt"
	"slices"
	"sync"

	"github.com/workq/workq/workqtype"
)

// Router finds the handler of a claimed item by a key of it: the kind for
// job runs, the topic for outbox messages, inbox messages and timers. Every
// Source of the runtime routes through one, so a missing handler behaves the
// same on every table: the attempt fails with a retryable error (during a
// rolling deploy a newer worker may know the key) unless a default handler
// is set. Register everything before the worker starts.
type Router struct {
	what string            // "kind" or "topic", for messages
	key  func(*Job) string // the routing key of an item
	// validKey checks a key at Handle time.
	validKey func(string) bool

	mu       sync.RWMutex
	handlers map[string]HandlerFunc
	fallback HandlerFunc
}

// newKindRouter returns the router of job runs, by kind (Job.Kind).
func newKindRouter() *Router {
	return &Router{what: "kind", key: func(j *Job) string { return j.Kind }, validKey: workqtype.ValidName, handlers: map[string]HandlerFunc{}}
}

// NewTopicRouter returns a router by topic (Job.Topic). Topics are 1 to 256
// bytes of valid UTF-8, as the work tables allow.
func NewTopicRouter() *Router {
	return &Router{what: "topic", key: func(j *Job) string { return j.Topic }, validKey: ValidTopic, handlers: map[string]HandlerFunc{}}
}

// ValidTopic reports whether s is a valid topic: 1 to 256 bytes of valid
// UTF-8 without control characters, and no space at either end
// (workqtype.ValidTopic).
func ValidTopic(s string) bool { return workqtype.ValidTopic(s) }

// Handle sets the handler of key.
func (r *Router) Handle(key string, h HandlerFunc) error {
	if !r.validKey(key) {
		return fmt.Errorf("handle %s %q: not a valid %s", r.what, key, r.what)
	}
	if h == nil {
		return fmt.Errorf("handle %s %q: nil handler", r.what, key)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.handlers[key]; dup {
		return fmt.Errorf("handle %s %q: already registered", r.what, key)
	}
	r.handlers[key] = h
	return nil
}

// HandleDefault sets the handler of every key without one of its own.
func (r *Router) HandleDefault(h HandlerFunc) {
	r.mu.Lock()
	r.fallback = h
	r.mu.Unlock()
}

// Keys lists the keys with a handler of their own, sorted.
func (r *Router) Keys() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.handlers))
	for k := range r.handlers {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Empty reports whether the router has no handler at all.
func (r *Router) Empty() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.handlers) == 0 && r.fallback == nil
}

// Route returns the handler of j; it is a Source's Route.
func (r *Router) Route(j *Job) (HandlerFunc, error) {
	k := r.key(j)
	r.mu.RLock()
	h, ok := r.handlers[k]
	if !ok {
		h = r.fallback
	}
	r.mu.RUnlock()
	if h == nil {
		return nil, fmt.Errorf("no handler registered for %s %q", r.what, k)
	}
	return h, nil
}
