package workqtype

import "errors"

// The states of an item of any work table (job runs, outbox and inbox
// messages, timers), as the HTTP API, the CLI, the dashboard and unique
// jobs name them. Ready includes items due later (scheduled, or waiting to
// be retried). workq.JobState types them for job runs.
const (
	StateReady      = "ready"
	StateInProgress = "in_progress"
	StateDone       = "done"
	StateFailed     = "failed"
	StateCancelled  = "cancelled"
	// StatePending: a workflow's task whose dependencies have not all
	// ended (job runs only); it becomes ready, or is cancelled, when they
	// end.
	StatePending = "pending"
)

// ErrInvalidSchema is wrapped by every error that refuses a schema name
// (migrate.ErrInvalidSchema; a Client's Config.Schema also wraps
// ErrInvalid): 1 to 54 characters, a lowercase letter or _ first, then
// lowercase letters, digits or _, not starting with pg_, and not
// information_schema or public.
var ErrInvalidSchema = errors.New("invalid schema name")

// ErrHostNotAllowed is wrapped by the webhook publisher's and the built-in
// webhook kind's errors for a URL whose host is not on their allow list
// (publish.ErrNotAllowed).
var ErrHostNotAllowed = errors.New("host not allowed")
