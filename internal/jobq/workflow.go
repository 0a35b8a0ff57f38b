package jobq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/otelx"
	"github.com/workq/workq/workqtype"
)

// Task is one task of a workflow: a job run with a name and dependencies.
type Task struct {
	Name string
	Job  Job
	// DependsOn names the tasks that must end first; if one fails or is
	// cancelled, this task is cancelled.
	DependsOn []string
	// AnyOutcome names tasks that must end first, whatever their outcome.
	AnyOutcome []string
}

// Workflow is a set of tasks to write: a new workflow (ID 0) or more tasks
// of a running one.
type Workflow struct {
	ID       int64 // 0: a new workflow named Name
	Name     string
	Metadata map[string]string
	Tasks    []Task
}

// WorkflowWritten is the outcome of EnqueueWorkflow.
type WorkflowWritten struct {
	ID    int64
	Tasks map[string]int64 // job run id by task name, for the tasks written
}

// Limits of a workflow's shape.
const (
	MaxTaskName      = 256     // bytes
	MaxWorkflowTasks = 100_000 // tasks per call
	MaxTaskDeps      = 100_000 // dependencies per task
)

// Errors of adding tasks to a workflow, each wrapping ErrInvalid: the
// workflow named does not exist, or has ended.
var (
	ErrWorkflowNotFound = fmt.Errorf("%w: no such workflow", workqtype.ErrNotFound)
	ErrWorkflowEnded    = fmt.Errorf("%w: the workflow has ended", workqtype.ErrInvalid)
)

// CheckTaskName checks a task's name: 1 to MaxTaskName bytes of UTF-8
// without NUL or control characters.
func CheckTaskName(field, name string) error {
	if name == "" || len(name) > MaxTaskName {
		return workqtype.Invalid(field, fmt.Sprintf("task name %q: want 1 to %d bytes", name, MaxTaskName))
	}
	if !utf8.ValidString(name) {
		return workqtype.Invalid(field, fmt.Sprintf("task name %q is not UTF-8", name))
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return workqtype.Invalid(field, fmt.Sprintf("task name %q has a control character", name))
		}
	}
	return nil
}

// checkWorkflow validates w's shape: names, dependencies (known, not
// repeated, no cycle), and the tasks' jobs (no dedup key or uniqueness,
// Delay rather than RunAt). A new workflow's dependencies must all be its
// own tasks; an addition's may name the workflow's earlier tasks, which the
// database checks.
func (c *Client) checkWorkflow(w Workflow) ([]prepared, error) {
	if w.ID == 0 {
		if w.Name == "" || len(w.Name) > 256 || !utf8.ValidString(w.Name) || strings.ContainsRune(w.Name, 0) {
			return nil, workqtype.Invalid("name", fmt.Sprintf("workflow name %q: want 1 to 256 bytes of UTF-8 without NUL", w.Name))
		}
	} else if w.ID < 0 {
		return nil, workqtype.Invalid("workflow", fmt.Sprintf("workflow id %d", w.ID))
	}
	if len(w.Tasks) == 0 {
		return nil, workqtype.Invalid("tasks", "a workflow needs at least one task")
	}
	if len(w.Tasks) > MaxWorkflowTasks {
		return nil, workqtype.Invalid("tasks", fmt.Sprintf("%d tasks in one call, want at most %d", len(w.Tasks), MaxWorkflowTasks))
	}
	if _, err := workqtype.EncodeMetadata("metadata", w.Metadata); err != nil {
		return nil, err
	}
	index := make(map[string]int, len(w.Tasks))
	for i, t := range w.Tasks {
		if err := CheckTaskName("tasks", t.Name); err != nil {
			return nil, fmt.Errorf("task %d: %w", i, err)
		}
		if _, dup := index[t.Name]; dup {
			return nil, workqtype.Invalid("tasks", fmt.Sprintf("two tasks are named %q", t.Name))
		}
		index[t.Name] = i
	}
	rows := make([]prepared, len(w.Tasks))
	for i, t := range w.Tasks {
		if t.Job.DedupKey != "" || !t.Job.Unique.IsZero() {
			return nil, workqtype.Invalid("tasks", fmt.Sprintf("task %q: a workflow's task takes no dedup key or unique options", t.Name))
		}
		p, err := c.prepare(t.Job)
		if err != nil {
			return nil, fmt.Errorf("task %q: %w", t.Name, err)
		}
		if p.runAt != nil {
			return nil, fmt.Errorf("task %q: %w", t.Name, workqtype.Invalid("run_at", "a workflow's task takes Delay, not RunAt"))
		}
		rows[i] = p
		n := len(t.DependsOn) + len(t.AnyOutcome)
		if n > MaxTaskDeps {
			return nil, workqtype.Invalid("depends_on", fmt.Sprintf("task %q has %d dependencies, want at most %d", t.Name, n, MaxTaskDeps))
		}
		seen := make(map[string]bool, n)
		for _, d := range append(append([]string(nil), t.DependsOn...), t.AnyOutcome...) {
			if err := CheckTaskName("depends_on", d); err != nil {
				return nil, fmt.Errorf("task %q: %w", t.Name, err)
			}
			switch {
			case d == t.Name:
				return nil, workqtype.Invalid("depends_on", fmt.Sprintf("task %q depends on itself", t.Name))
			case seen[d]:
				return nil, workqtype.Invalid("depends_on", fmt.Sprintf("task %q names its dependency %q twice", t.Name, d))
			}
			seen[d] = true
			if _, ok := index[d]; !ok && w.ID == 0 {
				return nil, workqtype.Invalid("depends_on", fmt.Sprintf("task %q depends on %q, which the workflow does not have", t.Name, d))
			}
		}
	}
	if cyc := cycle(w.Tasks, index); cyc != nil {
		return nil, workqtype.Invalid("depends_on", fmt.Sprintf("the dependencies form a cycle: %s", strings.Join(cyc, " -> ")))
	}
	return rows, nil
}

