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

// ErrInvalid is matched (errors.Is) by every error that rejects a request
// as invalid, in every workq package: the request changed nothing.
var ErrInvalid = errors.New("invalid request")

// ValidationError is the error of an invalid request: Field names what is
// wrong (a Go field, flag or JSON path such as "queue" or "jobs[3].kind";
// empty when the request as a whole is wrong) and Msg says how. It matches
// ErrInvalid through errors.Is.
type ValidationError struct {
	Field string
	Msg   string
}

// Error reads "invalid request: " followed by Msg.
func (e *ValidationError) Error() string { return ErrInvalid.Error() + ": " + e.Msg }

// Unwrap returns ErrInvalid.
func (e *ValidationError) Unwrap() error { return ErrInvalid }

// Invalid returns a *ValidationError for field; msg says what is wrong and
// should name the field, since the error text is Msg alone.
func Invalid(field, msg string) error { return &ValidationError{Field: field, Msg: msg} }

// NotifyChannel is the LISTEN/NOTIFY channel of a work table; the payload is
// the queue name.
func NotifyChannel(table string) string { return "workq_" + table }

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
