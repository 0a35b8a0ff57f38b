package api

import (
	"context"
	"fmt"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/shardlist"
	"github.com/workq/workq/workqtype"
)

// The reads and operator writes of work the handlers make, one function
// per operation, each a call of the Client's (on one shard: the Client of
// that shard, client.Shard; on every shard: the Client itself, whose
// fan-out reads them at once). Enqueues are the Client's own methods
// (enqueue.go). Each function turns the Client's answer into the API's
// JSON shape (api/openapi.json). The dashboard's sampler reads the Client
// too (ui.SamplerOptions.Client).

// shardClient is the Client of shard sh (the Client itself when it has
// one database).
func (s *Server) shardClient(sh dbShard) (*workq.Client, error) { return s.client.Shard(sh.Name) }

// --- items

// filter is the filter of a list or of an action on the items matching
// it: the Client's ListParams (its Table, Shard and Cursor aside) and the
// API's cursor of one shard, an item id (0: from the newest).
type filter struct {
	workq.ListParams
	before int64
}

// params are the Client's ListParams of f on table t, from the cursor of
// f (its id, on the shard of c).
func (f filter) params(c *workq.Client, t workq.Table) workq.ListParams {
	p := f.ListParams
	p.Table = t
	if f.before > 0 {
		p.Cursor = shardlist.Cursor{c.ShardName(): f.before}.String()
	}
	return p
}

// itemPage is one page of one shard's items: Next is the id the next one
// starts below (0: this page is the last).
type itemPage struct {
	Items []workq.Item
	Next  int64
}

// opList is one page of the items of shard sh matching f.
func (s *Server) opList(ctx context.Context, sh dbShard, t workq.Table, f filter) (itemPage, error) {
	c, err := s.shardClient(sh)
	if err != nil {
		return itemPage{}, err
	}
	res, err := c.List(ctx, f.params(c, t))
	if err != nil {
		return itemPage{}, err
	}
	page := itemPage{Items: res.Items}
	if page.Items == nil {
		page.Items = []workq.Item{}
	}
	for i := range page.Items {
		page.Items[i].Shard = sh.Name // "" on a Client of one database
	}
	next, err := clientCursor(res.Next)
	if err != nil {
		return itemPage{}, err
	}
	page.Next = next[c.ShardName()]
	return page, nil
}

