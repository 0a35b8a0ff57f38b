// Package timersrt is the timers' runtime: the Client that schedules and
// cancels timers (package timers holds the types a user names), the
// Processor of due timers and NextDue, and the operator reads (Get, List,
// Attempts). A workq.Client, the HTTP API, the dashboard and the CLI use
// it; users do not.
package timersrt

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/notify"
	"github.com/workq/workq/timers"
	"github.com/workq/workq/workqtype"
)

// Client schedules and cancels timers. It is safe for concurrent use; share
// one per process so NOTIFY debouncing works across goroutines.
type Client struct {
	maxAttempts  int
	maxPayload   int
	notifyWithin time.Duration
	notify       *notify.Debouncer
}

// ClientOptions configure a Client; zero values take the defaults.
type ClientOptions struct {
	MaxAttempts     int           // default max attempts of timers that do not set one (4)
	NotifyDebounce  time.Duration // at most one NOTIFY per queue per this (5ms); negative disables NOTIFY
	MaxPayloadBytes int           // payload limit in bytes of JSON text (0: 1 MiB; see jobq.Options)
	// NotifyWithin: a timer due within this of now (database clock) wakes
	// the queue's workers with NOTIFY; one due later is found by the
	// workers themselves (see docs/timers.md). Default: the workers'
	// default poll interval (1s). Negative: only timers due now notify.
	NotifyWithin time.Duration
}

// NewClient returns a Client.
func NewClient(o ClientOptions) *Client {
	if o.MaxAttempts == 0 {
		o.MaxAttempts = workqtype.DefaultMaxAttempts
	}
	if o.NotifyDebounce == 0 {
		o.NotifyDebounce = workqtype.DefaultNotifyDebounce
	}
	if o.MaxPayloadBytes == 0 {
		o.MaxPayloadBytes = workqtype.DefaultMaxPayload
	}
	if o.NotifyWithin == 0 {
		o.NotifyWithin = DefaultNotifyWithin
	}
	if o.NotifyWithin < 0 {
		o.NotifyWithin = 0
	}
	return &Client{maxAttempts: o.MaxAttempts, maxPayload: o.MaxPayloadBytes, notifyWithin: o.NotifyWithin,
		notify: notify.New(o.NotifyDebounce)}
}

type prepared struct {
	queue, topic string
	payload      []byte
	priority     int16
	dueTime      *time.Time
	delayMs      int64
	maxAttempts  int32
}

func (c *Client) prepare(t timers.Timer) (prepared, error) {
	p := prepared{queue: t.Queue, topic: t.Topic, priority: t.Priority}
	if p.queue == "" {
		p.queue = workqtype.DefaultQueue
	}
	if err := workqtype.CheckQueue("queue", p.queue); err != nil {
		return p, err
	}
	if err := workqtype.CheckTopic("topic", p.topic); err != nil {
		return p, err
	}
	payload, err := workqtype.EncodePayload(t.Payload, c.maxPayload)
	if err != nil {
		return p, err
	}
	p.payload = payload
	switch {
	case !t.DueTime.IsZero() && t.Delay != 0:
		return p, workqtype.Invalid("due_time", "set DueTime or Delay, not both")
	case t.DueTime.IsZero() && t.Delay == 0:
		return p, workqtype.Invalid("due_time", "set DueTime or Delay (for a timer due now, a DueTime of time.Now() or earlier)")
	case t.Delay < 0:
		return p, workqtype.Invalid("delay", fmt.Sprintf("delay %s is negative (a due time in the past is DueTime)", t.Delay))
	case !t.DueTime.IsZero():
		if err := workqtype.CheckTime("due_time", "due time", t.DueTime); err != nil {
			return p, err
		}
		d := t.DueTime
		p.dueTime = &d
	default:
		p.delayMs = workqtype.DelayMs(t.Delay)
	}
	p.maxAttempts, err = workqtype.MaxAttempts("max_attempts", t.MaxAttempts, c.maxAttempts)
	return p, err
}

// soon reports, by the local clock, whether p may be due within
// notifyWithin; the statement decides on the database clock. Only such
// timers take a NOTIFY slot of the debouncer, so a far-future timer never
// suppresses the NOTIFY of a due one written just after it.
func (c *Client) soon(p prepared) bool {
	if p.dueTime != nil {
		return time.Until(*p.dueTime) <= c.notifyWithin
	}
	return time.Duration(p.delayMs)*time.Millisecond <= c.notifyWithin
}

// Validate reports what is wrong with t (an error wrapping workqtype.ErrInvalid), or
// nil when Schedule would accept it. It touches no database.
func (c *Client) Validate(t timers.Timer) error {
	_, err := c.prepare(t)
	return err
}

