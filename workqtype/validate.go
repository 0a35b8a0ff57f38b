package workqtype

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The checks every kind of work shares (jobs, outbox and inbox messages,
// timers, schedules), each rule and its message written once. Each returns
// nil or a *ValidationError for field, the name the HTTP API gives it in
// its JSON (snake_case: "queue", "max_attempts", "dedup_key"). A batch
// call wraps the error of its element with the element's position
// ("job 3: invalid request: ..."); Field stays the element's field.

// MaxMaxAttempts is the highest max attempts of any item (the schema
// allows more; workq stops a typo such as 10000 that would retry for
// months).
const MaxMaxAttempts = 1000

// DefaultQueue is the queue of an item that names none.
const DefaultQueue = "default"

// CheckName checks a queue, kind or schedule name (ValidName); what says
// which ("queue", "kind", "schedule name").
func CheckName(field, what, s string) error {
	if ValidName(s) {
		return nil
	}
	return Invalid(field, fmt.Sprintf("%s %q is not a valid name (%s)", what, s, NameRule))
}

// CheckQueue checks a queue name: CheckName(field, "queue", q).
func CheckQueue(field, q string) error { return CheckName(field, "queue", q) }

// CheckTopic checks a topic (ValidTopic).
func CheckTopic(field, topic string) error {
	if ValidTopic(topic) {
		return nil
	}
	return Invalid(field, fmt.Sprintf("topic %q is not valid (1-256 bytes of UTF-8 without control characters)", topic))
}

// MaxAttempts returns n, or def when n is 0, checked: 1 to MaxMaxAttempts.
func MaxAttempts(field string, n, def int) (int32, error) {
	if n == 0 {
		n = def
	}
	if n < 1 || n > MaxMaxAttempts {
		return 0, Invalid(field, fmt.Sprintf("max attempts must be between 1 and %d, got %d", MaxMaxAttempts, n))
	}
	return int32(n), nil
}

// MinTime and MaxTime bound every time an item is given (a run-at time, a
// timer's due time): years 1 to 9999 in UTC, the times RFC 3339 and JSON
// can write (the HTTP API, the CLI's --json and the outbox's batch
// statement write them so), well inside PostgreSQL's timestamptz range
// (4713 BC to 294276 AD), whose bounds a Go time.Time overshoots easily.
var (
	MinTime = time.Date(1, time.January, 1, 0, 0, 0, 0, time.UTC)
	MaxTime = time.Date(9999, time.December, 31, 23, 59, 59, 999999999, time.UTC)
)

// CheckTime checks a time an item is given (what names it: "run at", "due
// time"): between MinTime and MaxTime.
func CheckTime(field, what string, t time.Time) error {
	if t.Before(MinTime) || t.After(MaxTime) {
		return Invalid(field, fmt.Sprintf("%s %s is out of range: want a time from %s to %s (UTC years 1 to 9999)",
			what, t.UTC().Format(time.RFC3339Nano), MinTime.Format(time.RFC3339), MaxTime.Format(time.RFC3339Nano)))
	}
	return nil
}

// Delay checks when an item with either a delay or a run-at time (not
// both) becomes due, and returns the delay in whole milliseconds, rounded
// up, and the run-at time (nil for none).
func Delay(delay time.Duration, runAt time.Time) (int64, *time.Time, error) {
	if delay < 0 {
		return 0, nil, Invalid("delay", fmt.Sprintf("delay %s is negative", delay))
	}
	if !runAt.IsZero() {
		if delay != 0 {
			return 0, nil, Invalid("run_at", "set run at or delay, not both")
		}
		if err := CheckTime("run_at", "run at", runAt); err != nil {
			return 0, nil, err
		}
		at := runAt // not &runAt: that moves every call's runAt to the heap
		return 0, &at, nil
	}
	return DelayMs(delay), nil, nil
}

// CheckCtx refuses a nil context, which pgx would panic on.
func CheckCtx(ctx context.Context) error {
	if ctx == nil {
		return Invalid("ctx", "nil context (use context.Background())")
	}
	return nil
}

// CheckTx refuses a nil context or a nil transaction, given to a call that
// works in the caller's transaction.
func CheckTx(ctx context.Context, tx pgx.Tx) error {
	if err := CheckCtx(ctx); err != nil {
		return err
	}
	if tx == nil {
		return Invalid("tx", "nil transaction")
	}
	return nil
}

// DelayMs is d in whole milliseconds, rounded up (a delay of 1ns is 1ms,
// never 0: due now).
func DelayMs(d time.Duration) int64 {
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond > 0 {
		ms++
	}
	return ms
}

// CheckKey checks an optional key (dedup key, idempotency key): at most
// maxLen bytes of UTF-8 without NUL bytes; what names it in messages.
func CheckKey(field, what, key string, maxLen int) error {
	if len(key) > maxLen {
		return Invalid(field, fmt.Sprintf("%s longer than %d bytes", what, maxLen))
	}
	if !ValidText(key) {
		return Invalid(field, fmt.Sprintf("%s %q is not valid UTF-8 text (no NUL bytes)", what, key))
	}
	return nil
}
