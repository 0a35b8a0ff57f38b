package api

import (
	"context"
	"fmt"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/schedule"
	"github.com/workq/workq/internal/shardlist"
	"github.com/workq/workq/internal/ui"
	"github.com/workq/workq/workqtype"
)

// The reads and operator writes of work the handlers and the dashboard's
// sampler make, one function per operation, on one shard of the Client
// (dbShard: its DB in the Client's schema) or on all of them. Enqueues are
// the Client's own methods (enqueue.go). Schedules go through the Client
// already (the Client of the shard, client.Shard); items and queues use
// the engine's operator functions on the Client's databases until the
// Client has methods for them: each then changes here, and no handler
// does.

// shardClient is the Client of shard sh (the Client itself when it has
// one database).
func (s *Server) shardClient(sh dbShard) (*workq.Client, error) { return s.client.Shard(sh.Name) }

// --- items

func (s *Server) opList(ctx context.Context, sh dbShard, t lease.Table, f admin.Filter) (admin.Page, error) {
	return admin.List(ctx, sh.DB, t, f)
}

// opListMerged is one page of the items of every shard matching f
// (internal/shardlist.List, which the dashboard shares).
func (s *Server) opListMerged(ctx context.Context, t lease.Table, f admin.Filter, cur shardlist.Cursor) (shardlist.Page, error) {
	shards := make([]shardlist.Shard, len(s.shards))
	for i, sh := range s.shards {
		shards[i] = shardlist.Shard{Name: sh.Name, DB: sh.DB}
	}
	return shardlist.List(ctx, shards, t, f, cur, shardlist.Options{})
}

func (s *Server) opGet(ctx context.Context, sh dbShard, t lease.Table, id int64) (admin.Item, error) {
	return admin.Get(ctx, sh.DB, t, id)
}

func (s *Server) opAttempts(ctx context.Context, sh dbShard, t lease.Table, id int64) ([]workqtype.Attempt, error) {
	return admin.Attempts(ctx, sh.DB, t, id)
}

// opAct retries, cancels or deletes (verb) the items ids.
func (s *Server) opAct(ctx context.Context, sh dbShard, t lease.Table, verb string, by admin.Actor, ids []int64) (admin.Result, error) {
	switch verb {
	case "retry":
		return admin.Retry(ctx, sh.DB, t, by, ids...)
	case "cancel":
		return admin.Cancel(ctx, sh.DB, t, by, ids...)
	case "delete":
		return admin.Delete(ctx, sh.DB, t, ids...)
	}
	return admin.Result{}, fmt.Errorf("api: no action %q", verb)
}

// opActMatching retries, cancels or deletes (verb) at most max items
// matching f.
func (s *Server) opActMatching(ctx context.Context, sh dbShard, t lease.Table, verb string, by admin.Actor, f admin.Filter, max int) (admin.BulkResult, error) {
	switch verb {
	case "retry":
		return admin.RetryMatching(ctx, sh.DB, t, by, f, max)
	case "cancel":
		return admin.CancelMatching(ctx, sh.DB, t, by, f, max)
	case "delete":
		return admin.DeleteMatching(ctx, sh.DB, t, f, max)
	}
	return admin.BulkResult{}, fmt.Errorf("api: no action %q", verb)
}

// --- queues

func (s *Server) opQueues(ctx context.Context, sh dbShard) ([]admin.Queue, error) {
	return admin.Queues(ctx, sh.DB)
}

// opSetPaused pauses or resumes a queue; changed: it was in the other
// state.
func (s *Server) opSetPaused(ctx context.Context, sh dbShard, t lease.Table, queue string, pause bool, by, reason string) (changed bool, err error) {
	if pause {
		return lease.Pause(ctx, sh.DB, t, queue, by, reason)
	}
	return lease.Resume(ctx, sh.DB, t, queue)
}

// opSetLimit sets a queue's limit W on the shard (-1: removes it).
func (s *Server) opSetLimit(ctx context.Context, sh dbShard, t lease.Table, queue string, w int) error {
	return lease.SetLimit(ctx, sh.DB, t, queue, w)
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

// --- the dashboard's history

// sampleSource is what the dashboard's sampler reads of shard sh.
func (s *Server) sampleSource(sh dbShard) ui.SampleSource {
	return ui.SampleSource{Name: sh.Name,
		Depth: func(ctx context.Context) ([]admin.Depth, error) { return admin.Depths(ctx, sh.DB) },
		Ended: func(ctx context.Context, after, until time.Time) ([]admin.Ended, error) {
			return admin.EndedBetween(ctx, sh.DB, after, until)
		},
		Clock: func(ctx context.Context) (time.Time, error) { return admin.Clock(ctx, sh.DB) }}
}