// Schedule writes one timer on db: a pool, or the caller's transaction (the
// timer exists if and only if it commits).
func (c *Client) Schedule(ctx context.Context, db workqtype.DB, t timers.Timer) (timers.Scheduled, error) {
	p, err := c.prepare(t)
	if err != nil {
		return timers.Scheduled{}, err
	}
	row, err := gen.New(db).TimersSchedule(ctx, gen.TimersScheduleParams{
		Queue: p.queue, Topic: p.topic, Payload: p.payload, Priority: p.priority, MaxAttempts: p.maxAttempts,
		DueTime: p.dueTime, DelayMs: p.delayMs,
		Notify: c.soon(p) && c.notify.Should(p.queue), NotifyWithinMs: c.notifyWithin.Milliseconds(),
	})
	if err != nil {
		return timers.Scheduled{}, fmt.Errorf("schedule timer %s/%s: %w", p.queue, p.topic, err)
	}
	return timers.Scheduled{ID: row.ID, DueTime: row.DueTime, DueNow: row.DueNow}, nil
}

// ScheduleMany writes many timers in one statement on db. Every timer is
// validated first: if one is invalid, the error (wrapping ErrInvalid) names
// its index and nothing is written. The result has one entry per timer, in
// order.
func (c *Client) ScheduleMany(ctx context.Context, db workqtype.DB, ts []timers.Timer) ([]timers.Scheduled, error) {
	if len(ts) == 0 {
		return nil, nil
	}
	n := len(ts)
	arg := gen.TimersScheduleManyParams{
		Queues: make([]string, n), Topics: make([]string, n), Payloads: make([]string, n),
		DueTimes: make([]time.Time, n), DelaysMs: make([]int64, n), Priorities: make([]int16, n),
		MaxAttempts: make([]int32, n), NotifyWithinMs: c.notifyWithin.Milliseconds(),
	}
	soon := map[string]bool{}
	for i, t := range ts {
		p, err := c.prepare(t)
		if err != nil {
			return nil, fmt.Errorf("timer %d: %w", i, err)
		}
		arg.Queues[i], arg.Topics[i], arg.Payloads[i] = p.queue, p.topic, string(p.payload)
		arg.Priorities[i], arg.MaxAttempts[i] = p.priority, p.maxAttempts
		if p.dueTime != nil {
			// A negative delay tells the statement to take the due time.
			arg.DueTimes[i], arg.DelaysMs[i] = *p.dueTime, -1
		} else {
			arg.DueTimes[i], arg.DelaysMs[i] = time.Unix(0, 0), p.delayMs
		}
		if c.soon(p) {
			soon[p.queue] = true
		}
	}
	for q := range soon {
		if c.notify.Should(q) {
			arg.Notify = true
		}
	}
	rows, err := gen.New(db).TimersScheduleMany(ctx, arg)
	if err != nil {
		return nil, fmt.Errorf("schedule %d timers: %w", n, err)
	}
	if len(rows) != n {
		return nil, fmt.Errorf("schedule %d timers: %d rows returned", n, len(rows))
	}
	// Identity values are drawn in insertion order, which is input order:
	// sorting by id restores it whatever order RETURNING used.
	slices.SortFunc(rows, func(a, b gen.TimersScheduleManyRow) int { return cmp.Compare(a.ID, b.ID) })
	out := make([]timers.Scheduled, n)
	for i, r := range rows {
		out[i] = timers.Scheduled{ID: r.ID, DueTime: r.DueTime, DueNow: r.DueNow}
	}
	return out, nil
}

// Cancel cancels timer id if no worker has claimed it (it is ready, due or
// not). One statement locks the row and decides, so Cancel and a claim never
// both win: if Cancel returns nil the timer is never handled (again); a
// timer a claim got first returns an error wrapping ErrClaimed, or
// ErrFinished once it has finished. A timer that was already cancelled
// returns nil (Cancel is idempotent, so a retried Cancel whose first reply
// was lost succeeds). An unknown id returns ErrNotFound.
//
// A cancelled timer is cancelled (lease.StatusCancelled) with last_error
// "cancelled" and cancelled_at set; List and Get report its State as
// "cancelled". Cancel never stops a running timer (ErrClaimed); an
// operator's cancel (admin.Cancel: the HTTP API, the dashboard) does,
// through the worker that runs it. A timer
// that is ready again after a failed attempt (waiting for its retry) can be
// cancelled: its next attempt never runs.
func (c *Client) Cancel(ctx context.Context, db workqtype.DB, id int64) error {
	row, err := gen.New(db).TimersCancelOne(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("cancel timer %d: %w", id, timers.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("cancel timer %d: %w", id, err)
	}
	switch {
	case row.Cancelled, row.WasCancelled:
		return nil
	case lease.Status(row.Status) == lease.StatusInProgress:
		return fmt.Errorf("cancel timer %d: %w", id, timers.ErrClaimed)
	case lease.Status(row.Status) == lease.StatusDone:
		return fmt.Errorf("cancel timer %d: %w (done)", id, timers.ErrFinished)
	default:
		return fmt.Errorf("cancel timer %d: %w (failed)", id, timers.ErrFinished)
	}
}
