package workqtype

import "errors"

// Table names one of the four work tables, the kinds of work: job runs,
// outbox messages, inbox messages and timers. Its value is the table's
// name in the schema.
type Table string

// The four work tables.
const (
	TableJobRuns Table = "job_runs"
	TableOutbox  Table = "outbox"
	TableInbox   Table = "inbox"
	TableTimers  Table = "timers"
)

// ErrWrongState is what every error of an operator action on an item in a
// state the action does not take matches with errors.Is (a retry of a done
// item, a delete of a ready one, a cancel of a finished one): nothing
// changed.
var ErrWrongState = errors.New("item not in a state the action takes")

// ErrNotInWorkflow is the error (wrapped) of a workflow method called on a
// job that belongs to no workflow.
var ErrNotInWorkflow = errors.New("the job belongs to no workflow")
