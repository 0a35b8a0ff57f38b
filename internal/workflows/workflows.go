// Package workflows reads and acts on workflows: job runs that depend on
// job runs (db/migrations/00026_workflows.sql). Writing them is package
// jobq's (EnqueueWorkflow); the Client of package workq is the front door
// to both. Every function runs on a DB already bound to the workq schema.
package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/workqtype"
)

// ErrNotFound is the error (wrapped) for a workflow that does not exist.
var ErrNotFound = fmt.Errorf("%w: no such workflow", workqtype.ErrNotFound)

// ErrNotInWorkflow is the error (wrapped) for a job that belongs to no
// workflow, asked for its workflow.
var ErrNotInWorkflow = workqtype.ErrNotInWorkflow

// ErrNoTask is the error (wrapped) for a task name the workflow does not
// have.
var ErrNoTask = fmt.Errorf("%w: no such task", workqtype.ErrNotFound)

// States of a workflow, by workflows.status.
const (
	Running   = "running"
	Completed = "completed"
	Failed    = "failed"
	Cancelled = "cancelled"
)

// StateName is the name of a workflows.status.
func StateName(s int16) string {
	switch s {
	case 0:
		return Running
	case 2:
		return Completed
	case 3:
		return Failed
	case 4:
		return Cancelled
	}
	return fmt.Sprintf("status(%d)", s)
}

// ParseState reads a state name into its status.
func ParseState(name string) (int16, bool) {
	for _, s := range []int16{0, 2, 3, 4} {
		if StateName(s) == name {
			return s, true
		}
	}
	return 0, false
}

// Info is one workflow.
type Info struct {
	ID                int64
	Name              string
	State             string
	Tasks             int
	Done              int
	Failed            int
	Cancelled         int
	Metadata          map[string]string
	CancelRequestedAt *time.Time
	CreatedAt         time.Time
	FinishedAt        *time.Time
}

func infoOf(w gen.Workflow) Info {
	return Info{ID: w.ID, Name: w.Name, State: StateName(w.Status), Tasks: int(w.Tasks), Done: int(w.Done), Failed: int(w.Failed),
		Cancelled: int(w.Cancelled), Metadata: workqtype.DecodeMetadata(w.Metadata), CancelRequestedAt: w.CancelRequestedAt,
		CreatedAt: w.CreatedAt, FinishedAt: w.FinishedAt}
}

// Task is one task of a workflow.
type Task struct {
	JobID               int64
	Name                string
	Kind                string
	Queue               string
	State               string // a job run's state: pending, ready, in_progress, done, failed, cancelled
	Attempts            int
	MaxAttempts         int
	LastError           string
	Output              json.RawMessage
	DependsOn           []string
	DependsOnAnyOutcome []string
	DepsLeft            int // dependencies that have not ended
	CreatedAt           time.Time
	RunAt               time.Time
	FinishedAt          *time.Time
}

