package workq

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/workqtype"
)

// ErrCancelled is the cause (context.Cause) of a handler context cancelled
// because its job was cancelled while it ran (Client.Cancel, or an
// operator's cancel through the API, the CLI or the dashboard). The attempt
// ends cancelled whatever the handler returns. A handler may also return an
// error wrapping ErrCancelled to cancel its own job: it is not retried.
var ErrCancelled = workqtype.ErrCancelled

// ErrNotFound is matched (errors.Is) by every not-found error of workq: an
// item the operator methods (Get, Retry, Cancel...) do not find (never
// written, or deleted by retention), a schedule, a join.
var ErrNotFound = workqtype.ErrNotFound

// ErrFinished is matched by the error of Client.Cancel on an item that
// has finished (done, failed or cancelled): nothing changed. A
// FinishedError carries the state it was in; it matches ErrWrongState too.
var ErrFinished = errors.New("workq: item already finished")

// FinishedError is the error of Cancel on a finished item; it matches
// ErrFinished and ErrWrongState.
type FinishedError struct {
	Table Table
	ID    int64
	State string // done, failed or cancelled (the inbox's processed, dead...)
}

func (e *FinishedError) Error() string {
	return fmt.Sprintf("workq: %s %d already finished (%s)", e.Table, e.ID, e.State)
}

// Is makes errors.Is(err, ErrFinished) and errors.Is(err, ErrWrongState)
// true.
func (e *FinishedError) Is(target error) bool {
	return target == ErrFinished || target == ErrWrongState
}

// CancelResult says what Client.Cancel did.
type CancelResult int

const (
	// CancelledNow: the job was not running (ready, due or not); it is
	// cancelled now and will not run.
	CancelledNow CancelResult = iota + 1
	// CancelRequested: the job is running. The worker holding it cancels
	// its handler's context (context.Cause is ErrCancelled) as soon as the
	// notification reaches it, or at its next heartbeat (lease/3) if it
	// missed it; when the handler returns, the job ends cancelled whatever
	// it returned.
	CancelRequested
)

func (r CancelResult) String() string {
	switch r {
	case CancelledNow:
		return "cancelled"
	case CancelRequested:
		return "cancel_requested"
	}
	return fmt.Sprintf("CancelResult(%d)", int(r))
}

// defaultActor is who the Client's operator actions are archived as
// when ActionOpts names no one.
var defaultActor = "client:" + workqtype.DefaultOwner()

// Cancel cancels the item of ref, of any table. An item that is not
// running (ready, due or not) is cancelled at once (CancelledNow); a
// running one is stopped through its worker, in this process or another
// (CancelRequested), and ends cancelled when its handler returns.
// Cancelling it again while it stops is CancelRequested again. A finished
// item is left as it is: the error matches ErrFinished and ErrWrongState (a
// *FinishedError names its state); a missing one ErrNotFound. The cancel
// is recorded in the run archive with opts' actor (default
// "client:<host>-<pid>") and reason, and Retry undoes it.
//
// On a sharded Client the ref's shard says where the item is
// (Enqueued.Ref carries it); without one the id is looked up on every
// shard. A timer's own cancel, which never stops a running timer, is
// CancelTimer.
func (c *Client) Cancel(ctx context.Context, ref ItemRef, opts *ActionOpts) (_ CancelResult, err error) {
	defer c.notMigrated(&err)
	sc, err := c.resolve(ctx, ref)
	if err != nil {
		return 0, err
	}
	if c.set != nil { // errors name the shard
		ref.Shard = sc.name
	}
	return cancelItem(ctx, sc.db, ref, opts)
}

// CancelTx is Cancel in the caller's transaction: a ready item is
// cancelled, and a running one's worker notified, when tx commits. On a
// sharded Client use the Client of the transaction's shard
// (client.Shard(name).CancelTx).
func (c *Client) CancelTx(ctx context.Context, tx pgx.Tx, ref ItemRef, opts *ActionOpts) (_ CancelResult, err error) {
	defer c.notMigrated(&err)
	if err := checkTx(ctx, tx); err != nil {
		return 0, err
	}
	if c.set != nil {
		return 0, c.errShardTx("CancelTx")
	}
	if err := validateRef(ref); err != nil {
		return 0, err
	}
	if _, err := c.Shard(ref.Shard); err != nil {
		return 0, err
	}
	ref.Shard = ""
	return cancelItem(ctx, c.in(tx), ref, opts)
}

func cancelItem(ctx context.Context, db DB, ref ItemRef, opts *ActionOpts) (CancelResult, error) {
	r, err := admin.Cancel(ctx, db, ref.Table, actor(opts), ref.ID)
	if err != nil {
		return 0, fmt.Errorf("workq: cancel %s: %w", ref, err)
	}
	switch {
	case len(r.Requested) == 1:
		return CancelRequested, nil
	case len(r.Applied) == 1:
		return CancelledNow, nil
	case len(r.NotFound) == 1:
		return 0, fmt.Errorf("workq: cancel %s: %w", ref, ErrNotFound)
	}
	// Not ready or running: finished. The state is read after the cancel;
	// an item cannot leave a finished state but by a retry.
	word := r.States[ref.ID]
	if st, err := admin.ParseStatus(word); err != nil || !st.Finished() {
		// Retried or reaped between the two statements: rare; say so
		// rather than guess.
		return 0, fmt.Errorf("workq: cancel %s: it is %s now (its state changed meanwhile); try again", ref, word)
	}
	return 0, &FinishedError{Table: ref.Table, ID: ref.ID, State: word}
}