// cycle returns a cycle among tasks' dependencies on each other (names,
// the first repeated at the end), or nil. Iterative depth-first search: a
// chain of 100,000 tasks must not exhaust the stack.
func cycle(tasks []Task, index map[string]int) []string {
	const (
		white = iota
		grey
		black
	)
	color := make([]int8, len(tasks))
	deps := func(i int) []int {
		var out []int
		for _, list := range [][]string{tasks[i].DependsOn, tasks[i].AnyOutcome} {
			for _, d := range list {
				if j, ok := index[d]; ok {
					out = append(out, j)
				}
			}
		}
		return out
	}
	type frame struct {
		node int
		next []int
	}
	for root := range tasks {
		if color[root] != white {
			continue
		}
		stack := []frame{{root, deps(root)}}
		color[root] = grey
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if len(top.next) == 0 {
				color[top.node] = black
				stack = stack[:len(stack)-1]
				continue
			}
			j := top.next[0]
			top.next = top.next[1:]
			switch color[j] {
			case grey:
				var path []string
				start := 0
				for k, f := range stack {
					if f.node == j {
						start = k
					}
				}
				for _, f := range stack[start:] {
					path = append(path, tasks[f.node].Name)
				}
				return append(path, tasks[j].Name)
			case white:
				color[j] = grey
				stack = append(stack, frame{j, deps(j)})
			}
		}
	}
	return nil
}

// ValidateWorkflow reports what is wrong with w (an error wrapping
// ErrInvalid), or nil when EnqueueWorkflow would accept its shape. It
// touches no database.
func (c *Client) ValidateWorkflow(w Workflow) error {
	_, err := c.checkWorkflow(w)
	return err
}

