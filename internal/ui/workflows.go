package ui

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/shardlist"
)

// Limits of the workflow pages.
const (
	maxGraphTasks = 500 // tasks drawn in a workflow's graph (the table lists them all)
	maxOutputOut  = 200 // characters of a task's output in the tasks table
	maxTaskError  = 200 // characters of a task's last error in the tasks table
)

// workflowStates are the states the workflows page filters by.
var workflowStates = []string{string(workq.WorkflowRunning), string(workq.WorkflowCompleted), string(workq.WorkflowFailed),
	string(workq.WorkflowCancelled)}

// workflowFilter is the workflows page's filter as its form fields.
type workflowFilter struct{ State, Name, Shard string }

func (f workflowFilter) query() url.Values {
	v := url.Values{}
	for name, val := range map[string]string{"state": f.State, "name": f.Name, "shard": f.Shard} {
		if val != "" {
			v.Set(name, val)
		}
	}
	return v
}

// workflowsData is the workflows page: a page of workflows, newest first.
type workflowsData struct {
	Filter    workflowFilter
	States    []string
	Workflows []workq.WorkflowInfo
	Next      template.URL // query string of the next page ("" on the last)
	First     bool
	Sharded   bool
	Shards    []string
	Error     string // a bad filter
	Down      []shardNotice
}

// workflowsPage lists workflows newest first (Client.ListWorkflows),
// filtered by state and name prefix: of one shard (the filter's, or the
// one database), paged by id (?before=), or of every shard of a sharded
// dashboard, merged newest first, paged by a cursor of every shard's
// position (?cursor=, as the items pages).
func (h *Handler) workflowsPage(w http.ResponseWriter, r *http.Request, x *session) error {
	q := r.URL.Query()
	d := workflowsData{Filter: workflowFilter{State: q.Get("state"), Name: strings.TrimSpace(q.Get("name")), Shard: q.Get("shard")},
		States: workflowStates, Sharded: h.sharded(), Shards: h.shardList()}
	status := http.StatusOK
	if err := h.listWorkflows(r.Context(), q, &d); err != nil {
		var br *badRequest
		if !errors.As(err, &br) && !errors.Is(err, workq.ErrInvalid) || br != nil && br.status != http.StatusBadRequest {
			return err
		}
		d.Error, status = messageOf(err), http.StatusBadRequest
		d.Workflows, d.Next, d.Down = nil, "", nil
	}
	if !h.sharded() {
		for i := range d.Workflows {
			d.Workflows[i].Ref.Shard = ""
		}
	}
	h.render(w, r, x, status, "workflows", "Workflows", "workflows", d)
	return nil
}

func (h *Handler) listWorkflows(ctx context.Context, q url.Values, d *workflowsData) error {
	f := d.Filter
	if f.State != "" && !slices.Contains(workflowStates, f.State) {
		return bad("state %q: want one of %s", f.State, strings.Join(workflowStates, ", "))
	}
	p := workq.ListWorkflowsParams{State: workq.WorkflowState(f.State), NamePrefix: f.Name, Limit: pageSize + 1}
	if !h.sharded() || f.Shard != "" {
		name, err := h.shardNamed(f.Shard)
		if err != nil {
			return err
		}
		p.Shard = name
		if b := q.Get("before"); b != "" {
			n, err := strconv.ParseInt(b, 10, 64)
			if err != nil || n < 1 {
				return bad("before %q is not a workflow id: start from the newest", b)
			}
			p.Before = n
		}
		d.First = p.Before == 0
		ws, err := h.client.ListWorkflows(ctx, p)
		if err != nil {
			return err
		}
		if len(ws) > pageSize {
			ws = ws[:pageSize]
			nq := f.query()
			nq.Set("before", strconv.FormatInt(ws[pageSize-1].Ref.ID, 10))
			d.Next = template.URL(nq.Encode())
		}
		d.Workflows = ws
		return nil
	}
	return h.listWorkflowsMerged(ctx, p, q.Get("cursor"), d)
}

