// Package workqtype holds the types every other workq package shares: the
// database interface, the one validation error and its sentinel, and the
// name, text and payload rules. It sits at the bottom of the package graph
// (it imports no other workq package), like River's rivertype, so that the
// feature packages and the Client on top agree on one definition of each.
package workqtype

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what workq runs a statement on: a *pgxpool.Pool, a *pgx.Conn or a
// pgx.Tx. Passing the caller's transaction makes the write part of it.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// TxDB is a DB that can also begin a transaction: a *pgxpool.Pool, a
// *pgx.Conn, or a pgx.Tx (where Begin starts a savepoint). The API, the
// dashboard and the schedule store and scheduler need it for the requests
// that write several rows together.
type TxDB interface {
	DB
	Begin(ctx context.Context) (pgx.Tx, error)
}

// ErrInvalid is matched (errors.Is) by every error that rejects a request
// as invalid, in every workq package: the request changed nothing.
var ErrInvalid = errors.New("invalid request")

// ErrNotFound is what every not-found error of workq matches with
// errors.Is: an item, message, timer, schedule or join that does not exist
// (or not in the schema or shard asked). Packages keep their own, more
// precise sentinels (outbox.ErrNotFound, ...), each wrapping this one.
var ErrNotFound = errors.New("not found")

// ValidationError is the error of an invalid request: Field names what is
// wrong (a Go field, flag or JSON path such as "queue" or "jobs[3].kind";
// empty when the request as a whole is wrong) and Msg says how. It matches
// ErrInvalid through errors.Is, and Err, when set, too: a more specific
// error such as a *PayloadTooLargeError that errors.As finds.
type ValidationError struct {
	Field string
	Msg   string
	Err   error
}

// Error reads "invalid request: " followed by Msg.
func (e *ValidationError) Error() string { return ErrInvalid.Error() + ": " + e.Msg }

// Unwrap returns ErrInvalid, and Err when set.
func (e *ValidationError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalid, e.Err}
	}
	return []error{ErrInvalid}
}

// Invalid returns a *ValidationError for field; msg says what is wrong and
// should name the field, since the error text is Msg alone.
func Invalid(field, msg string) error { return &ValidationError{Field: field, Msg: msg} }

// InvalidErr returns a *ValidationError for field whose Msg is err's text
// and whose Err is err (errors.Is and errors.As see through it).
func InvalidErr(field string, err error) error {
	return &ValidationError{Field: field, Msg: err.Error(), Err: err}
}

// FieldOf returns the Field of the *ValidationError in err's tree, or "".
func FieldOf(err error) string {
	var v *ValidationError
	if errors.As(err, &v) {
		return v.Field
	}
	return ""
}

// NotifyChannel is the LISTEN/NOTIFY channel of a work table in a workq
// schema ("" is the default, workq): <schema>_<table>, such as
// workq_job_runs. The payload is the queue name.
func NotifyChannel(schema, table string) string {
	if schema == "" {
		schema = "workq"
	}
	return schema + "_" + table
}

// The defaults every enqueue path shares (jobs, outbox, inbox, timers).
const (
	DefaultMaxAttempts    = 4                    // attempts of an item that sets none
	DefaultNotifyDebounce = 5 * time.Millisecond // at most one NOTIFY per queue per this
)

// DefaultOwner is the default identity of a worker or lock holder:
// "<hostname>-<pid>".
func DefaultOwner() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

// Attempt is one archived attempt of a work item (a job run, an outbox or
// inbox message, a timer) from the run archive, or an operator's action on
// it (outcome revived or cancelled, with the actor as Worker). The attempt
// in progress, if any, is on the item itself.
type Attempt struct {
	RunID        uuid.UUID `json:"run_id"`
	Attempt      int32     `json:"attempt"`
	LeaseVersion int64     `json:"lease_version"`
	Worker       string    `json:"worker"` // worker id, or the actor of a revive or cancel
	StartedAt    time.Time `json:"started_at"`
	FinishedAt   time.Time `json:"finished_at"`
	Outcome      string    `json:"outcome"` // done, retry, failed, released, snoozed, expired, revived, cancelled...
	Error        string    `json:"error,omitempty"`
}
