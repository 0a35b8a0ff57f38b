package api

import (
	"context"
	"fmt"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/schedule"
	"github.com/workq/workq/internal/shardlist"
	"github.com/workq/workq/workqtype"
)

// The reads and operator writes of work the handlers make, one function
// per operation, on one shard of the Client
// (dbShard: its DB in the Client's schema) or on all of them. Enqueues are
// the Client's own methods (enqueue.go). Items, queues and schedules go
// through the Client (the Client of the shard, client.Shard); each
// function turns the Client's answer into the API's JSON shape (the
// admin types the API has always answered with). The dashboard's sampler
// reads the Client too (ui.SamplerOptions.Client).

// shardClient is the Client of shard sh (the Client itself when it has
// one database).
func (s *Server) shardClient(sh dbShard) (*workq.Client, error) { return s.client.Shard(sh.Name) }

// --- items

// opList is one page of the items of shard sh matching f (its cursor
// f.Before, an id: the Client's cursor of that one shard).
func (s *Server) opList(ctx context.Context, sh dbShard, t lease.Table, f admin.Filter) (admin.Page, error) {
	c, err := s.shardClient(sh)
	if err != nil {
		return admin.Page{}, err
	}
	p := listParams(t, f)
	if f.Before > 0 {
		p.Cursor = shardlist.Cursor{c.ShardName(): f.Before}.String()
	}
	res, err := c.List(ctx, p)
	if err != nil {
		return admin.Page{}, err
	}
	page := admin.Page{Items: res.Items}
	if page.Items == nil {
		page.Items = []admin.Item{}
	}
	for i := range page.Items {
		page.Items[i].Shard = sh.Name // "" on a Client of one database
	}
	next, err := clientCursor(res.Next)
	if err != nil {
		return admin.Page{}, err
	}
	page.Next = next[c.ShardName()]
	return page, nil
}

// opListMerged is one page of the items of every shard matching f (the
// sharded Client's List, from cur).
func (s *Server) opListMerged(ctx context.Context, t lease.Table, f admin.Filter, cur shardlist.Cursor) (shardlist.Page, error) {
	p := listParams(t, f)
	if len(cur) > 0 {
		p.Cursor = cur.String()
	}
	res, err := s.client.List(ctx, p)
	if err != nil {
		return shardlist.Page{}, err
	}
	page := shardlist.Page{Items: res.Items}
	if page.Next, err = clientCursor(res.Next); err != nil {
		return shardlist.Page{}, err
	}
	return page, nil
}

// clientCursor reads a cursor of the Client (ListResult.Next,
// MatchingResult.Next; nil for "": the end).
func clientCursor(next string) (shardlist.Cursor, error) {
	if next == "" {
		return nil, nil
	}
	c, err := shardlist.ParseCursor(next)
	if err != nil {
		return nil, fmt.Errorf("api: the Client's cursor %q: %w", next, err)
	}
	return c, nil
}

// listParams are the Client's ListParams of the API's filter f of table t
// (its cursor aside).
func listParams(t lease.Table, f admin.Filter) workq.ListParams {
	states := f.Statuses
	if f.Status != "" {
		states = append([]string{f.Status}, states...)
	}
	return workq.ListParams{Table: t, States: states, Queue: f.Queue, Kind: f.Kind, Metadata: f.Metadata,
		CreatedAfter: f.CreatedAfter, CreatedBefore: f.CreatedBefore, ErrorText: f.ErrorText, Limit: f.Limit}
}

func (s *Server) opGet(ctx context.Context, sh dbShard, t lease.Table, id int64) (admin.Item, error) {
	c, err := s.shardClient(sh)
	if err != nil {
		return admin.Item{}, err
	}
	return c.Get(ctx, workq.ItemRef{Table: t, ID: id})
}

func (s *Server) opAttempts(ctx context.Context, sh dbShard, t lease.Table, id int64) ([]workqtype.Attempt, error) {
	c, err := s.shardClient(sh)
	if err != nil {
		return nil, err
	}
	return c.Attempts(ctx, workq.ItemRef{Table: t, ID: id})
}

