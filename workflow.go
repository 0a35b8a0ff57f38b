package workq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/workflows"
	"github.com/workq/workq/workqtype"
)

// ErrNotInWorkflow is the error (wrapped) of a workflow method called on a
// job that belongs to no workflow (Output, Job.Workflow, BatchResults).
var ErrNotInWorkflow = workqtype.ErrNotInWorkflow

// ErrWorkflowEnded is matched by the error of adding tasks to a workflow
// that has ended or is being cancelled (it wraps ErrInvalid: nothing was
// written), and of cancelling one that has ended (ErrWrongState).
var ErrWorkflowEnded = errors.New("workq: the workflow has ended")

// WorkflowRef names a workflow: its id and, on a Client of several shards,
// its shard (ids are unique per shard; "" looks it up on every shard).
type WorkflowRef struct {
	ID    int64
	Shard string
}

func (r WorkflowRef) String() string {
	if r.Shard == "" {
		return "workflow/" + strconv.FormatInt(r.ID, 10)
	}
	return r.Shard + ":workflow/" + strconv.FormatInt(r.ID, 10)
}

// WorkflowState is a workflow's state.
type WorkflowState string

// Workflow states. A workflow runs until every task has ended; it has
// then completed when every task is done, failed when one failed or was
// cancelled, and cancelled when CancelWorkflow asked for it.
const (
	WorkflowRunning   WorkflowState = "running"
	WorkflowCompleted WorkflowState = "completed"
	WorkflowFailed    WorkflowState = "failed"
	WorkflowCancelled WorkflowState = "cancelled"
)

// WorkflowOpts are a new workflow's options.
type WorkflowOpts struct {
	// Metadata is stored with the workflow (shown by the API, the CLI and
	// the dashboard); the limits of EnqueueOpts.Metadata apply.
	Metadata map[string]string
}

// TaskOpts are a task's options in a workflow.
type TaskOpts struct {
	// Enqueue are the task's job options (queue, priority, max attempts,
	// Delay, metadata, limit key), merged with the args' own as Enqueue
	// does. A task takes no DedupKey, Unique or RunAt (Delay counts from
	// the enqueue; a task released later runs at once if it is past).
	Enqueue *EnqueueOpts
	// DependsOn names the tasks that must end first. If one of them fails
	// or is cancelled, this task is cancelled (and its own dependents in
	// turn); if that one is retried and then succeeds, this task waits
	// for it again.
	DependsOn []string
	// DependsOnAnyOutcome names tasks that must end first, however they
	// end: this task runs after them anyway (a clean-up, a report).
	DependsOnAnyOutcome []string
}

// Workflow builds a workflow: a set of job runs (its tasks) with
// dependencies between them, written atomically by Enqueue or EnqueueTx.
// Make one with Client.NewWorkflow, or with Client.AddToWorkflow (or
// Job.Workflow) to add tasks to a running workflow. Add's mistakes are
// returned by Enqueue. A Workflow is not safe for concurrent use.
type Workflow struct {
	c      *Client
	spec   jobq.Workflow
	shard  string
	err    error
	result *WorkflowEnqueued
}

// WorkflowEnqueued is the outcome of Workflow.Enqueue.
type WorkflowEnqueued struct {
	Workflow WorkflowRef
	// Tasks are the job run ids of the tasks written, by name (with the
	// workflow's shard: ItemRef{Table: TableJobRuns, ID: id, Shard:
	// Workflow.Shard}).
	Tasks map[string]int64
}

// NewWorkflow starts a workflow named name (1 to 256 bytes; not unique).
// On a sharded Client the whole workflow lives on one shard, chosen when
// it is enqueued (as for jobs without a key); every call about it goes
// there.
func (c *Client) NewWorkflow(name string, opts *WorkflowOpts) *Workflow {
	w := &Workflow{c: c, spec: jobq.Workflow{Name: name}}
	if opts != nil {
		w.spec.Metadata = opts.Metadata
	}
	return w
}

