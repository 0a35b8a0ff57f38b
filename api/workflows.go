package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/workq/workq"
)

// Workflows (docs/go.md, "Workflows"): job runs that depend on job runs.
// Every handler is a call of the Client's (NewWorkflow and AddToWorkflow
// with Add and Enqueue, GetWorkflow, WorkflowTasks, ListWorkflows,
// CancelWorkflow, RetryWorkflow, WaitWorkflow), which validates the
// request (an error wrapping ErrInvalid: 400, nothing written). A task's
// job is a workq.RawArgs of its kind and args, checked as POST /v1/jobs
// checks a job (the Client's kinds, its payload limit).

// MaxWait bounds the wait parameter of GET /v1/workflows/{id} and GET
// /v1/tables/job_runs/items/{id}; the server's write timeout bounds it
// too (waitLimit).
const MaxWait = 60 * time.Second

// workflowRequest is the body of POST /v1/workflows.
type workflowRequest struct {
	Name     string            `json:"name"`
	Metadata map[string]string `json:"metadata"`
	Tasks    []taskRequest     `json:"tasks"`
}

// tasksRequest is the body of POST /v1/workflows/{id}/tasks.
type tasksRequest struct {
	Tasks []taskRequest `json:"tasks"`
	Shard string        `json:"shard"` // sharded API: the workflow's shard (left out: looked up)
}

type taskRequest struct {
	Name                string            `json:"name"`
	Kind                string            `json:"kind"`
	Args                json.RawMessage   `json:"args"`
	Queue               *string           `json:"queue"`
	Priority            int16             `json:"priority"`
	MaxAttempts         int               `json:"max_attempts"`
	Delay               *string           `json:"delay"`
	Metadata            map[string]string `json:"metadata"`
	LimitKey            string            `json:"limit_key"`
	DependsOn           []string          `json:"depends_on"`
	DependsOnAnyOutcome []string          `json:"depends_on_any_outcome"`
}

// workflowCreated is the answer of POST /v1/workflows and of POST
// /v1/workflows/{id}/tasks: the workflow and the job run ids of the tasks
// written, by name.
type workflowCreated struct {
	ID    int64            `json:"id"`
	Shard string           `json:"shard,omitempty"`
	Tasks map[string]int64 `json:"tasks"`
}

// workflowRow is a workflow as the API shows it.
type workflowRow struct {
	ID                int64             `json:"id"`
	Shard             string            `json:"shard,omitempty"`
	Name              string            `json:"name"`
	State             string            `json:"state"`
	Tasks             int               `json:"tasks"`
	Done              int               `json:"done"`
	Failed            int               `json:"failed"`
	Cancelled         int               `json:"cancelled"`
	Metadata          map[string]string `json:"metadata,omitempty"`
	CancelRequestedAt *time.Time        `json:"cancel_requested_at,omitempty"`
	CreatedAt         time.Time         `json:"created_at"`
	FinishedAt        *time.Time        `json:"finished_at,omitempty"`
}

// taskRow is one task of GET /v1/workflows/{id}.
type taskRow struct {
	Name                string          `json:"name"`
	JobID               int64           `json:"job_id"`
	Kind                string          `json:"kind"`
	Queue               string          `json:"queue"`
	State               string          `json:"state"`
	Attempts            int             `json:"attempts"`
	MaxAttempts         int             `json:"max_attempts"`
	LastError           string          `json:"last_error,omitempty"`
	Output              json.RawMessage `json:"output,omitempty"`
	DependsOn           []string        `json:"depends_on"`
	DependsOnAnyOutcome []string        `json:"depends_on_any_outcome"`
	DepsLeft            int             `json:"deps_left"`
	CreatedAt           time.Time       `json:"created_at"`
	RunAt               time.Time       `json:"run_at"`
	FinishedAt          *time.Time      `json:"finished_at,omitempty"`
}

// workflowWithTasks is the answer of GET /v1/workflows/{id}.
type workflowWithTasks struct {
	Workflow workflowRow `json:"workflow"`
	Tasks    []taskRow   `json:"tasks"`
	// TimedOut: a wait ran out before the workflow ended (it is shown as
	// it is).
	TimedOut bool `json:"timed_out,omitempty"`
}

type workflowList struct {
	Workflows []workflowRow `json:"workflows"`
}