// opAct retries, cancels or deletes (verb) the items ids, through the
// Client's RetryMany, CancelMany or DeleteMany, and answers in the API's
// shape: the ids applied, and the others (skipped) in the order given.
func (s *Server) opAct(ctx context.Context, sh dbShard, t lease.Table, verb string, by admin.Actor, ids []int64) (admin.Result, error) {
	c, err := s.shardClient(sh)
	if err != nil {
		return admin.Result{}, err
	}
	refs := make([]workq.ItemRef, len(ids))
	for i, id := range ids {
		refs[i] = workq.ItemRef{Table: t, ID: id}
	}
	opts := &workq.ActionOpts{Actor: by.Name, Reason: by.Reason}
	var res workq.ActionResult
	switch verb {
	case "retry":
		res, err = c.RetryMany(ctx, refs, opts)
	case "cancel":
		res, err = c.CancelMany(ctx, refs, opts)
	case "delete":
		res, err = c.DeleteMany(ctx, refs)
	default:
		return admin.Result{}, fmt.Errorf("api: no action %q", verb)
	}
	if err != nil {
		return admin.Result{}, err
	}
	return resultOf(res, ids), nil
}

// resultOf is the API's answer to an action on the items ids (res, the
// Client's result).
func resultOf(res workq.ActionResult, ids []int64) admin.Result {
	out := admin.Result{Applied: idsOf(res.Applied), Skipped: []int64{}, NotFound: idsOf(res.NotFound),
		Requested: idsOf(res.Requested)}
	if len(res.Requested) == 0 {
		out.Requested = nil
	}
	applied := map[int64]bool{}
	for _, id := range out.Applied {
		applied[id] = true
	}
	for _, id := range ids {
		if !applied[id] {
			out.Skipped = append(out.Skipped, id)
		}
	}
	for ref, state := range res.WrongState {
		if out.States == nil {
			out.States = map[int64]string{}
		}
		out.States[ref.ID] = state
	}
	return out
}

// idsOf is the ids of refs (never nil).
func idsOf(refs []workq.ItemRef) []int64 {
	out := make([]int64, len(refs))
	for i, r := range refs {
		out[i] = r.ID
	}
	return out
}

// opActMatching retries, cancels or deletes (verb) at most max items
// matching f (its cursor f.Before, an id of shard sh), through the Client's
// RetryMatching, CancelMatching or DeleteMatching.
func (s *Server) opActMatching(ctx context.Context, sh dbShard, t lease.Table, verb string, by admin.Actor, f admin.Filter, max int) (admin.BulkResult, error) {
	c, err := s.shardClient(sh)
	if err != nil {
		return admin.BulkResult{}, err
	}
	p := listParams(t, f)
	if f.Before > 0 {
		p.Cursor = shardlist.Cursor{c.ShardName(): f.Before}.String()
	}
	opts := &workq.ActionOpts{Actor: by.Name, Reason: by.Reason}
	var res workq.MatchingResult
	switch verb {
	case "retry":
		res, err = c.RetryMatching(ctx, p, max, opts)
	case "cancel":
		res, err = c.CancelMatching(ctx, p, max, opts)
	case "delete":
		res, err = c.DeleteMatching(ctx, p, max)
	default:
		return admin.BulkResult{}, fmt.Errorf("api: no action %q", verb)
	}
	out := admin.BulkResult{Applied: res.Applied, Skipped: res.Skipped, Batches: res.Batches}
	next, cerr := clientCursor(res.Next)
	out.Next = next[c.ShardName()]
	if err == nil {
		err = cerr
	}
	return out, err
}

// --- queues