// AddToWorkflow starts a set of tasks to add to a running workflow (a
// dynamic workflow: fan out over what a task found). Their dependencies
// may name the workflow's existing tasks, finished or not, as well as each
// other; an existing task gains no dependency. A task that depends only
// on finished tasks is ready at once (or cancelled, if one of them failed).
func (c *Client) AddToWorkflow(ref WorkflowRef) *Workflow {
	w := &Workflow{c: c, spec: jobq.Workflow{ID: ref.ID}, shard: ref.Shard}
	if ref.ID <= 0 {
		w.err = workqtype.Invalid("workflow", fmt.Sprintf("workflow id %d", ref.ID))
	}
	return w
}

// Add adds a task named name (unique in its workflow, 1 to 256 bytes)
// running args, a job of a registered kind. It returns w for chaining.
func (w *Workflow) Add(name string, args Args, opts *TaskOpts) *Workflow {
	if w.err != nil {
		return w
	}
	var o TaskOpts
	if opts != nil {
		o = *opts
	}
	j, err := job(args, o.Enqueue)
	if err == nil {
		err = w.c.kinds.check(j.Kind)
	}
	if err != nil {
		w.err = fmt.Errorf("task %q: %w", name, err)
		return w
	}
	w.spec.Tasks = append(w.spec.Tasks, jobq.Task{Name: name, Job: j, DependsOn: o.DependsOn, AnyOutcome: o.DependsOnAnyOutcome})
	return w
}

// Validate reports what is wrong with the workflow's shape (an error
// wrapping ErrInvalid: a cycle, an unknown dependency, a duplicate name,
// an invalid task), or nil. It touches no database.
func (w *Workflow) Validate() error {
	if w.err != nil {
		return w.err
	}
	return w.c.jobs.ValidateWorkflow(w.spec)
}

// Enqueue writes the workflow, or the added tasks, in one transaction on
// the pool (on a sharded Client: its shard's). Tasks without dependencies
// are ready at once; the others wait, pending. Nothing is written when it
// returns an error (ErrInvalid for a bad shape). A Workflow is enqueued
// once.
func (w *Workflow) Enqueue(ctx context.Context) (_ WorkflowEnqueued, err error) {
	defer w.c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return WorkflowEnqueued{}, err
	}
	if err := w.ready(); err != nil {
		return WorkflowEnqueued{}, err
	}
	sc, err := w.place(ctx)
	if err != nil {
		return WorkflowEnqueued{}, err
	}
	return w.write(ctx, sc, sc.db)
}

// EnqueueTx is Enqueue in the caller's transaction, beside the business
// write: the workflow exists if and only if tx commits (River's
// InsertManyTx of a workflow's jobs). On a sharded Client use
// client.Shard(name).NewWorkflow, on tx's database.
func (w *Workflow) EnqueueTx(ctx context.Context, tx pgx.Tx) (_ WorkflowEnqueued, err error) {
	defer w.c.notMigrated(&err)
	if err := checkTx(ctx, tx); err != nil {
		return WorkflowEnqueued{}, err
	}
	if err := w.ready(); err != nil {
		return WorkflowEnqueued{}, err
	}
	if w.c.set != nil {
		return WorkflowEnqueued{}, w.c.errShardTx("Workflow.EnqueueTx")
	}
	return w.write(ctx, w.c, tx)
}

func (w *Workflow) ready() error {
	if w.result != nil {
		return workqtype.Invalid("workflow", fmt.Sprintf("%s was already enqueued", w.result.Workflow))
	}
	return w.Validate()
}

// place picks the shard the workflow is written on: a new one's, round
// robin; an addition's, its workflow's.
func (w *Workflow) place(ctx context.Context) (*Client, error) {
	c := w.c
	if c.set == nil {
		return c, nil
	}
	if w.spec.ID == 0 {
		return c.set.pick(""), nil
	}
	return c.resolveWorkflow(ctx, WorkflowRef{ID: w.spec.ID, Shard: w.shard})
}