// workflowActionRequest is the optional body of cancel and retry.
type workflowActionRequest struct {
	Reason string `json:"reason"`
	Shard  string `json:"shard"` // sharded API: the workflow's shard (left out: looked up)
}

type workflowCancelled struct {
	ID        int64  `json:"id"`
	Shard     string `json:"shard,omitempty"`
	Cancelled int    `json:"cancelled"` // pending and ready tasks cancelled at once
	Requested int    `json:"requested"` // running tasks asked to stop
}

type workflowRetried struct {
	ID      int64  `json:"id"`
	Shard   string `json:"shard,omitempty"`
	Revived int    `json:"revived"` // tasks that run again (or wait again, pending)
}

func (s *Server) workflowRowOf(i workq.WorkflowInfo) workflowRow {
	return workflowRow{ID: i.Ref.ID, Shard: s.shardLabel(i.Ref.Shard), Name: i.Name, State: string(i.State), Tasks: i.Tasks,
		Done: i.Done, Failed: i.Failed, Cancelled: i.Cancelled, Metadata: i.Metadata, CancelRequestedAt: i.CancelRequestedAt,
		CreatedAt: i.CreatedAt, FinishedAt: i.FinishedAt}
}

func taskRowOf(t workq.WorkflowTask) taskRow {
	r := taskRow{Name: t.Name, JobID: t.JobID, Kind: t.Kind, Queue: t.Queue, State: string(t.State), Attempts: t.Attempts,
		MaxAttempts: t.MaxAttempts, LastError: t.LastError, Output: t.Output, DependsOn: t.DependsOn,
		DependsOnAnyOutcome: t.DependsOnAnyOutcome, DepsLeft: t.DepsLeft, CreatedAt: t.CreatedAt, RunAt: t.RunAt, FinishedAt: t.FinishedAt}
	if r.DependsOn == nil {
		r.DependsOn = []string{}
	}
	if r.DependsOnAnyOutcome == nil {
		r.DependsOnAnyOutcome = []string{}
	}
	return r
}

// addTasks adds the tasks of a request to w: each task's job is built and
// checked as POST /v1/jobs's (its errors name tasks[i]); the workflow's
// shape (names, dependencies, cycles) is checked by Enqueue.
func (s *Server) addTasks(w *workq.Workflow, tasks []taskRequest) error {
	if len(tasks) == 0 {
		return invalid("tasks", "give 1 to %d tasks", MaxBatch)
	}
	if len(tasks) > MaxBatch {
		return invalid("tasks", "%d tasks, want at most %d per request", len(tasks), MaxBatch)
	}
	for i, in := range tasks {
		pre := fmt.Sprintf("tasks[%d]", i)
		q, err := queueName(pre+".queue", in.Queue)
		if err != nil {
			return err
		}
		var delay time.Duration
		if in.Delay != nil {
			if delay, err = parseDuration(pre+".delay", *in.Delay); err != nil {
				return err
			}
		}
		args := workq.RawArgs{KindName: in.Kind, Payload: payloadOf(in.Args)}
		o := &workq.EnqueueOpts{Queue: q, Priority: in.Priority, Delay: delay, MaxAttempts: in.MaxAttempts,
			Metadata: in.Metadata, LimitKey: in.LimitKey}
		if err := s.client.ValidateArgs(args, o); err != nil {
			return invalidErr(pre, err)
		}
		w.Add(in.Name, args, &workq.TaskOpts{Enqueue: o, DependsOn: in.DependsOn, DependsOnAnyOutcome: in.DependsOnAnyOutcome})
	}
	if err := w.Validate(); err != nil {
		return invalidErr("", err)
	}
	return nil
}

func (s *Server) workflowCreatedOf(res workq.WorkflowEnqueued) workflowCreated {
	return workflowCreated{ID: res.Workflow.ID, Shard: s.shardLabel(res.Workflow.Shard), Tasks: res.Tasks}
}