func (s *Server) opQueues(ctx context.Context, sh dbShard) ([]admin.Queue, error) {
	c, err := s.shardClient(sh)
	if err != nil {
		return nil, err
	}
	qs, err := c.ListQueues(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]admin.Queue, len(qs))
	for i, q := range qs {
		out[i] = admin.Queue{Table: q.Table, Queue: q.Queue, Ready: q.Ready, Scheduled: q.Scheduled,
			InProgress: q.InProgress, Expired: q.Expired, Done: q.Done, Failed: q.Failed, Cancelled: q.Cancelled,
			OldestReadyAge: admin.Duration(q.OldestReadyAge), ClaimsPerSecond: q.ClaimsPerSecond,
			CompletionsPerSecond: q.CompletionsPerSecond, Paused: q.Paused, PausedAt: q.PausedAt, PausedBy: q.PausedBy,
			PauseReason: q.PauseReason}
		if q.Limit != nil {
			w := int32(*q.Limit)
			out[i].Limit = &w
		}
	}
	return out, nil
}

// opSetPaused pauses or resumes a queue; changed: it was in the other
// state.
func (s *Server) opSetPaused(ctx context.Context, sh dbShard, t lease.Table, queue string, pause bool, by, reason string) (changed bool, err error) {
	c, err := s.shardClient(sh)
	if err != nil {
		return false, err
	}
	q := workq.QueueRef{Table: t, Queue: queue}
	if pause {
		if !workqtype.ValidText(reason) {
			// The Client names the actor for a bad reason too; the
			// API's pause names the field (and did before).
			return false, workqtype.Invalid("reason", "reason must be at most 1024 bytes of UTF-8 without NUL")
		}
		return c.PauseQueue(ctx, q, &workq.ActionOpts{Actor: by, Reason: reason})
	}
	return c.ResumeQueue(ctx, q)
}

// opSetLimit sets a queue's limit W on the shard (-1: removes it).
func (s *Server) opSetLimit(ctx context.Context, sh dbShard, t lease.Table, queue string, w int) error {
	c, err := s.shardClient(sh)
	if err != nil {
		return err
	}
	q := workq.QueueRef{Table: t, Queue: queue}
	if w < 0 {
		return c.RemoveQueueLimit(ctx, q)
	}
	return c.SetQueueLimit(ctx, q, w)
}

// --- schedules, through the Client of the schedule's shard

func (s *Server) opSchedules(ctx context.Context, sh dbShard) ([]schedule.Schedule, error) {
	c, err := s.shardClient(sh)
	if err != nil {
		return nil, err
	}
	return c.ListSchedules(ctx)
}

func (s *Server) opCreateSchedule(ctx context.Context, sh dbShard, sp schedule.Spec) (schedule.Schedule, error) {
	c, err := s.shardClient(sh)
	if err != nil {
		return schedule.Schedule{}, err
	}
	return c.CreateSchedule(ctx, sp)
}

func (s *Server) opGetSchedule(ctx context.Context, sh dbShard, name string) (schedule.Schedule, error) {
	c, err := s.shardClient(sh)
	if err != nil {
		return schedule.Schedule{}, err
	}
	return c.GetSchedule(ctx, name)
}

func (s *Server) opUpdateSchedule(ctx context.Context, sh dbShard, name string, ch schedule.Changes) (schedule.Schedule, error) {
	c, err := s.shardClient(sh)
	if err != nil {
		return schedule.Schedule{}, err
	}
	return c.UpdateSchedule(ctx, name, ch)
}

func (s *Server) opDeleteSchedule(ctx context.Context, sh dbShard, name string) error {
	c, err := s.shardClient(sh)
	if err != nil {
		return err
	}
	return c.DeleteSchedule(ctx, name)
}

func (s *Server) opTriggerSchedule(ctx context.Context, sh dbShard, name string, force bool) (schedule.Triggered, error) {
	c, err := s.shardClient(sh)
	if err != nil {
		return schedule.Triggered{}, err
	}
	return c.TriggerSchedule(ctx, name, force)
}

func (s *Server) opEnableSchedule(ctx context.Context, sh dbShard, name string, enable bool) (schedule.Schedule, error) {
	c, err := s.shardClient(sh)
	if err != nil {
		return schedule.Schedule{}, err
	}
	if enable {
		return c.EnableSchedule(ctx, name)
	}
	return c.DisableSchedule(ctx, name)
}