func (w *Workflow) write(ctx context.Context, sc *Client, db DB) (WorkflowEnqueued, error) {
	r, err := sc.jobs.EnqueueWorkflow(ctx, sc.in(db), w.spec)
	if err != nil {
		if errors.Is(err, jobq.ErrWorkflowEnded) {
			err = fmt.Errorf("%w (%w)", err, ErrWorkflowEnded)
		}
		return WorkflowEnqueued{}, fmt.Errorf("workq: enqueue workflow: %w", err)
	}
	res := WorkflowEnqueued{Workflow: WorkflowRef{ID: r.ID, Shard: sc.name}, Tasks: r.Tasks}
	w.result = &res
	return res, nil
}

// Ref is the workflow's reference once enqueued (the zero WorkflowRef
// before; an addition's is its workflow's).
func (w *Workflow) Ref() WorkflowRef {
	if w.result != nil {
		return w.result.Workflow
	}
	if w.spec.ID != 0 {
		return WorkflowRef{ID: w.spec.ID, Shard: w.shard}
	}
	return WorkflowRef{}
}

// Wait waits until the enqueued workflow has ended (Client.WaitWorkflow).
func (w *Workflow) Wait(ctx context.Context) (WorkflowInfo, error) {
	ref := w.Ref()
	if ref.ID == 0 {
		return WorkflowInfo{}, workqtype.Invalid("workflow", "Wait before Enqueue")
	}
	return w.c.WaitWorkflow(ctx, ref)
}

// WorkflowInfo is a workflow as Client.GetWorkflow reads it.
type WorkflowInfo struct {
	Ref   WorkflowRef
	Name  string
	State WorkflowState
	// Tasks counts its tasks; Done, Failed and Cancelled those that
	// ended so (the rest are pending, ready or running).
	Tasks, Done, Failed, Cancelled int
	Metadata                       map[string]string
	CancelRequestedAt              *time.Time
	CreatedAt                      time.Time
	FinishedAt                     *time.Time // nil while running
}

func workflowInfo(i workflows.Info, shard string) WorkflowInfo {
	return WorkflowInfo{Ref: WorkflowRef{ID: i.ID, Shard: shard}, Name: i.Name, State: WorkflowState(i.State), Tasks: i.Tasks,
		Done: i.Done, Failed: i.Failed, Cancelled: i.Cancelled, Metadata: i.Metadata, CancelRequestedAt: i.CancelRequestedAt,
		CreatedAt: i.CreatedAt, FinishedAt: i.FinishedAt}
}

// WorkflowTask is one task of a workflow as Client.WorkflowTasks reads it.
type WorkflowTask struct {
	Name  string
	JobID int64 // the job run (ItemRef{Table: TableJobRuns, ID: JobID, Shard: the workflow's})
	Kind  string
	Queue string
	// State is the job's: pending (waiting for its dependencies), ready,
	// in_progress, done, failed or cancelled.
	State               JobState
	Attempts            int
	MaxAttempts         int
	LastError           string
	Output              json.RawMessage // what its handler recorded (SetOutput); nil for none
	DependsOn           []string
	DependsOnAnyOutcome []string
	// DepsLeft counts its dependencies that have not ended.
	DepsLeft   int
	CreatedAt  time.Time
	RunAt      time.Time
	FinishedAt *time.Time
}

