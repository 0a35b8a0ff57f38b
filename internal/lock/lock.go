// Package lock is a distributed lock on PostgreSQL with a fencing token:
// acquire, renew, release, and a signal when the lock is lost. workq's
// maintenance leader is one such lock; services can use the same mechanism
// for their own singletons.
//
// A lock is a row (table workq_locks) with an expiry on the database clock.
// Every acquisition gets a token greater than any earlier holder's. A holder
// renews every TTL/3; it considers the lock lost when a renewal says so (the
// lock expired or a newer token took it) or when no renewal has succeeded
// for most of the TTL (LocalTTL, measured on the holder's monotonic clock
// from the moment the last successful renewal was sent), which is before the
// database can let another owner in. Work done under the lock should also
// be fenced where it writes: a statement that checks its token on the lock
// row, and locks that row FOR SHARE so that a takeover waits for it,
//
//	... where exists (select 1 from workq_locks
//	                  where name = $1 and token = $2 and expires_at > clock_timestamp()
//	                  for share)
//
// writes nothing once the token no longer holds, and every write it lets
// through commits before the next holder's token exists.
//
// Only single statements are used, no session state: locks work through
// PgBouncer in transaction pooling mode.
package lock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/workqtype"
)

// ErrHeld is returned by TryAcquire when another owner holds the lock.
var ErrHeld = errors.New("lock held by another owner")

// ErrLost is the cause of a Lock's context once the lock is lost.
var ErrLost = errors.New("lock lost")

// ErrInvalid (workqtype.ErrInvalid, shared by every package) wraps the errors of bad arguments: nothing was written.
var ErrInvalid = workqtype.ErrInvalid

// Options configure a lock holder.
type Options struct {
	// TTL is how long the lock lives without a renewal (default 15s, at
	// least 1s). Another owner can take it over at most this long after the
	// holder dies.
	TTL time.Duration
	// Owner names the holder in workq_locks (default: the process's worker
	// id, host-pid).
	Owner string
	// RetryInterval is how often Acquire tries again while another owner
	// holds the lock (default TTL/4).
	RetryInterval time.Duration
	Logger        *slog.Logger
}

// DefaultTTL is the lock TTL when Options.TTL is zero.
const DefaultTTL = 15 * time.Second

