// Package outage logs a database outage the way an operator wants to read
// it: one warning when the database becomes unreachable, reminders with
// backoff while it stays so (after 10 s, 20 s, 40 s... at most every 5
// minutes, saying for how long), and one line when it answers again. The
// loops of one component (a worker's claim loops, heartbeats, listener and
// completer; the maintenance leader and its tasks) share one Log, so an
// outage reads as one event, not as each loop's failures every second.
package outage

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Default reminder backoff.
const (
	FirstReminder = 10 * time.Second
	MaxReminder   = 5 * time.Minute
)

// Settle is how long after an outage's first failure a call that worked is
// taken for one that was under way when it began (its answer read, or
// reported, just after another loop's call failed), not for the database
// being back: the outage goes on until a call works after it.
const Settle = time.Second

// Log tracks one component's view of the database. Its zero value is not
// usable: see New. Safe for concurrent use.
type Log struct {
	log  *slog.Logger
	what string // the component, leading each message: "worker"

	first, max time.Duration
	now        func() time.Time

	mu       sync.Mutex
	since    time.Time // the first failure of the outage; zero while up
	next     time.Time // when the next reminder is due
	failures int64     // failed calls in this outage
}

// New returns the Log of component what (worker, maintenance...),
// writing to log.
func New(log *slog.Logger, what string) *Log {
	return &Log{log: log, what: what, first: FirstReminder, max: MaxReminder, now: time.Now}
}

// SetReminders sets the reminder backoff (tests): the first after first,
// then each when the outage has lasted twice as long, at most max apart.
func (l *Log) SetReminders(first, max time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.first, l.max = first, max
}

// SetClock sets the clock (tests).
func (l *Log) SetClock(now func() time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.now = now
}

// Failed records a failed database call. When err says the database could
// not be reached (Unreachable), the Log takes it and returns true: the
// first failure of an outage is logged at warn level, later ones only when
// a reminder is due (at warn level, with how long it has been down), the
// rest at debug level; args are added to those lines. Otherwise it returns
// false and the caller logs err as it would any failure.
func (l *Log) Failed(err error, args ...any) bool {
	if l == nil || !Unreachable(err) {
		return false
	}
	l.mu.Lock()
	now := l.now()
	l.failures++
	var msg string
	var level slog.Level
	var down time.Duration
	switch {
	case l.since.IsZero():
		l.since, l.next = now, now.Add(l.first)
		msg, level = l.what+": database unreachable; retrying until it answers", slog.LevelWarn
	case !now.Before(l.next):
		// The next one when it has been down twice as long, at most max
		// later: after 10 s, 20 s, 40 s... then every 5 minutes.
		down = now.Sub(l.since)
		l.next = now.Add(min(down, l.max))
		msg, level = l.what+": database still unreachable after "+round(down).String(), slog.LevelWarn
	default:
		msg, level, down = l.what+": database still unreachable", slog.LevelDebug, now.Sub(l.since)
	}
	failures := l.failures
	l.mu.Unlock()
	attrs := append([]any{"err", err}, args...)
	if down > 0 {
		attrs = append(attrs, "down_for", round(down), "failures", failures)
	}
	l.log.Log(context.Background(), level, msg, attrs...)
	return true
}

// OK records a database call that worked: after an outage it logs, at
// info level, that the database is reachable again and how long it was
// not. A call that worked within Settle of the outage's first failure does
// not end it (it was likely under way when the outage began).
func (l *Log) OK() {
	if l == nil {
		return
	}
	l.mu.Lock()
	if l.since.IsZero() || l.now().Sub(l.since) < Settle {
		l.mu.Unlock()
		return
	}
	down, failures := l.now().Sub(l.since), l.failures
	l.since, l.failures = time.Time{}, 0
	l.mu.Unlock()
	l.log.Info(l.what+": database reachable again after "+round(down).String(), "down_for", round(down), "failures", failures)
}

// Down reports whether an outage is under way: a failure was taken and no
// call has worked since.
func (l *Log) Down() bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.since.IsZero()
}

func round(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

// Unreachable reports whether err says the database could not be reached
// or the connection to it broke: a failed connection attempt, a network
// error or timeout, a connection closed under a statement, or the server
// shutting down. An error the server answered (a constraint, a missing
// table, bad credentials) is not one, nor is a cancelled context.
func Unreachable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		// 08: connection exception; 57P01-03: admin or crash shutdown,
		// cannot connect now (starting up, recovering).
		return strings.HasPrefix(pg.Code, "08") || pg.Code == "57P01" || pg.Code == "57P02" || pg.Code == "57P03"
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || pgconn.Timeout(err) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, net.ErrClosed)
}

type ctxKey struct{}

// NewContext returns ctx carrying l, for code a component runs that logs
// database failures of its own (a maintenance task's reaper): it reports
// them to the component's Log (FromContext).
func NewContext(ctx context.Context, l *Log) context.Context {
	return context.WithValue(ctx, ctxKey{}, l)
}

// FromContext returns the Log ctx carries, or own when it carries none.
func FromContext(ctx context.Context, own *Log) *Log {
	if l, ok := ctx.Value(ctxKey{}).(*Log); ok && l != nil {
		return l
	}
	return own
}