// beginner begins a transaction, or a savepoint in one.
type beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// EnqueueWorkflow writes w in one transaction on db (a savepoint when db is
// a transaction): a new workflow and its tasks, or more tasks of a running
// one. A task with dependencies starts pending; the others are ready at
// once. Nothing is written when it returns an error.
func (c *Client) EnqueueWorkflow(ctx context.Context, db DB, w Workflow) (_ WorkflowWritten, err error) {
	rows, err := c.checkWorkflow(w)
	if err != nil {
		return WorkflowWritten{}, err
	}
	b, ok := db.(beginner)
	if !ok {
		return WorkflowWritten{}, fmt.Errorf("enqueue workflow: %T cannot begin a transaction", db)
	}
	ctx, span, tc := c.startEnqueue(ctx, "", "", len(rows))
	defer func() { otelx.End(span, err) }()
	tx, err := b.Begin(ctx)
	if err != nil {
		return WorkflowWritten{}, fmt.Errorf("enqueue workflow: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	out, err := c.writeWorkflow(ctx, gen.New(tx), w, rows, tc)
	if err != nil {
		return WorkflowWritten{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return WorkflowWritten{}, fmt.Errorf("enqueue workflow: %w", err)
	}
	return out, nil
}

func (c *Client) writeWorkflow(ctx context.Context, q *gen.Queries, w Workflow, rows []prepared, tc traceContext) (WorkflowWritten, error) {
	n := len(rows)
	id := w.ID
	if id != 0 {
		// An addition: say so first when the workflow does not exist or
		// has ended (the attach checks again, under the workflow's lock).
		cur, err := q.WorkflowGet(ctx, id)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return WorkflowWritten{}, fmt.Errorf("workflow %d: %w", id, ErrWorkflowNotFound)
		case err != nil:
			return WorkflowWritten{}, fmt.Errorf("read workflow %d: %w", id, err)
		case cur.Status != 0 || cur.CancelRequestedAt != nil:
			return WorkflowWritten{}, fmt.Errorf("workflow %d: %w", id, ErrWorkflowEnded)
		}
	}
	if id == 0 {
		meta, _ := workqtype.EncodeMetadata("metadata", w.Metadata) // checked
		r, err := q.WorkflowCreate(ctx, gen.WorkflowCreateParams{Name: w.Name, Metadata: meta, Tasks: int32(n)})
		if err != nil {
			return WorkflowWritten{}, fmt.Errorf("create workflow: %w", err)
		}
		id = r.ID
	}
	b := batchOf(rows)
	b.metadatas = make([]string, n)
	for i := range rows {
		b.metadatas[i] = string(rows[i].metadata(tc))
	}
	b.limitKeys = make([]string, n)
	pending := make([]bool, n)
	statuses := make([]int16, n)
	names := make([]string, n)
	deps := make([]int32, n)
	for i, t := range w.Tasks {
		b.limitKeys[i] = rows[i].limitKey
		names[i] = t.Name
		deps[i] = int32(len(t.DependsOn) + len(t.AnyOutcome))
		pending[i] = deps[i] > 0
		if pending[i] {
			statuses[i] = -1
		}
	}
	ids, err := q.WorkflowInsertTasks(ctx, gen.WorkflowInsertTasksParams{
		Queues: b.queues, Kinds: b.kinds, Payloads: b.payloads, Priorities: b.priorities, DelaysMs: b.delaysMs,
		MaxAttempts: b.maxAttempts, Metadatas: b.metadatas, LimitKeys: b.limitKeys, WorkflowID: id, Statuses: statuses,
	})
	if err != nil {
		return WorkflowWritten{}, fmt.Errorf("write %d tasks of workflow %d: %w", n, id, err)
	}
	if len(ids) != n {
		return WorkflowWritten{}, fmt.Errorf("write %d tasks of workflow %d: %d ids returned", n, id, len(ids))
	}
	if err := q.WorkflowInsertTaskRows(ctx, gen.WorkflowInsertTaskRowsParams{JobIds: ids, WorkflowID: id, Names: names, Deps: deps}); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23505" {
			return WorkflowWritten{}, workqtype.Invalid("tasks", fmt.Sprintf("workflow %d already has a task of one of these names (%s)", id, pe.Detail))
		}
		return WorkflowWritten{}, fmt.Errorf("name the tasks of workflow %d: %w", id, err)
	}
	// Edges between tasks of this call go by id; an addition's edges to
	// the workflow's earlier tasks go by name, looked up in the database.
	byName := make(map[string]int64, n)
	for i, t := range w.Tasks {
		byName[t.Name] = ids[i]
	}
	var depIDs, taskIDs, namedTaskIDs []int64
	var anyOutcome, namedAnyOutcome []bool
	var depNames []string
	edge := func(task int64, dep string, any bool) {
		if id, ok := byName[dep]; ok {
			depIDs, taskIDs, anyOutcome = append(depIDs, id), append(taskIDs, task), append(anyOutcome, any)
			return
		}
		namedTaskIDs, depNames, namedAnyOutcome = append(namedTaskIDs, task), append(depNames, dep), append(namedAnyOutcome, any)
	}
	for i, t := range w.Tasks {
		for _, d := range t.DependsOn {
			edge(ids[i], d, false)
		}
		for _, d := range t.AnyOutcome {
			edge(ids[i], d, true)
		}
	}
	if len(depIDs) > 0 {
		if err := q.WorkflowInsertDepIDs(ctx, gen.WorkflowInsertDepIDsParams{DepIds: depIDs, TaskIds: taskIDs, WorkflowID: id, AnyOutcome: anyOutcome}); err != nil {
			return WorkflowWritten{}, fmt.Errorf("write the dependencies of workflow %d: %w", id, err)
		}
	}
	if len(namedTaskIDs) > 0 {
		got, err := q.WorkflowInsertDeps(ctx, gen.WorkflowInsertDepsParams{TaskIds: namedTaskIDs, DepNames: depNames, AnyOutcome: namedAnyOutcome, WorkflowID: id})
		if err != nil {
			return WorkflowWritten{}, fmt.Errorf("write the dependencies of workflow %d: %w", id, err)
		}
		if got != int64(len(namedTaskIDs)) {
			return WorkflowWritten{}, workqtype.Invalid("depends_on", fmt.Sprintf("a dependency names a task workflow %d does not have (%d of %d found among %s)",
				id, got, len(namedTaskIDs), strings.Join(depNames, ", ")))
		}
	}
	// A new workflow counted its tasks when it was written, and none of
	// them can have a dependency that has ended; an addition is counted
	// and settled under the workflow's lock.
	if w.ID != 0 {
		if _, err := q.WorkflowAttach(ctx, id, ids); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) {
				switch pe.Code {
				case "WQW01":
					return WorkflowWritten{}, fmt.Errorf("workflow %d: %w", id, ErrWorkflowNotFound)
				case "WQW02":
					return WorkflowWritten{}, fmt.Errorf("workflow %d: %w", id, ErrWorkflowEnded)
				}
			}
			return WorkflowWritten{}, fmt.Errorf("attach the tasks of workflow %d: %w", id, err)
		}
	}
	var ready []string
	for i := range rows {
		if !pending[i] && c.shouldNotify(rows[i].queue) {
			ready = append(ready, rows[i].queue)
		}
	}
	if len(ready) > 0 {
		if err := q.WorkflowNotify(ctx, ready); err != nil {
			return WorkflowWritten{}, fmt.Errorf("notify the queues of workflow %d: %w", id, err)
		}
	}
	out := WorkflowWritten{ID: id, Tasks: make(map[string]int64, n)}
	for i, t := range w.Tasks {
		out.Tasks[t.Name] = ids[i]
	}
	return out, nil
}
