// Package timers holds the types of workq's durable timers: a topic, a
// JSON payload and a due time. A timer is claimed only once it is due, by
// the database clock, and retried with the runtime's backoff like every
// other kind of work.
//
// A workq.Client schedules, cancels and works timers:
//
//	s, err := client.ScheduleTimerTx(ctx, tx, timers.Timer{Topic: "order.expire", Delay: 30 * time.Minute, Payload: order})
//	err = client.CancelTimer(ctx, s.ID) // while no worker has claimed it
//
//	workq.HandleTimer(workers, "order.expire", func(ctx context.Context, m *workq.Message[Order]) error { ... })
//
// Scheduled on the Client's pool, or inside the caller's own pgx
// transaction, the timer exists if and only if that transaction commits.
// docs/timers.md has the semantics.
package timers

import (
	"errors"
	"fmt"
	"time"

	"github.com/workq/workq/workqtype"
)

// Errors of a cancel (workq.Client.CancelTimer); each is wrapped with the
// timer's id. Bad input to a schedule is an error wrapping
// workqtype.ErrInvalid (workq.ErrInvalid), and writes nothing.
var (
	// ErrNotFound: no timer has the id (never scheduled, rolled back, or
	// removed by retention). It wraps workqtype.ErrNotFound
	// (workq.ErrNotFound).
	ErrNotFound = fmt.Errorf("timer %w", workqtype.ErrNotFound)
	// ErrClaimed: the timer is in progress (a worker claimed it); it can no
	// longer be cancelled. Its handler's result decides what happens next.
	ErrClaimed = errors.New("timer is claimed (in progress) and can no longer be cancelled")
	// ErrFinished: the timer already finished, done or failed; there is
	// nothing left to cancel. (A timer that was already cancelled is not an
	// error: a cancel is idempotent.)
	ErrFinished = errors.New("timer already finished")
)

// Timer describes a timer to schedule.
type Timer struct {
	Queue string // default "default"
	Topic string // required: selects the handler (1-256 bytes of UTF-8, no control characters)
	// Payload is a JSON object: a struct or map to marshal, or raw JSON as
	// json.RawMessage or []byte; nil means {}. Its size limit is the
	// client's (workq.Config.MaxPayloadBytes), as for job payloads.
	Payload any
	// Exactly one of DueTime and Delay. DueTime is absolute; a due time in
	// the past means due now (it keeps the time given, and sorts before
	// timers due later). Delay is counted from now on the database clock,
	// never the caller's; it must be positive.
	DueTime     time.Time
	Delay       time.Duration
	Priority    int16 // recorded; timers are claimed in due-time order, which priority does not change
	MaxAttempts int   // 0: the client default (4)
}

// Scheduled is the outcome of scheduling one timer.
type Scheduled struct {
	ID      int64
	DueTime time.Time // as stored (database clock for a Delay)
	DueNow  bool      // due at or before the moment it was written
	// Shard is the database it was written to (workq.DefaultShard for a
	// Client of one database).
	Shard string
}