// listWorkflowsMerged is a page of every shard's workflows, newest first
// (created, then shard and id): each shard's page is read at once from its
// position in the cursor (shardlist.Cursor: absent from its newest, 0
// done), and the next cursor holds where each goes on. A shard that does
// not answer within ShardTimeout is left out with a notice and keeps its
// position.
func (h *Handler) listWorkflowsMerged(ctx context.Context, p workq.ListWorkflowsParams, cursor string, d *workflowsData) error {
	cur := shardlist.Cursor{}
	if cursor != "" {
		c, err := shardlist.ParseCursor(cursor)
		for name := range c {
			if !slices.Contains(h.shards, name) {
				err = errors.New("unknown shard")
			}
		}
		if err != nil {
			return bad("cursor %q is not a position of this list: start from the newest", cursor)
		}
		cur = c
	}
	d.First = cursor == ""
	var mu sync.Mutex
	got := map[string][]workq.WorkflowInfo{}
	failed := h.client.EachShard(ctx, h.o.ShardTimeout, func(ctx context.Context, sc *workq.Client) error {
		before, ok := cur[sc.ShardName()]
		if ok && before == 0 {
			return nil // done
		}
		sp := p
		sp.Before = before
		ws, err := sc.ListWorkflows(ctx, sp)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		got[sc.ShardName()] = ws
		return nil
	})
	d.Down = h.notices(ctx, failed)
	var all []workq.WorkflowInfo
	for _, name := range h.shards {
		all = append(all, got[name]...)
	}
	slices.SortStableFunc(all, func(a, b workq.WorkflowInfo) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Ref.Shard, b.Ref.Shard); c != 0 {
			return c
		}
		return cmp.Compare(b.Ref.ID, a.Ref.ID)
	})
	if len(all) > pageSize {
		all = all[:pageSize]
	}
	d.Workflows = all
	taken := map[string]int{}
	last := map[string]int64{}
	for _, wf := range all {
		taken[wf.Ref.Shard]++
		last[wf.Ref.Shard] = wf.Ref.ID
	}
	next := shardlist.Cursor{}
	more := false
	for _, name := range h.shards {
		before, ok := cur[name]
		switch {
		case ok && before == 0:
			next[name] = 0
		case failed[name] != nil:
			if ok {
				next[name] = before
			}
			more = true
		case taken[name] == len(got[name]): // all it had (it was asked one more than a page)
			next[name] = 0
		case taken[name] > 0:
			next[name], more = last[name], true
		default: // none taken: it goes on from where it was
			if ok {
				next[name] = before
			}
			more = true
		}
	}
	if more {
		nq := d.Filter.query()
		nq.Set("cursor", next.String())
		d.Next = template.URL(nq.Encode())
	}
	return nil
}

// workflowData is a workflow's page.
type workflowData struct {
	Info      workq.WorkflowInfo
	Shard     string // of a sharded dashboard ("": unsharded)
	Self      string // this page, relative to the root
	Metadata  []detailRow
	Tasks     []taskRow
	Graph     template.HTML // the SVG of the drawn tasks
	Drawn     int           // tasks drawn (at most maxGraphTasks)
	CanCancel bool
	CanRetry  bool
}

// taskRow is a task of the tasks table.
type taskRow struct {
	workq.WorkflowTask
	Output string // compact, truncated
}

// workflowRef reads the workflow of a page or a form: its id from the
// path, its shard from shard ("" on a sharded dashboard: the Client looks
// it up on every shard).
func (h *Handler) workflowRef(r *http.Request, shard string) (workq.WorkflowRef, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		return workq.WorkflowRef{}, notFound("%q is not a workflow id.", r.PathValue("id"))
	}
	ref := workq.WorkflowRef{ID: id}
	if shard != "" || !h.sharded() {
		if ref.Shard, err = h.shardNamed(shard); err != nil {
			return workq.WorkflowRef{}, err
		}
	}
	return ref, nil
}