// Get reads one workflow.
func Get(ctx context.Context, db workqtype.DB, id int64) (Info, error) {
	w, err := gen.New(db).WorkflowGet(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return Info{}, fmt.Errorf("workflow %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Info{}, fmt.Errorf("read workflow %d: %w", id, err)
	}
	return infoOf(w), nil
}

// ListParams select workflows.
type ListParams struct {
	State      string // "" for all
	NamePrefix string
	Before     int64 // ids below (0: from the newest)
	Limit      int
}

// List lists workflows newest first.
func List(ctx context.Context, db workqtype.DB, p ListParams) ([]Info, error) {
	var status *int16
	if p.State != "" {
		s, ok := ParseState(p.State)
		if !ok {
			return nil, workqtype.Invalid("state", fmt.Sprintf("workflow state %q is not one of running, completed, failed, cancelled", p.State))
		}
		status = &s
	}
	rows, err := gen.New(db).WorkflowList(ctx, gen.WorkflowListParams{BeforeID: p.Before, Status: status, NamePrefix: p.NamePrefix, MaxRows: int32(p.Limit)})
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	out := make([]Info, len(rows))
	for i, r := range rows {
		out[i] = infoOf(r)
	}
	return out, nil
}

// Tasks lists a workflow's tasks in id order (ErrNotFound for no workflow).
func Tasks(ctx context.Context, db workqtype.DB, id int64) ([]Task, error) {
	if _, err := Get(ctx, db, id); err != nil {
		return nil, err
	}
	rows, err := gen.New(db).WorkflowTasks(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("list the tasks of workflow %d: %w", id, err)
	}
	out := make([]Task, len(rows))
	for i, r := range rows {
		t := Task{JobID: r.JobID, Name: r.Name, Kind: r.Kind, Queue: r.Queue, State: lease.Status(r.Status).String(),
			Attempts: int(r.Attempts), MaxAttempts: int(r.MaxAttempts), DependsOn: r.DependsOn, DependsOnAnyOutcome: r.DependsOnAnyOutcome,
			DepsLeft: int(r.DepsLeft), CreatedAt: r.CreatedAt, RunAt: r.RunAt, FinishedAt: r.FinishedAt}
		if r.LastError != nil {
			t.LastError = *r.LastError
		}
		if r.Output != nil {
			t.Output = json.RawMessage(r.Output)
		}
		out[i] = t
	}
	return out, nil
}

// Of reads the workflow and task name of job run id (ErrNotInWorkflow when
// it is in none, workqtype.ErrNotFound when it does not exist).
func Of(ctx context.Context, db workqtype.DB, id int64) (workflow int64, task string, err error) {
	r, err := gen.New(db).WorkflowOfJob(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, "", fmt.Errorf("job run %d: %w", id, workqtype.ErrNotFound)
	}
	if err != nil {
		return 0, "", fmt.Errorf("read the workflow of job run %d: %w", id, err)
	}
	if r.WorkflowID == nil {
		return 0, "", fmt.Errorf("job run %d: %w", id, ErrNotInWorkflow)
	}
	return *r.WorkflowID, r.Task, nil
}

// Output reads the job run id, state and output of the task named name.
func Output(ctx context.Context, db workqtype.DB, workflow int64, name string) (id int64, state string, output json.RawMessage, err error) {
	r, err := gen.New(db).WorkflowTaskOutput(ctx, workflow, name)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, "", nil, fmt.Errorf("workflow %d task %q: %w", workflow, name, ErrNoTask)
	}
	if err != nil {
		return 0, "", nil, fmt.Errorf("read the output of workflow %d task %q: %w", workflow, name, err)
	}
	return r.ID, lease.Status(r.Status).String(), r.Output, nil
}

// Counts are how a task's dependencies ended.
type Counts struct{ Done, Failed, Cancelled, Total int }

// DepCounts counts how the dependencies of task (a job run id) ended.
func DepCounts(ctx context.Context, db workqtype.DB, task int64) (Counts, error) {
	r, err := gen.New(db).WorkflowDepCounts(ctx, task)
	if err != nil {
		return Counts{}, fmt.Errorf("count the dependencies of job run %d: %w", task, err)
	}
	return Counts{Done: int(r.Done), Failed: int(r.Failed), Cancelled: int(r.Cancelled), Total: int(r.Total)}, nil
}

// CancelResult says what Cancel did.
type CancelResult struct {
	Cancelled int // tasks cancelled at once (pending and ready)
	Requested int // running tasks asked to stop
}

// ErrCancelling is the error (wrapped) of Retry on a workflow whose cancel
// is still winding down (its running tasks have not ended yet).
var ErrCancelling = fmt.Errorf("%w: the workflow's cancel is still winding down (its running tasks end cancelled); wait for it to end, then retry", workqtype.ErrWrongState)

// ErrEnded is the error (wrapped) of Cancel on a workflow that has ended.
var ErrEnded = fmt.Errorf("%w: the workflow has ended", workqtype.ErrWrongState)

// Cancel cancels a running workflow in one transaction on db: its pending
// and ready tasks end cancelled, its running ones are asked to stop (as
// Client.Cancel does), and it takes no more tasks; it ends cancelled once
// the running ones end. Lock order: the tasks' rows, then the workflow's
// (as every completion takes them).
func Cancel(ctx context.Context, db workqtype.TxDB, id int64, actor, reason string) (CancelResult, error) {
	return retryDeadlock(ctx, func() (CancelResult, error) { return cancelOnce(ctx, db, id, actor, reason) })
}