func (o Options) withDefaults() (Options, error) {
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	if o.TTL < time.Second {
		return o, fmt.Errorf("%w: ttl must be at least 1s, got %s", ErrInvalid, o.TTL)
	}
	if o.Owner == "" {
		o.Owner = workqtype.DefaultOwner()
	}
	if strings.TrimSpace(o.Owner) == "" || len(o.Owner) > 256 {
		return o, fmt.Errorf("%w: owner must be 1 to 256 characters", ErrInvalid)
	}
	if o.RetryInterval <= 0 {
		o.RetryInterval = o.TTL / 4
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// Lock is a held lock. Its renewal runs in the background until Release or
// until the lock is lost.
type Lock struct {
	db   workqtype.DB
	name string
	opts Options

	// token is this holding's token; Advance moves it up. stmt orders
	// the statements that use it: renewals, Held and Release take it
	// shared, Advance exclusively, so none of them runs with a token that
	// Advance is replacing.
	token atomic.Int64
	stmt  sync.RWMutex
	// deadline is the local deadline (unix nanoseconds): lastSent +
	// LocalTTL of the last successful renewal. Advance stops by it, so it
	// never holds stmt past the moment the renewal goroutine must give up.
	deadline atomic.Int64

	ctx    context.Context // cancelled with ErrLost on loss, context.Canceled on release
	cancel context.CancelCauseFunc
	done   chan struct{} // the renewal goroutine has returned

	releaseOnce sync.Once
	releaseErr  error
}

// TryAcquire takes the named lock if it is free or expired, and returns
// ErrHeld (wrapped) when another owner holds it. db is a pool (a
// connection works, but the lock then dies with it).
func TryAcquire(ctx context.Context, db workqtype.DB, name string, o Options) (*Lock, error) {
	if err := workqtype.CheckName("name", "lock name", name); err != nil {
		return nil, err
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	sent := time.Now()
	row, err := gen.New(db).LocksAcquire(ctx, gen.LocksAcquireParams{Name: name, Owner: o.Owner, TtlMs: ms(o.TTL)})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("acquire lock %q: %w", name, ErrHeld)
	}
	if err != nil {
		return nil, fmt.Errorf("acquire lock %q: %w", name, err)
	}
	l := &Lock{db: db, name: name, opts: o, done: make(chan struct{})}
	l.token.Store(row.Token)
	l.deadline.Store(sent.Add(lease.LocalTTL(o.TTL)).UnixNano())
	l.ctx, l.cancel = context.WithCancelCause(context.Background())
	go l.renew(sent)
	o.Logger.Info("lock acquired", "lock", name, "owner", o.Owner, "token", row.Token, "ttl", o.TTL)
	return l, nil
}

// Acquire waits until it holds the named lock or ctx ends, trying every
// RetryInterval. Errors other than ErrHeld end the wait too.
func Acquire(ctx context.Context, db workqtype.DB, name string, o Options) (*Lock, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	for {
		l, err := TryAcquire(ctx, db, name, o)
		if !errors.Is(err, ErrHeld) {
			return l, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("acquire lock %q: %w", name, context.Cause(ctx))
		case <-time.After(o.RetryInterval):
		}
	}
}

// Name returns the lock's name.
func (l *Lock) Name() string { return l.name }

// Token returns the fencing token of this holding: greater than every
// earlier holder's. Advance may raise it while the lock is held.
func (l *Lock) Token() int64 { return l.token.Load() }

// Advance raises this holding's token to at least minToken while the lock is
// still held, so that writes fenced elsewhere by a token greater than the
// lock row has reached (fence rows written under another lock row, e.g.
// one on another database) accept this holder's. It changes the lock
// row in one statement fenced by the current token and an unexpired lock:
// a holder that has lost the lock (expired, or taken by a newer token)
// cannot advance, and gets an error wrapping ErrLost. Tokens stay
// monotonic: the next acquisition gets one greater than the advanced
// token. Renewals, Held and Release use the new token from then on.
//
// Advance does nothing when the token is already at least minToken. An
// Advance whose outcome is unknown (the connection failed after the
// statement was sent) leaves the token as it was: if the statement did
// commit, the next renewal finds the old token gone and the lock is lost,
// which is the safe side.
func (l *Lock) Advance(ctx context.Context, minToken int64) error {
	l.stmt.Lock()
	defer l.stmt.Unlock()
	old := l.token.Load()
	if minToken <= old {
		return nil
	}
	if l.ctx.Err() != nil {
		return fmt.Errorf("advance lock %q: %w", l.name, context.Cause(l.ctx))
	}
	// Bounded by the local deadline, past which the holder gives up (and
	// the renewal goroutine, waiting for stmt, must be free to notice).
	ctx, cancel := context.WithDeadline(ctx, time.Unix(0, l.deadline.Load()))
	defer cancel()
	stop := context.AfterFunc(l.ctx, cancel)
	defer stop()
	got, err := gen.New(l.db).LocksAdvance(ctx, gen.LocksAdvanceParams{Name: l.name, Token: old, MinToken: minToken})
	if errors.Is(err, pgx.ErrNoRows) {
		l.lose("advancing the token found the lock expired or taken by a newer token")
		return fmt.Errorf("advance lock %q from token %d: %w", l.name, old, ErrLost)
	}
	if err != nil {
		return fmt.Errorf("advance lock %q from token %d: %w", l.name, old, err)
	}
	l.token.Store(got)
	l.opts.Logger.Info("lock token advanced", "lock", l.name, "owner", l.opts.Owner, "from", old, "to", got)
	return nil
}

// Lost is closed when the lock is lost or released.
func (l *Lock) Lost() <-chan struct{} { return l.ctx.Done() }

// Context is cancelled when the lock is lost (context.Cause is ErrLost) or
// released: run the work the lock guards under it.
func (l *Lock) Context() context.Context { return l.ctx }

// Held asks the database whether this token still holds the lock. A write
// that must not happen after a takeover should check the same condition in
// its own statement (see LocksHeld in db/queries/locks.sql).
func (l *Lock) Held(ctx context.Context) (bool, error) {
	l.stmt.RLock()
	defer l.stmt.RUnlock()
	held, err := gen.New(l.db).LocksHeld(ctx, l.name, l.token.Load())
	if err != nil {
		return false, fmt.Errorf("check lock %q: %w", l.name, err)
	}
	return held, nil
}

// Release stops renewing and frees the lock at once, so another owner can
// take it without waiting for the TTL. It returns within ctx; when the
// database cannot be reached the lock simply expires.
func (l *Lock) Release(ctx context.Context) error {
	l.releaseOnce.Do(func() {
		lost := l.ctx.Err() != nil
		l.cancel(context.Canceled)
		<-l.done
		if lost {
			return
		}
		l.stmt.RLock()
		defer l.stmt.RUnlock()
		token := l.token.Load()
		if _, err := gen.New(l.db).LocksRelease(ctx, l.name, token); err != nil {
			l.releaseErr = fmt.Errorf("release lock %q: %w", l.name, err)
			return
		}
		l.opts.Logger.Info("lock released", "lock", l.name, "token", token)
	})
	return l.releaseErr
}

// renew extends the lock every TTL/3 until it is released or lost. The
// local deadline is lease.LocalTTL(TTL) after the last successful renewal
// was sent: past it the database may already consider the lock expired, so
// the holder gives up first.
func (l *Lock) renew(lastSent time.Time) {
	defer close(l.done)
	every := l.opts.TTL / 3
	deadline := time.NewTimer(time.Until(lastSent.Add(lease.LocalTTL(l.opts.TTL))))
	defer deadline.Stop()
	tick := time.NewTicker(every)
	defer tick.Stop()
	failing := false // the last renewal failed
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-deadline.C:
			l.lose("no renewal succeeded within the local deadline")
			return
		case <-tick.C:
		}
		l.stmt.RLock()
		sent := time.Now()
		ctx, cancel := context.WithDeadline(l.ctx, lastSent.Add(lease.LocalTTL(l.opts.TTL)))
		_, err := gen.New(l.db).LocksRenew(ctx, gen.LocksRenewParams{Name: l.name, Token: l.token.Load(), TtlMs: ms(l.opts.TTL)})
		cancel()
		l.stmt.RUnlock()
		switch {
		case err == nil:
			failing = false
			lastSent = sent
			l.deadline.Store(lastSent.Add(lease.LocalTTL(l.opts.TTL)).UnixNano())
			deadline.Reset(time.Until(lastSent.Add(lease.LocalTTL(l.opts.TTL))))
		case errors.Is(err, pgx.ErrNoRows):
			l.lose("the lock expired or a newer token took it")
			return
		case l.ctx.Err() != nil:
			return
		case failing: // said at the first failure; the loss, if it comes, is said too
			l.opts.Logger.Debug("lock renewal failed again", "lock", l.name, "token", l.token.Load(), "err", err)
		default:
			failing = true
			l.opts.Logger.Warn("lock renewal failed; retrying until the local deadline", "lock", l.name, "token", l.token.Load(), "err", err)
		}
	}
}

func (l *Lock) lose(why string) {
	l.opts.Logger.Warn("lock lost", "lock", l.name, "token", l.token.Load(), "why", why)
	l.cancel(fmt.Errorf("%w: %s", ErrLost, why))
}

// Info describes one lock row.
type Info struct {
	Name       string    `json:"name"`
	Owner      string    `json:"owner"`
	Token      int64     `json:"token"`
	Held       bool      `json:"held"`
	ExpiresAt  time.Time `json:"expires_at"`
	AcquiredAt time.Time `json:"acquired_at"`
	RenewedAt  time.Time `json:"renewed_at"`
}

// List returns every lock, held or not.
func List(ctx context.Context, db workqtype.DB) ([]Info, error) {
	rows, err := gen.New(db).LocksList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list locks: %w", err)
	}
	out := make([]Info, len(rows))
	for i, r := range rows {
		out[i] = Info{Name: r.Name, Owner: r.Owner, Token: r.Token, Held: r.Held, ExpiresAt: r.ExpiresAt, AcquiredAt: r.AcquiredAt, RenewedAt: r.RenewedAt}
	}
	return out, nil
}

func ms(d time.Duration) int64 {
	return int64(math.Ceil(float64(d) / float64(time.Millisecond)))
}