// workflowPage shows a workflow: its header, its Cancel and Retry
// actions, the drawing of its graph (at most maxGraphTasks tasks) and the
// table of all its tasks (Client.GetWorkflow, WorkflowTasks).
func (h *Handler) workflowPage(w http.ResponseWriter, r *http.Request, x *session) error {
	ref, err := h.workflowRef(r, r.URL.Query().Get("shard"))
	if err != nil {
		return err
	}
	info, err := h.client.GetWorkflow(r.Context(), ref)
	if err != nil {
		return err
	}
	ref = info.Ref
	tasks, err := h.client.WorkflowTasks(r.Context(), ref)
	if err != nil {
		return err
	}
	d := workflowData{Info: info, Self: "workflows/" + strconv.FormatInt(ref.ID, 10),
		CanCancel: info.State == workq.WorkflowRunning && info.CancelRequestedAt == nil,
		CanRetry:  info.Failed > 0 || info.Cancelled > 0}
	title := fmt.Sprintf("Workflow %d", ref.ID)
	if h.sharded() {
		d.Shard = ref.Shard
		d.Self += "?shard=" + url.QueryEscape(ref.Shard)
		title = fmt.Sprintf("Workflow %s:%d", ref.Shard, ref.ID)
	} else {
		d.Info.Ref.Shard = ""
	}
	for _, k := range sortedKeys(info.Metadata) {
		d.Metadata = append(d.Metadata, detailRow{k, info.Metadata[k]})
	}
	for _, t := range tasks {
		row := taskRow{WorkflowTask: t}
		if len(t.Output) > 0 {
			row.Output = truncate(maxOutputOut, compactJSON(t.Output))
		}
		row.LastError = truncate(maxTaskError, t.LastError)
		d.Tasks = append(d.Tasks, row)
	}
	drawn := tasks
	if len(drawn) > maxGraphTasks {
		drawn = drawn[:maxGraphTasks]
	}
	d.Drawn = len(drawn)
	d.Graph = drawGraph(drawn, root(r), d.Shard)
	h.render(w, r, x, http.StatusOK, "workflow", title, "workflows", d)
	return nil
}

// actWorkflow is Cancel (confirmed first) or Retry of a workflow
// (Client.CancelWorkflow, RetryWorkflow), by the session's actor with the
// form's reason; the result is the flash of the workflow's page.
func (h *Handler) actWorkflow(w http.ResponseWriter, r *http.Request, x *session) error {
	f := r.PostForm
	verb := r.PathValue("op")
	if verb != "cancel" && verb != "retry" {
		return notFound("There is no workflow action %q (cancel and retry are).", verb)
	}
	ref, err := h.workflowRef(r, f.Get("shard"))
	if err != nil {
		return err
	}
	if h.sharded() && ref.Shard == "" {
		return bad("Name the workflow's shard: this dashboard serves several (%s).", h.shardNames())
	}
	name := fmt.Sprintf("Workflow %d", ref.ID)
	ret := "workflows/" + strconv.FormatInt(ref.ID, 10)
	if h.sharded() {
		name = fmt.Sprintf("Workflow %s:%d", ref.Shard, ref.ID)
		ret += "?shard=" + url.QueryEscape(ref.Shard)
	}
	if verb == "cancel" && f.Get("confirm") != "yes" {
		h.confirm(w, r, x, "workflows/"+strconv.FormatInt(ref.ID, 10)+"/cancel",
			fmt.Sprintf("Cancel %s? Its pending and ready tasks end cancelled, its running ones are asked to stop, and it takes no more tasks.",
				strings.ToLower(name[:1])+name[1:]), true)
		return nil
	}
	by := &workq.ActionOpts{Actor: actor(x), Reason: f.Get("reason")}
	var msg string
	switch verb {
	case "cancel":
		res, err := h.client.CancelWorkflow(r.Context(), ref, by)
		h.log.InfoContext(r.Context(), "dashboard cancel workflow", "workflow", ref.String(), "actor", by.Actor, "cancelled", res.Cancelled,
			"requested", res.Requested, "err", err)
		switch {
		case errors.Is(err, workq.ErrWrongState):
			msg = name + " has already ended: there is nothing to cancel."
		case err != nil:
			return err
		default:
			msg = fmt.Sprintf("%s cancelled: %d task(s) cancelled at once, %d running asked to stop (it ends cancelled when they have).",
				name, res.Cancelled, res.Requested)
		}
	case "retry":
		n, err := h.client.RetryWorkflow(r.Context(), ref, by)
		h.log.InfoContext(r.Context(), "dashboard retry workflow", "workflow", ref.String(), "actor", by.Actor, "revived", n, "err", err)
		switch {
		case errors.Is(err, workq.ErrWrongState):
			msg = name + ": nothing to retry (" + messageOf(err) + ")."
		case err != nil:
			return err
		case n == 0:
			msg = name + ": nothing to retry (no failed or cancelled task)."
		default:
			msg = fmt.Sprintf("%s retried: %d task(s) run again; it runs until they end.", name, n)
		}
	}
	h.sessions.setFlash(x, msg)
	h.poke()
	redirect(w, r, ret)
	return nil
}

// compactJSON is raw without insignificant space (raw itself if it is
// not JSON).
func compactJSON(raw []byte) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return strings.ToValidUTF8(string(raw), "\uFFFD")
	}
	return b.String()
}
