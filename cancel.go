package workq

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/workqtype"
)

// ErrCancelled is the cause (context.Cause) of a handler context cancelled
// because its job was cancelled while it ran (Client.Cancel, or an
// operator's cancel through the API, the CLI or the dashboard). The attempt
// ends cancelled whatever the handler returns. A handler may also return an
// error wrapping ErrCancelled to cancel its own job: it is not retried.
var ErrCancelled = workqtype.ErrCancelled

// ErrNotFound is returned by Client.Cancel for a job that does not exist
// (never enqueued, or deleted by retention).
var ErrNotFound = workqtype.ErrNotFound

// ErrFinished is returned by Client.Cancel for a job that has finished
// (done, failed or cancelled): nothing changed. A FinishedError carries
// the state it was in.
var ErrFinished = errors.New("workq: job already finished")

// FinishedError is the error of Cancel on a finished job; it matches
// ErrFinished.
type FinishedError struct {
	ID    int64
	State string // done, failed or cancelled
}

func (e *FinishedError) Error() string {
	return fmt.Sprintf("workq: job %d already finished (%s)", e.ID, e.State)
}

// Is makes errors.Is(err, ErrFinished) true.
func (e *FinishedError) Is(target error) bool { return target == ErrFinished }

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

// cancelActor is who a Client's cancels are archived as.
var cancelActor = "client:" + workqtype.DefaultOwner()

// Cancel cancels job run id. A job that is not running is cancelled at once
// (CancelledNow); a running one is stopped through its worker, in this
// process or another (CancelRequested). Cancelling it again while it stops
// is CancelRequested again. A finished job is left as it is: the error
// matches ErrFinished (a *FinishedError names its state); a missing one
// ErrNotFound. The cancel is archived in the run archive (actor
// "client:<host>-<pid>"), and admin.Retry undoes it.
//
// On a sharded Client, cancel through the job's shard:
// client.Shard(res.Shard).Cancel(ctx, res.ID).
func (c *Client) Cancel(ctx context.Context, id int64) (_ CancelResult, err error) {
	defer c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return 0, err
	}
	if c.set != nil {
		return 0, c.errShardID("Cancel")
	}
	return cancelJob(ctx, c.db, id)
}

// CancelTx is Cancel in the caller's transaction: a ready job is cancelled,
// and a running one's worker notified, when tx commits.
func (c *Client) CancelTx(ctx context.Context, tx pgx.Tx, id int64) (_ CancelResult, err error) {
	defer c.notMigrated(&err)
	if err := checkTx(ctx, tx); err != nil {
		return 0, err
	}
	if c.set != nil {
		return 0, c.errShardTx("CancelTx")
	}
	return cancelJob(ctx, c.in(tx), id)
}

func cancelJob(ctx context.Context, db DB, id int64) (CancelResult, error) {
	if id <= 0 || id > lease.MaxItemID {
		return 0, workqtype.Invalid("id", fmt.Sprintf("id %d: want 1 to %d", id, int64(lease.MaxItemID)))
	}
	e := lease.New(db, lease.JobRuns)
	got, err := e.Cancel(ctx, cancelActor, "", id)
	if err != nil {
		return 0, err
	}
	switch {
	case len(got.Now) == 1:
		return CancelledNow, nil
	case len(got.Requested) == 1:
		return CancelRequested, nil
	}
	// Not ready or running: finished, or gone. The status is read after
	// the cancel; a job cannot leave a finished state but by a revive.
	st, _, err := e.Status(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("cancel job %d: %w", id, err)
	}
	if !st.Finished() {
		// Revived or enqueued between the two statements: rare; say so
		// rather than guess.
		return 0, fmt.Errorf("cancel job %d: its state changed to %s meanwhile; try again", id, st)
	}
	return 0, &FinishedError{ID: id, State: st.String()}
}