// opListMerged is one page of the items of every shard matching f (the
// sharded Client's List, from its cursor cur: "" from the newest), and
// the cursor of the next page ("": this one is the last).
func (s *Server) opListMerged(ctx context.Context, t workq.Table, f filter, cur string) ([]workq.Item, string, error) {
	p := f.ListParams
	p.Table, p.Cursor = t, cur
	res, err := s.client.List(ctx, p)
	if err != nil {
		return nil, "", err
	}
	if res.Items == nil {
		res.Items = []workq.Item{}
	}
	return res.Items, res.Next, nil
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

func (s *Server) opGet(ctx context.Context, sh dbShard, t workq.Table, id int64) (workq.Item, error) {
	c, err := s.shardClient(sh)
	if err != nil {
		return workq.Item{}, err
	}
	return c.Get(ctx, workq.ItemRef{Table: t, ID: id})
}

func (s *Server) opAttempts(ctx context.Context, sh dbShard, t workq.Table, id int64) ([]workq.Attempt, error) {
	c, err := s.shardClient(sh)
	if err != nil {
		return nil, err
	}
	return c.Attempts(ctx, workq.ItemRef{Table: t, ID: id})
}

// actionResult is the answer of retry, cancel and delete: the ids acted
// on, and the others (skipped), both in the order given.
type actionResult struct {
	Applied []int64 `json:"applied"`
	Skipped []int64 `json:"skipped"`
	// NotFound are the ids of Skipped that do not exist.
	NotFound []int64 `json:"not_found"`
	// States is the state of every other id of Skipped: why it was left
	// alone.
	States map[int64]string `json:"states,omitempty"`
	// Requested (cancel) are the ids of Applied that were running: each
	// ends cancelled when its attempt ends.
	Requested []int64 `json:"requested,omitempty"`
}

// opAct retries, cancels or deletes (verb) the items ids, through the
// Client's RetryMany, CancelMany or DeleteMany, and answers in the API's
// shape: the ids applied, and the others (skipped) in the order given.
func (s *Server) opAct(ctx context.Context, sh dbShard, t workq.Table, verb string, by *workq.ActionOpts, ids []int64) (actionResult, error) {
	c, err := s.shardClient(sh)
	if err != nil {
		return actionResult{}, err
	}
	refs := make([]workq.ItemRef, len(ids))
	for i, id := range ids {
		refs[i] = workq.ItemRef{Table: t, ID: id}
	}
	var res workq.ActionResult
	switch verb {
	case "retry":
		res, err = c.RetryMany(ctx, refs, by)
	case "cancel":
		res, err = c.CancelMany(ctx, refs, by)
	case "delete":
		res, err = c.DeleteMany(ctx, refs)
	default:
		return actionResult{}, fmt.Errorf("api: no action %q", verb)
	}
	if err != nil {
		return actionResult{}, err
	}
	return resultOf(res, ids), nil
}

// resultOf is the API's answer to an action on the items ids (res, the
// Client's result).
func resultOf(res workq.ActionResult, ids []int64) actionResult {
	out := actionResult{Applied: idsOf(res.Applied), Skipped: []int64{}, NotFound: idsOf(res.NotFound),
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

// matched is what an action on the items matching a filter did (the
// Client's MatchingResult), with Next the id of shard sh to go on below
// (0: it visited every matching item).
type matched struct {
	Applied, Skipped, Batches int
	Next                      int64
}

// opActMatching retries, cancels or deletes (verb) at most max items
// matching f (from its cursor, an id of shard sh), through the Client's
// RetryMatching, CancelMatching or DeleteMatching.
func (s *Server) opActMatching(ctx context.Context, sh dbShard, t workq.Table, verb string, by *workq.ActionOpts, f filter, max int) (matched, error) {
	c, err := s.shardClient(sh)
	if err != nil {
		return matched{}, err
	}
	p := f.params(c, t)
	var res workq.MatchingResult
	switch verb {
	case "retry":
		res, err = c.RetryMatching(ctx, p, max, by)
	case "cancel":
		res, err = c.CancelMatching(ctx, p, max, by)
	case "delete":
		res, err = c.DeleteMatching(ctx, p, max)
	default:
		return matched{}, fmt.Errorf("api: no action %q", verb)
	}
	out := matched{Applied: res.Applied, Skipped: res.Skipped, Batches: res.Batches}
	next, cerr := clientCursor(res.Next)
	out.Next = next[c.ShardName()]
	if err == nil {
		err = cerr
	}
	return out, err
}

// --- queues

// queueRow is a queue as the API answers it: one shard's row, or the sum
// over the shards (the Client's QueueInfo, in JSON).
type queueRow struct {
	Table      workq.Table `json:"table"`
	Queue      string      `json:"queue"`
	Ready      int64       `json:"ready"`       // ready and due
	Scheduled  int64       `json:"scheduled"`   // ready, due later
	InProgress int64       `json:"in_progress"` // including Expired
	Expired    int64       `json:"expired"`     // in progress with an expired lease, not yet reaped
	Done       int64       `json:"done"`
	Failed     int64       `json:"failed"`
	Cancelled  int64       `json:"cancelled"`
	Pending    int64       `json:"pending"` // a workflow's tasks waiting for their dependencies
	// OldestReadyAge is how long the oldest due ready item has waited (0:
	// none is waiting).
	OldestReadyAge seconds `json:"oldest_ready_age"`
	// Averages over the last minute.
	ClaimsPerSecond      float64    `json:"claims_per_second"`
	CompletionsPerSecond float64    `json:"completions_per_second"`
	Paused               bool       `json:"paused"`
	PausedAt             *time.Time `json:"paused_at,omitempty"`
	PausedBy             string     `json:"paused_by,omitempty"`
	PauseReason          string     `json:"pause_reason,omitempty"`
	Limit                *int32     `json:"limit"` // W; null: no limit
}

// seconds is a duration that writes as seconds in JSON.
type seconds time.Duration

// MarshalJSON writes d as seconds, to the millisecond.
func (d seconds) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf("%.3f", time.Duration(d).Seconds())), nil
}

// UnmarshalJSON reads seconds.
func (d *seconds) UnmarshalJSON(b []byte) error {
	var f float64
	if _, err := fmt.Sscan(string(b), &f); err != nil {
		return fmt.Errorf("duration in seconds: %w", err)
	}
	*d = seconds(f * float64(time.Second))
	return nil
}

// rowOf is the API's row of the Client's q.
func rowOf(q workq.QueueInfo) queueRow {
	out := queueRow{Table: q.Table, Queue: q.Queue, Ready: q.Ready, Scheduled: q.Scheduled,
		InProgress: q.InProgress, Expired: q.Expired, Done: q.Done, Failed: q.Failed, Cancelled: q.Cancelled, Pending: q.Pending,
		OldestReadyAge: seconds(q.OldestReadyAge), ClaimsPerSecond: q.ClaimsPerSecond,
		CompletionsPerSecond: q.CompletionsPerSecond, Paused: q.Paused, PausedAt: q.PausedAt, PausedBy: q.PausedBy,
		PauseReason: q.PauseReason}
	if q.Limit != nil {
		w := int32(*q.Limit)
		out.Limit = &w
	}
	return out
}

// opQueues lists the queues of every shard (the Client's ListQueues: on a
// sharded Client each summed over the shards, with each shard's row).
func (s *Server) opQueues(ctx context.Context) ([]workq.QueueInfo, error) {
	return s.client.ListQueues(ctx)
}

// opSetPaused pauses or resumes a queue on shard sh; changed: it was in
// the other state.
func (s *Server) opSetPaused(ctx context.Context, sh dbShard, t workq.Table, queue string, pause bool, by, reason string) (changed bool, err error) {
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
func (s *Server) opSetLimit(ctx context.Context, sh dbShard, t workq.Table, queue string, w int) error {
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

func (s *Server) opSchedules(ctx context.Context, sh dbShard) ([]workq.Schedule, error) {
	c, err := s.shardClient(sh)
	if err != nil {
		return nil, err
	}
	return c.ListSchedules(ctx)
}

func (s *Server) opCreateSchedule(ctx context.Context, sh dbShard, sp workq.ScheduleSpec) (workq.Schedule, error) {
	c, err := s.shardClient(sh)
	if err != nil {
		return workq.Schedule{}, err
	}
	return c.CreateSchedule(ctx, sp)
}

func (s *Server) opGetSchedule(ctx context.Context, sh dbShard, name string) (workq.Schedule, error) {
	c, err := s.shardClient(sh)
	if err != nil {
		return workq.Schedule{}, err
	}
	return c.GetSchedule(ctx, name)
}

func (s *Server) opUpdateSchedule(ctx context.Context, sh dbShard, name string, ch workq.ScheduleChanges) (workq.Schedule, error) {
	c, err := s.shardClient(sh)
	if err != nil {
		return workq.Schedule{}, err
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

func (s *Server) opTriggerSchedule(ctx context.Context, sh dbShard, name string, force bool) (workq.TriggeredRun, error) {
	c, err := s.shardClient(sh)
	if err != nil {
		return workq.TriggeredRun{}, err
	}
	return c.TriggerSchedule(ctx, name, force)
}

func (s *Server) opEnableSchedule(ctx context.Context, sh dbShard, name string, enable bool) (workq.Schedule, error) {
	c, err := s.shardClient(sh)
	if err != nil {
		return workq.Schedule{}, err
	}
	if enable {
		return c.EnableSchedule(ctx, name)
	}
	return c.DisableSchedule(ctx, name)
}