// resolveWorkflow returns the Client of the shard that holds ref's
// workflow: the one it names, the only one, or the one where it exists.
func (c *Client) resolveWorkflow(ctx context.Context, ref WorkflowRef) (*Client, error) {
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	if ref.ID <= 0 {
		return nil, workqtype.Invalid("workflow", fmt.Sprintf("workflow id %d", ref.ID))
	}
	if ref.Shard != "" || c.set == nil {
		return c.Shard(ref.Shard)
	}
	var on []*Client
	for _, sc := range c.set.shards {
		_, err := workflows.Get(ctx, sc.db, ref.ID)
		switch {
		case err == nil:
			on = append(on, sc)
		case !errors.Is(err, ErrNotFound):
			return nil, fmt.Errorf("workq: look %s up on shard %s: %w", ref, sc.name, workqtype.NotMigrated(err, sc.Schema()))
		}
	}
	switch len(on) {
	case 0:
		return nil, fmt.Errorf("workq: %s on no shard: %w", ref, ErrNotFound)
	case 1:
		return on[0], nil
	}
	return nil, workqtype.Invalid("shard", fmt.Sprintf("%s exists on several shards (ids are per shard): name the shard (WorkflowRef.Shard)", ref))
}

// GetWorkflow reads a workflow (ErrNotFound when it does not exist, or
// retention deleted it).
func (c *Client) GetWorkflow(ctx context.Context, ref WorkflowRef) (_ WorkflowInfo, err error) {
	defer c.notMigrated(&err)
	sc, err := c.resolveWorkflow(ctx, ref)
	if err != nil {
		return WorkflowInfo{}, err
	}
	i, err := workflows.Get(ctx, sc.db, ref.ID)
	if err != nil {
		return WorkflowInfo{}, fmt.Errorf("workq: %w", err)
	}
	return workflowInfo(i, sc.name), nil
}

// WorkflowTasks lists a workflow's tasks, in the order they were added,
// with their states, dependencies and outputs.
func (c *Client) WorkflowTasks(ctx context.Context, ref WorkflowRef) (_ []WorkflowTask, err error) {
	defer c.notMigrated(&err)
	sc, err := c.resolveWorkflow(ctx, ref)
	if err != nil {
		return nil, err
	}
	ts, err := workflows.Tasks(ctx, sc.db, ref.ID)
	if err != nil {
		return nil, fmt.Errorf("workq: %w", err)
	}
	out := make([]WorkflowTask, len(ts))
	for i, t := range ts {
		out[i] = WorkflowTask{Name: t.Name, JobID: t.JobID, Kind: t.Kind, Queue: t.Queue, State: JobState(t.State), Attempts: t.Attempts,
			MaxAttempts: t.MaxAttempts, LastError: t.LastError, Output: t.Output, DependsOn: t.DependsOn,
			DependsOnAnyOutcome: t.DependsOnAnyOutcome, DepsLeft: t.DepsLeft, CreatedAt: t.CreatedAt, RunAt: t.RunAt, FinishedAt: t.FinishedAt}
	}
	return out, nil
}

// ListWorkflowsParams select workflows for ListWorkflows.
type ListWorkflowsParams struct {
	State      WorkflowState // "" for every state
	NamePrefix string        // "" for every name
	Shard      string        // "" for every shard
	// Before lists ids below it, for the next page (0: from the newest);
	// on a sharded Client name the Shard to page through.
	Before int64
	Limit  int // 0: DefaultListLimit; at most MaxListLimit
}

// ListWorkflows lists workflows newest first (on a sharded Client each
// shard's newest, the shards in order).
func (c *Client) ListWorkflows(ctx context.Context, p ListWorkflowsParams) (_ []WorkflowInfo, err error) {
	defer c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	switch {
	case p.Limit == 0:
		p.Limit = DefaultListLimit
	case p.Limit < 0 || p.Limit > MaxListLimit:
		return nil, workqtype.Invalid("limit", fmt.Sprintf("limit %d, want 1 to %d", p.Limit, MaxListLimit))
	}
	if p.Before < 0 {
		return nil, workqtype.Invalid("before", fmt.Sprintf("before %d", p.Before))
	}
	shards := []*Client{c}
	if c.set != nil {
		shards = c.set.shards
	}
	if p.Shard != "" {
		sc, err := c.Shard(p.Shard)
		if err != nil {
			return nil, err
		}
		shards = []*Client{sc}
	}
	var out []WorkflowInfo
	for _, sc := range shards {
		is, err := workflows.List(ctx, sc.db, workflows.ListParams{State: string(p.State), NamePrefix: p.NamePrefix, Before: p.Before, Limit: p.Limit - len(out)})
		if err != nil {
			return nil, fmt.Errorf("workq: %w", err)
		}
		for _, i := range is {
			out = append(out, workflowInfo(i, sc.name))
		}
		if len(out) >= p.Limit {
			break
		}
	}
	return out, nil
}