func (s *Server) createWorkflow(w http.ResponseWriter, r *http.Request, p principal) error {
	if _, err := query(r); err != nil {
		return err
	}
	var in workflowRequest
	if err := s.decodeBody(w, r, &in, false); err != nil {
		return err
	}
	wf := s.client.NewWorkflow(in.Name, &workq.WorkflowOpts{Metadata: in.Metadata})
	if err := s.addTasks(wf, in.Tasks); err != nil {
		return err
	}
	res, err := wf.Enqueue(r.Context())
	if err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "api create workflow", "workflow", res.Workflow.String(), "name", in.Name,
		"tasks", len(res.Tasks), "actor", p.actor())
	writeJSON(w, http.StatusCreated, s.workflowCreatedOf(res))
	return nil
}

// workflowRef reads the {id} path parameter and the workflow's shard: ""
// (looked up on every shard) or the one named (400 or 404 when there is
// none).
func (s *Server) workflowRef(r *http.Request, shardField, shard string) (workq.WorkflowRef, error) {
	id, err := parseInt("id", r.PathValue("id"), 1, maxItemID)
	if err != nil {
		return workq.WorkflowRef{}, err
	}
	sh, err := s.flowShard(shardField, shard)
	return workq.WorkflowRef{ID: id, Shard: sh}, err
}

func (s *Server) addWorkflowTasks(w http.ResponseWriter, r *http.Request, p principal) error {
	if _, err := query(r); err != nil {
		return err
	}
	var in tasksRequest
	if err := s.decodeBody(w, r, &in, false); err != nil {
		return err
	}
	ref, err := s.workflowRef(r, "shard", in.Shard)
	if err != nil {
		return err
	}
	wf := s.client.AddToWorkflow(ref)
	if err := s.addTasks(wf, in.Tasks); err != nil {
		return err
	}
	res, err := wf.Enqueue(r.Context())
	if err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "api add workflow tasks", "workflow", res.Workflow.String(), "tasks", len(res.Tasks), "actor", p.actor())
	writeJSON(w, http.StatusCreated, s.workflowCreatedOf(res))
	return nil
}