// retryDeadlock runs f again when the database broke a deadlock by
// aborting it: an operator's action on a workflow can meet a completion
// that holds the workflow's lock and waits for a task row the action
// locked (the completion's own flush retries likewise).
func retryDeadlock[R any](ctx context.Context, f func() (R, error)) (R, error) {
	for attempt := 1; ; attempt++ {
		r, err := f()
		var pe *pgconn.PgError
		if err == nil || attempt == 5 || !errors.As(err, &pe) || pe.Code != "40P01" || ctx.Err() != nil {
			return r, err
		}
	}
}

func cancelOnce(ctx context.Context, db workqtype.TxDB, id int64, actor, reason string) (_ CancelResult, err error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return CancelResult{}, fmt.Errorf("cancel workflow %d: %w", id, err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	q := gen.New(tx)
	e := lease.New(tx, lease.JobRuns)
	var res CancelResult
	cancel := func() error {
		ids, err := q.WorkflowUnfinished(ctx, id)
		if err != nil || len(ids) == 0 {
			return err
		}
		r, err := e.Cancel(ctx, actor, reason, ids...)
		res.Cancelled += len(r.Now)
		res.Requested += len(r.Requested)
		return err
	}
	if err := cancel(); err != nil {
		return CancelResult{}, fmt.Errorf("cancel workflow %d: %w", id, err)
	}
	running, err := q.WorkflowRequestCancel(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return CancelResult{}, fmt.Errorf("workflow %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return CancelResult{}, fmt.Errorf("cancel workflow %d: %w", id, err)
	}
	if !running && res.Cancelled+res.Requested == 0 {
		return CancelResult{}, fmt.Errorf("workflow %d: %w", id, ErrEnded)
	}
	// Tasks added before the cancel request held the workflow's lock.
	if err := cancel(); err != nil {
		return CancelResult{}, fmt.Errorf("cancel workflow %d: %w", id, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return CancelResult{}, fmt.Errorf("cancel workflow %d: %w", id, err)
	}
	return res, nil
}

// Retry runs a workflow's failed tasks again, and those cancelled other
// than by a failed dependency (whose cancelled dependents come back
// pending with them), and clears a cancel request: one transaction. It
// returns how many tasks it revived.
func Retry(ctx context.Context, db workqtype.TxDB, id int64, actor, reason string) (int, error) {
	w, err := Get(ctx, db, id)
	if err != nil {
		return 0, err
	}
	if w.State == Running && w.CancelRequestedAt != nil {
		// Its running tasks were told to stop and end cancelled whatever
		// their handlers return: a retry now would lift the request and
		// then lose them. Retry once it has ended.
		return 0, fmt.Errorf("workflow %d: %w", id, ErrCancelling)
	}
	return retryDeadlock(ctx, func() (int, error) { return retryOnce(ctx, db, id, actor, reason) })
}

func retryOnce(ctx context.Context, db workqtype.TxDB, id int64, actor, reason string) (_ int, err error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("retry workflow %d: %w", id, err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	q := gen.New(tx)
	ids, err := q.WorkflowRetryIDs(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("retry workflow %d: %w", id, err)
	}
	var n int
	if len(ids) > 0 {
		revived, err := lease.New(tx, lease.JobRuns).Revive(ctx, actor, reason, ids...)
		if err != nil {
			return 0, fmt.Errorf("retry workflow %d: %w", id, err)
		}
		n = len(revived)
	}
	if err := q.WorkflowClearCancel(ctx, id); err != nil {
		return 0, fmt.Errorf("retry workflow %d: %w", id, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("retry workflow %d: %w", id, err)
	}
	return n, nil
}

// DeleteFinished deletes up to max workflows that ended more than
// olderThan ago, with their tasks (retention).
func DeleteFinished(ctx context.Context, db workqtype.DB, olderThan time.Duration, max int) (int64, error) {
	n, err := gen.New(db).WorkflowDeleteFinished(ctx, olderThan.Milliseconds(), int32(max))
	if err != nil {
		return 0, fmt.Errorf("delete finished workflows: %w", err)
	}
	return n, nil
}

// JobEnd is a job run's state and output as Wait returns them.
type JobEnd struct {
	State     string
	Output    json.RawMessage
	LastError string
}

// Waiter waits on one pool, with the schema's notification channel
// ("<schema>_done").
type Waiter struct {
	Pool    *pgxpool.Pool
	Channel string
	Wrap    func(workqtype.DB) workqtype.DB // binds statements to the schema
}

// listen holds a pooled connection listening on the channel until done is
// called (which unlistens before giving the connection back).
func (w Waiter) listen(ctx context.Context) (*pgxpool.Conn, func(), error) {
	conn, err := w.Pool.Acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	if _, err := conn.Exec(ctx, "listen "+pgx.Identifier{w.Channel}.Sanitize()); err != nil {
		conn.Release()
		return nil, nil, err
	}
	return conn, func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := conn.Exec(uctx, "unlisten *"); err != nil {
			// A connection in an unknown state does not go back to the pool.
			_ = conn.Conn().Close(uctx)
		}
		conn.Release()
	}, nil
}

// until waits for a notification with payload want, calling check first
// and after every notification and every poll interval (a safety net for
// a notification lost with a connection): check reports done.
func (w Waiter) until(ctx context.Context, want string, check func(ctx context.Context, db workqtype.DB) (bool, error)) error {
	conn, done, err := w.listen(ctx)
	if err != nil {
		return err
	}
	defer done()
	db := w.Wrap(conn.Conn())
	const safety = 30 * time.Second
	for {
		ok, err := check(ctx, db)
		if err != nil || ok {
			return err
		}
		for {
			nctx, cancel := context.WithTimeout(ctx, safety)
			n, err := conn.Conn().WaitForNotification(nctx)
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					return context.Cause(ctx)
				}
				var pe *pgconn.PgError
				if errors.As(err, &pe) || !errors.Is(err, context.DeadlineExceeded) {
					return err
				}
				break // the safety poll
			}
			if n.Payload == want {
				break
			}
		}
	}
}

// WaitJob waits until job run id ends and returns its end. It marks the
// row awaited, so that its end notifies.
func (w Waiter) WaitJob(ctx context.Context, id int64) (JobEnd, error) {
	var end JobEnd
	err := w.until(ctx, fmt.Sprintf("j%d", id), func(ctx context.Context, db workqtype.DB) (bool, error) {
		r, err := gen.New(db).WorkflowAwait(ctx, id)
		if errors.Is(err, pgx.ErrNoRows) {
			// No row in job_runs: ended done and moved to job_runs_done
			// (read by a statement of its own, whose snapshot sees a move
			// that committed while WorkflowAwait waited for the row), or
			// no such job.
			var d gen.WorkflowAwaitDoneRow
			d, err = gen.New(db).WorkflowAwaitDone(ctx, id)
			r = gen.WorkflowAwaitRow(d)
		}
		if errors.Is(err, pgx.ErrNoRows) {
			return false, fmt.Errorf("job run %d: %w", id, workqtype.ErrNotFound)
		}
		if err != nil {
			return false, fmt.Errorf("wait for job run %d: %w", id, err)
		}
		st := lease.Status(r.Status)
		if !st.Finished() {
			return false, nil
		}
		end = JobEnd{State: st.String(), Output: r.Output}
		if r.LastError != nil {
			end.LastError = *r.LastError
		}
		return true, nil
	})
	return end, err
}

// WaitWorkflow waits until workflow id ends and returns it.
func (w Waiter) WaitWorkflow(ctx context.Context, id int64) (Info, error) {
	var info Info
	err := w.until(ctx, fmt.Sprintf("w%d", id), func(ctx context.Context, db workqtype.DB) (bool, error) {
		i, err := Get(ctx, db, id)
		if err != nil {
			return false, err
		}
		info = i
		return i.State != Running, nil
	})
	return info, err
}