// WorkflowCancelResult says what CancelWorkflow did.
type WorkflowCancelResult struct {
	Cancelled int // pending and ready tasks cancelled at once
	Requested int // running tasks asked to stop (their handlers' contexts are cancelled)
}

// CancelWorkflow cancels a running workflow: its pending and ready tasks
// end cancelled at once, its running tasks are asked to stop (as Cancel
// does), and it takes no more tasks. It ends cancelled when the running
// ones have ended. An error matching ErrWrongState and ErrWorkflowEnded
// when it has already ended.
func (c *Client) CancelWorkflow(ctx context.Context, ref WorkflowRef, opts *ActionOpts) (_ WorkflowCancelResult, err error) {
	defer c.notMigrated(&err)
	sc, err := c.resolveWorkflow(ctx, ref)
	if err != nil {
		return WorkflowCancelResult{}, err
	}
	a := actor(opts)
	if err := a.Check(); err != nil {
		return WorkflowCancelResult{}, err
	}
	r, err := workflows.Cancel(ctx, sc.db, ref.ID, a.Name, a.Reason)
	if errors.Is(err, workflows.ErrEnded) {
		err = fmt.Errorf("%w (%w)", err, ErrWorkflowEnded)
	}
	if err != nil {
		return WorkflowCancelResult{}, fmt.Errorf("workq: %w", err)
	}
	return WorkflowCancelResult{Cancelled: r.Cancelled, Requested: r.Requested}, nil
}

// RetryWorkflow runs a workflow's failed tasks again, and those cancelled
// other than by a failed dependency (the dependents a failure cancelled
// come back, pending, and run when it succeeds), and lifts a cancel. It
// returns how many tasks it revived; the workflow runs again until they
// end. While a cancel is still winding down (tasks that were running when
// it came have not ended: they end cancelled whatever their handlers
// return) it is refused with an error matching ErrWrongState: wait for
// the workflow to end (WaitWorkflow), then retry.
func (c *Client) RetryWorkflow(ctx context.Context, ref WorkflowRef, opts *ActionOpts) (_ int, err error) {
	defer c.notMigrated(&err)
	sc, err := c.resolveWorkflow(ctx, ref)
	if err != nil {
		return 0, err
	}
	a := actor(opts)
	if err := a.Check(); err != nil {
		return 0, err
	}
	n, err := workflows.Retry(ctx, sc.db, ref.ID, a.Name, a.Reason)
	if err != nil {
		return 0, fmt.Errorf("workq: %w", err)
	}
	return n, nil
}

// JobResult is a job run's end as Client.Wait returns it.
type JobResult struct {
	Ref       ItemRef
	State     JobState // done, failed or cancelled
	Output    json.RawMessage
	LastError string
}

// Wait waits until a job run has ended (done, failed or cancelled) and
// returns its state and output: woken by the database's NOTIFY when it
// ends, not by polling (a poll every 30 s covers a lost connection). ctx
// bounds the wait. It holds one pooled connection while it waits.
func (c *Client) Wait(ctx context.Context, ref ItemRef) (_ JobResult, err error) {
	defer c.notMigrated(&err)
	if ref.Table == "" {
		ref.Table = TableJobRuns
	}
	if ref.Table != TableJobRuns {
		return JobResult{}, workqtype.Invalid("table", fmt.Sprintf("Wait takes a job run, not %s", ref.Table))
	}
	sc, err := c.resolve(ctx, ref)
	if err != nil {
		return JobResult{}, err
	}
	end, err := sc.waiter().WaitJob(ctx, ref.ID)
	if err != nil {
		return JobResult{}, fmt.Errorf("workq: %w", err)
	}
	return JobResult{Ref: ItemRef{Table: TableJobRuns, ID: ref.ID, Shard: sc.name}, State: JobState(end.State), Output: end.Output, LastError: end.LastError}, nil
}