func (s *Server) listWorkflows(w http.ResponseWriter, r *http.Request, _ principal) error {
	q, err := query(r, "state", "name_prefix", "before", "limit", "shard")
	if err != nil {
		return err
	}
	var lp workq.ListWorkflowsParams
	if q.Has("state") {
		switch st := workq.WorkflowState(q.Get("state")); st {
		case workq.WorkflowRunning, workq.WorkflowCompleted, workq.WorkflowFailed, workq.WorkflowCancelled:
			lp.State = st
		default:
			return invalid("state", "%q: want running, completed, failed or cancelled", st)
		}
	}
	if q.Has("name_prefix") {
		if lp.NamePrefix = q.Get("name_prefix"); lp.NamePrefix == "" {
			return invalid("name_prefix", "must not be empty (omit it for every name)")
		}
	}
	if q.Has("before") {
		n, err := parseInt("before", q.Get("before"), 1, maxItemID)
		if err != nil {
			return err
		}
		lp.Before = n
	}
	if q.Has("limit") {
		n, err := parseInt("limit", q.Get("limit"), 1, workq.MaxListLimit)
		if err != nil {
			return err
		}
		lp.Limit = int(n)
	}
	if q.Has("shard") && q.Get("shard") == "" {
		return invalid("shard", "must not be empty (omit it to list every shard)")
	}
	if lp.Shard, err = s.flowShard("shard", q.Get("shard")); err != nil {
		return err
	}
	if lp.Before != 0 && lp.Shard == "" && s.sharded() {
		return invalid("before", "name the shard to page through (ids are per shard)")
	}
	is, err := s.client.ListWorkflows(r.Context(), lp)
	if err != nil {
		return err
	}
	out := workflowList{Workflows: make([]workflowRow, len(is))}
	for i, wi := range is {
		out.Workflows[i] = s.workflowRowOf(wi)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// waitPlaces is how many requests may wait at once (Server.waits): a
// quarter of the smallest shard pool's connections, at least one.
func waitPlaces(c *workq.Client) int {
	n := int32(0)
	for _, name := range c.Shards() {
		sc, err := c.Shard(name)
		if err != nil || sc.Pool() == nil {
			continue
		}
		if m := sc.Pool().Config().MaxConns; n == 0 || m < n {
			n = m
		}
	}
	return max(1, int(n)/4)
}

// waitLimit is how long a request may wait: wait, at most MaxWait, and
// short of the server's write timeout (the answer must still be written).
func (s *Server) waitLimit(wait time.Duration) time.Duration {
	limit := s.o.WriteTimeout - 5*time.Second
	if limit < s.o.WriteTimeout/2 {
		limit = s.o.WriteTimeout / 2
	}
	return min(wait, limit)
}

// waitParam reads the wait query parameter: 0 when it is absent.
func waitParam(q map[string][]string) (time.Duration, error) {
	v, ok := q["wait"]
	if !ok {
		return 0, nil
	}
	d, err := parseDuration("wait", v[0])
	if err != nil {
		return 0, err
	}
	if d > MaxWait {
		return 0, invalid("wait", "%q: want at most %s", v[0], MaxWait)
	}
	return d, nil
}

// waitFor runs wait for at most d (waitLimit): it reports whether the time
// ran out first, which is no error (the caller shows what is there).
func (s *Server) waitFor(ctx context.Context, d time.Duration, wait func(context.Context) error) (timedOut bool, err error) {
	wctx, cancel := context.WithTimeout(ctx, s.waitLimit(d))
	defer cancel()
	select {
	case s.waits <- struct{}{}:
		defer func() { <-s.waits }()
	case <-wctx.Done():
		if ctx.Err() == nil {
			return true, nil // no place freed in time: the same answer as a wait that ran out
		}
		return false, context.Cause(ctx)
	}
	err = wait(wctx)
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return true, nil
	}
	return false, err
}

func (s *Server) getWorkflow(w http.ResponseWriter, r *http.Request, _ principal) error {
	q, err := query(r, "shard", "wait")
	if err != nil {
		return err
	}
	wait, err := waitParam(q)
	if err != nil {
		return err
	}
	ref, err := s.workflowRef(r, "shard", q.Get("shard"))
	if err != nil {
		return err
	}
	var out workflowWithTasks
	if wait > 0 {
		out.TimedOut, err = s.waitFor(r.Context(), wait, func(ctx context.Context) error {
			_, err := s.client.WaitWorkflow(ctx, ref)
			return err
		})
		if err != nil {
			return err
		}
	}
	info, err := s.client.GetWorkflow(r.Context(), ref)
	if err != nil {
		return err
	}
	ref = info.Ref // its shard: the tasks are read there
	ts, err := s.client.WorkflowTasks(r.Context(), ref)
	if err != nil {
		return err
	}
	out.Workflow, out.Tasks = s.workflowRowOf(info), make([]taskRow, len(ts))
	for i, t := range ts {
		out.Tasks[i] = taskRowOf(t)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// workflowAction reads the path and the optional body of cancel and retry.
func (s *Server) workflowAction(w http.ResponseWriter, r *http.Request, p principal) (workq.WorkflowRef, *workq.ActionOpts, error) {
	if _, err := query(r); err != nil {
		return workq.WorkflowRef{}, nil, err
	}
	var in workflowActionRequest
	if err := s.decodeBody(w, r, &in, true); err != nil {
		return workq.WorkflowRef{}, nil, err
	}
	ref, err := s.workflowRef(r, "shard", in.Shard)
	return ref, &workq.ActionOpts{Actor: p.actor(), Reason: in.Reason}, err
}

func (s *Server) cancelWorkflow(w http.ResponseWriter, r *http.Request, p principal) error {
	ref, by, err := s.workflowAction(w, r, p)
	if err != nil {
		return err
	}
	res, err := s.client.CancelWorkflow(r.Context(), ref, by)
	if err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "api cancel workflow", "workflow", ref.String(), "cancelled", res.Cancelled,
		"requested", res.Requested, "actor", by.Actor, "reason", by.Reason)
	writeJSON(w, http.StatusOK, workflowCancelled{ID: ref.ID, Shard: s.shardLabel(ref.Shard), Cancelled: res.Cancelled, Requested: res.Requested})
	return nil
}

func (s *Server) retryWorkflow(w http.ResponseWriter, r *http.Request, p principal) error {
	ref, by, err := s.workflowAction(w, r, p)
	if err != nil {
		return err
	}
	n, err := s.client.RetryWorkflow(r.Context(), ref, by)
	if err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "api retry workflow", "workflow", ref.String(), "revived", n, "actor", by.Actor, "reason", by.Reason)
	writeJSON(w, http.StatusOK, workflowRetried{ID: ref.ID, Shard: s.shardLabel(ref.Shard), Revived: n})
	return nil
}
