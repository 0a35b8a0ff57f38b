package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/workq/workq"
	"github.com/workq/workq/inbox"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/timers"
	"github.com/workq/workq/workqtype"
)

// Error codes of the "code" member of an error response; clients branch on
// them (and on the status), never on the message.
const (
	CodeInvalid          = "invalid"                // 400
	CodeUnauthorized     = "unauthorized"           // 401
	CodeForbidden        = "forbidden"              // 403
	CodeNotFound         = "not_found"              // 404
	CodeMethodNotAllowed = "method_not_allowed"     // 405
	CodeConflict         = "conflict"               // 409
	CodeTooLarge         = "too_large"              // 413
	CodeUnsupportedMedia = "unsupported_media_type" // 415
	CodeMisdirected      = "misdirected"            // 421
	CodeTooManyRequests  = "too_many_requests"      // 429
	CodeInternal         = "internal"               // 500
	CodeUnavailable      = "unavailable"            // 503
)

// Error is the body of every error response.
type Error struct {
	Message string `json:"error"`
	Code    string `json:"code"`
	// Field names the request field that is wrong, when one is:
	// "items[3].payload", "limit", "ids".
	Field string `json:"field,omitempty"`
	// ID is the stored item a conflict is about (inbox receive).
	ID int64 `json:"id,omitempty"`
	// Conflicts lists the messages of an inbox batch that conflict.
	Conflicts []Conflict `json:"conflicts,omitempty"`
	// Shards is every shard's outcome of an operation a sharded server
	// applies to every shard (pause, resume) that failed on some.
	Shards []ShardResult `json:"shards,omitempty"`

	status int
}

// Conflict is one conflicting message of an inbox batch.
type Conflict struct {
	Index int   `json:"index"` // position in the request's items
	ID    int64 `json:"id"`    // the stored message with another payload
}

func (e *Error) Error() string { return e.Message }

// invalid is a 400 about field.
func invalid(field, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	if field != "" {
		msg = field + ": " + msg
	}
	return &Error{status: http.StatusBadRequest, Code: CodeInvalid, Message: msg, Field: field}
}

// invalidErr is a 400 for a validation error of a feature package (a
// *workqtype.ValidationError, perhaps wrapped): its "invalid request: "
// prefix goes, and Field is field (the item's position in a batch, or "")
// joined with the field the error names.
func invalidErr(field string, err error) *Error {
	e := invalid(field, "%s", strings.TrimPrefix(err.Error(), workqtype.ErrInvalid.Error()+": "))
	if f := workqtype.FieldOf(err); f != "" {
		e.Field = join(field, f)
	}
	return e
}

func notFound(format string, args ...any) *Error {
	return &Error{status: http.StatusNotFound, Code: CodeNotFound, Message: fmt.Sprintf(format, args...)}
}

func conflict(format string, args ...any) *Error {
	return &Error{status: http.StatusConflict, Code: CodeConflict, Message: fmt.Sprintf(format, args...)}
}

// isInvalid reports whether err is a validation error of the Client or a
// feature package: nothing was written.
func isInvalid(err error) bool { return errors.Is(err, workq.ErrInvalid) }

// classify maps an error of a handler to its response. Errors the client
// can act on keep their message; any other is a 500 whose message says
// nothing of the server's internals (the log has it).
func classify(err error) *Error {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, workq.ErrWorkflowEnded): // adding tasks to it (also ErrInvalid) or cancelling it (also ErrWrongState)
		return &Error{status: http.StatusConflict, Code: CodeConflict, Message: err.Error()}
	case isInvalid(err):
		return invalidErr("", err)
	case errors.Is(err, workq.ErrNotFound): // an item, a schedule, a join... (every not-found of the Client and the feature packages)
		return &Error{status: http.StatusNotFound, Code: CodeNotFound, Message: err.Error()}
	case errors.Is(err, workq.ErrScheduleExists), errors.Is(err, workq.ErrScheduleOverlap), errors.Is(err, workq.ErrWrongState),
		errors.Is(err, outbox.ErrDuplicateMessageID), errors.Is(err, inbox.ErrConflict), errors.Is(err, timers.ErrClaimed),
		errors.Is(err, timers.ErrFinished):
		return &Error{status: http.StatusConflict, Code: CodeConflict, Message: err.Error()}
	case errors.Is(err, workq.ErrSchemaBehind), errors.Is(err, workq.ErrNotMigrated):
		return &Error{status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: err.Error()}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return &Error{status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "the request timed out or was cancelled"}
	}
	return &Error{status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error (the server log has the details)"}
}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":"internal error: the response could not be encoded","code":"internal"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// writeError writes err as an Error; a 500 is logged with the real error.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	e := classify(err)
	if e.status >= 500 {
		log.ErrorContext(r.Context(), "api request failed", "method", r.Method, "path", r.URL.Path, "status", e.status, "err", err)
	}
	writeJSON(w, e.status, e)
}