// WaitWorkflow waits until a workflow has ended and returns it, woken by
// NOTIFY as Wait is.
func (c *Client) WaitWorkflow(ctx context.Context, ref WorkflowRef) (_ WorkflowInfo, err error) {
	defer c.notMigrated(&err)
	sc, err := c.resolveWorkflow(ctx, ref)
	if err != nil {
		return WorkflowInfo{}, err
	}
	i, err := sc.waiter().WaitWorkflow(ctx, ref.ID)
	if err != nil {
		return WorkflowInfo{}, fmt.Errorf("workq: %w", err)
	}
	return workflowInfo(i, sc.name), nil
}

func (c *Client) waiter() workflows.Waiter {
	return workflows.Waiter{Pool: c.pool, Channel: workqtype.NotifyChannel(c.Schema(), "done"), Wrap: func(db workqtype.DB) workqtype.DB { return c.in(db) }}
}

// MaxOutputBytes bounds a job's output (SetOutput), in bytes of JSON.
const MaxOutputBytes = 1 << 20

// SetOutput records v, encoded as JSON (at most MaxOutputBytes), as the
// job's output: the completion that ends the attempt done stores it with
// the job, for its workflow's dependents (Output), for Wait and for the
// API, the CLI and the dashboard. A later call replaces it. An attempt
// that does not end done stores nothing. With CompleteTx, call it before:
// CompleteTx writes the output recorded when it is called, and SetOutput
// after a CompleteTx returns an error.
func (j *Job[T]) SetOutput(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return workqtype.Invalid("output", fmt.Sprintf("output of job %d: %v", j.ID, err))
	}
	if len(b) > MaxOutputBytes {
		return workqtype.Invalid("output", fmt.Sprintf("output of job %d is %d bytes, want at most %d", j.ID, len(b), MaxOutputBytes))
	}
	if j.raw == nil {
		return errors.New("workq: SetOutput on a job the runtime did not claim")
	}
	if j.raw.CompletedInTx() {
		return fmt.Errorf("workq: SetOutput of job %d after CompleteTx: the output was written with the completion (call SetOutput first)", j.ID)
	}
	j.raw.SetOutput(b)
	return nil
}

// TaskOf says which workflow a job belongs to.
type TaskOf struct {
	Workflow WorkflowRef
	Task     string // its name in the workflow
}

// Workflow reads the workflow the job is a task of (ErrNotInWorkflow when
// none). It reads the database on first use (it needs the Client in ctx:
// a handler's context).
func (j *Job[T]) Workflow(ctx context.Context) (TaskOf, error) {
	if j.task != nil {
		return *j.task, nil
	}
	c, err := ClientFromContextSafely(ctx)
	if err != nil {
		return TaskOf{}, err
	}
	sc, err := c.Shard(j.Shard)
	if err != nil {
		return TaskOf{}, err
	}
	id, name, err := workflows.Of(ctx, sc.db, j.ID)
	if err != nil {
		return TaskOf{}, fmt.Errorf("workq: %w", err)
	}
	j.task = &TaskOf{Workflow: WorkflowRef{ID: id, Shard: sc.name}, Task: name}
	return *j.task, nil
}

// AddTasks starts a set of tasks to add to the job's own workflow
// (Client.AddToWorkflow): fan out over what this task found. Enqueue them
// with EnqueueTx in the handler's transaction, beside CompleteTx, so that
// the additions and "this task done" commit together.
func (j *Job[T]) AddTasks(ctx context.Context) (*Workflow, error) {
	t, err := j.Workflow(ctx)
	if err != nil {
		return nil, err
	}
	c := ClientFromContext(ctx)
	sc, err := c.Shard(t.Workflow.Shard)
	if err != nil {
		return nil, err
	}
	return sc.AddToWorkflow(t.Workflow), nil
}

// Output reads the output of the task named task in job's workflow,
// decoded into O: a dependency's result, typed. The task must have ended
// done; an error matching ErrWrongState otherwise, ErrNotFound for a name
// the workflow does not have, ErrNotInWorkflow for a job outside
// workflows. A done task that recorded no output gives O's zero value.
func Output[O any, T Args](ctx context.Context, job *Job[T], task string) (O, error) {
	var out O
	t, err := job.Workflow(ctx)
	if err != nil {
		return out, err
	}
	sc, err := ClientFromContext(ctx).Shard(t.Workflow.Shard)
	if err != nil {
		return out, err
	}
	id, state, raw, err := workflows.Output(ctx, sc.db, t.Workflow.ID, task)
	if err != nil {
		return out, fmt.Errorf("workq: %w", err)
	}
	if state != StateDone {
		return out, fmt.Errorf("task %q: %w", task, &StateError{Ref: ItemRef{Table: TableJobRuns, ID: id, Shard: sc.name}, Action: "Output", State: state, Takes: StateDone})
	}
	if raw == nil {
		return out, nil
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return out, fmt.Errorf("workq: decode the output of task %q into %T: %w", task, out, err)
	}
	return out, nil
}

// BatchCounts are how a batch's tasks ended, as its callback sees them.
type BatchCounts struct {
	Done, Failed, Cancelled int
	Total                   int
}

// BatchResults counts how the tasks the job waited for ended (done,
// failed, cancelled): in a batch's callback (NewBatch), its whole batch.
func BatchResults[T Args](ctx context.Context, job *Job[T]) (BatchCounts, error) {
	t, err := job.Workflow(ctx)
	if err != nil {
		return BatchCounts{}, err
	}
	sc, err := ClientFromContext(ctx).Shard(t.Workflow.Shard)
	if err != nil {
		return BatchCounts{}, err
	}
	n, err := workflows.DepCounts(ctx, sc.db, job.ID)
	if err != nil {
		return BatchCounts{}, fmt.Errorf("workq: %w", err)
	}
	return BatchCounts{Done: n.Done, Failed: n.Failed, Cancelled: n.Cancelled, Total: n.Total}, nil
}

// BatchCallback is the name of a batch's callback task (NewBatch); its
// other tasks are named by their index, "0", "1"...
const BatchCallback = "callback"

// NewBatch builds a batch: the jobs of params as tasks "0", "1"..., and a
// callback task running callback after all of them have ended, however
// they ended; its handler reads how many succeeded, failed and were
// cancelled with BatchResults. opts are the callback's: its Enqueue
// options (its dependencies are the batch's tasks; DependsOn or
// DependsOnAnyOutcome are refused with ErrInvalid by Enqueue). Enqueue it
// like any workflow:
//
//	res, err := client.NewBatch("import", params, ImportDone{}, nil).Enqueue(ctx)
func (c *Client) NewBatch(name string, params []EnqueueParams, callback Args, opts *TaskOpts) *Workflow {
	w := c.NewWorkflow(name, nil)
	names := make([]string, len(params))
	for i, p := range params {
		names[i] = strconv.Itoa(i)
		w.Add(names[i], p.Args, &TaskOpts{Enqueue: p.Opts})
	}
	var o TaskOpts
	if opts != nil {
		o = *opts
	}
	if (len(o.DependsOn) > 0 || len(o.DependsOnAnyOutcome) > 0) && w.err == nil {
		w.err = workqtype.Invalid("depends_on", "a batch's callback depends on the batch's tasks: NewBatch's opts take no DependsOn or DependsOnAnyOutcome")
		return w
	}
	o.DependsOnAnyOutcome = names
	return w.Add(BatchCallback, callback, &o)
}
