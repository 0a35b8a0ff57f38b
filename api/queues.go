package api

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/ui"
)

// queueState is the answer of pause, resume and the limit endpoints.
type queueState struct {
	Table   lease.Table `json:"table"`
	Queue   string      `json:"queue"`
	Paused  *bool       `json:"paused,omitempty"`
	Changed *bool       `json:"changed,omitempty"` // pause, resume: whether the queue was in the other state
	Limit   *int32      `json:"limit,omitempty"`   // set limit: W
	// Shard is the shard whose budget a limit request set (?shard= on a
	// sharded server).
	Shard string `json:"shard,omitempty"`
	// Shards is each shard's outcome of a pause or resume on a sharded
	// server (every shard's pause row).
	Shards []ShardResult `json:"shards,omitempty"`
}

// ShardResult is one shard's outcome of an operation a sharded server
// applies to every shard (pause, resume): done (Paused, Changed), or its
// Error. It is also in the Error of such an operation that failed on some
// shard.
type ShardResult struct {
	Shard   string `json:"shard"`
	Paused  *bool  `json:"paused,omitempty"`
	Changed *bool  `json:"changed,omitempty"`
	Error   string `json:"error,omitempty"` // why it failed there; nothing changed on that shard
}

// onEveryShard runs f on every shard at once, each bounded by
// Options.ShardTimeout on a sharded server, and returns each shard's error
// (nil: done), in the shards' order.
func (s *Server) onEveryShard(ctx context.Context, f func(ctx context.Context, i int, sh dbShard) error) []error {
	errs := make([]error, len(s.shards))
	timeout := s.o.ShardTimeout
	if timeout <= 0 {
		timeout = ui.DefaultShardTimeout
	}
	var wg sync.WaitGroup
	for i, sh := range s.shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sctx := ctx
			if s.sharded() {
				var cancel context.CancelFunc
				sctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			errs[i] = f(sctx, i, sh)
		}()
	}
	wg.Wait()
	return errs
}

// shardFailure is the Error of an operation on every shard that failed on
// some: 503 when a shard was unavailable, else the status of the first
// failure (a validation error fails on every shard alike). The message
// names the shards that failed; results has every shard's outcome.
func (s *Server) shardFailure(ctx context.Context, what string, results []ShardResult, errs []error) error {
	var failed []string
	var first *Error
	for i, err := range errs {
		if err == nil {
			continue
		}
		e := classify(err)
		if e.status >= 500 {
			s.log.ErrorContext(ctx, "api: "+what+" failed on a shard", "shard", s.shards[i].Name, "err", err)
		}
		results[i] = ShardResult{Shard: s.shards[i].Name, Error: e.Message}
		failed = append(failed, s.shards[i].Name)
		if first == nil || e.status >= 500 && first.status < 500 {
			first = e
		}
	}
	if first == nil {
		return nil
	}
	for i := range results {
		results[i].Shard = s.shards[i].Name
	}
	if first.status < 500 && len(failed) == len(errs) {
		return first // refused alike by every shard: nothing changed
	}
	status, code := first.status, first.Code
	if status >= 500 {
		status, code = http.StatusServiceUnavailable, CodeUnavailable
	}
	return &Error{status: status, Code: code, Shards: results, Message: fmt.Sprintf(
		"%s failed on shard(s) %s (the shards listed without an error are done: send the request again, it is idempotent): %s",
		what, strings.Join(failed, ", "), first.Message)}
}

// shardedQueue is a queue of a sharded server: its counts summed over the
// shards, and each shard's.
type shardedQueue struct {
	admin.Queue
	PausedShards []string     `json:"paused_shards"` // the shards where it is paused
	Shards       []queueShard `json:"shards"`
}

// queueShard is one shard's row of a queue.
type queueShard struct {
	Shard string `json:"shard"`
	admin.Queue
}

func (s *Server) listQueues(w http.ResponseWriter, r *http.Request, _ principal) error {
	if _, err := query(r); err != nil {
		return err
	}
	if !s.sharded() {
		qs, err := s.opQueues(r.Context(), s.shards[0])
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, struct {
			Queues []admin.Queue `json:"queues"`
		}{qs})
		return nil
	}
	per := make([][]admin.Queue, len(s.shards))
	errs := s.onEveryShard(r.Context(), func(ctx context.Context, i int, sh dbShard) error {
		var err error
		per[i], err = s.opQueues(ctx, sh)
		return err
	})
	if err := s.shardFailure(r.Context(), "listing the queues", make([]ShardResult, len(s.shards)), errs); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct {
		Queues []shardedQueue `json:"queues"`
	}{s.sumQueues(per)})
	return nil
}

// sumQueues merges each shard's queues (per, in the shards' order): counts
// and rates summed, the oldest ready age the largest, paused when paused
// on every shard (PausedShards lists where), no limit (each shard's budget
// is in its row).
func (s *Server) sumQueues(per [][]admin.Queue) []shardedQueue {
	type key struct {
		t lease.Table
		q string
	}
	var order []key
	rows := map[key]*shardedQueue{}
	for i, qs := range per {
		for _, q := range qs {
			k := key{q.Table, q.Queue}
			sq := rows[k]
			if sq == nil {
				sq = &shardedQueue{Queue: admin.Queue{Table: q.Table, Queue: q.Queue}, PausedShards: []string{}}
				rows[k] = sq
				order = append(order, k)
			}
			sq.Queue.Add(q)
			if q.Paused {
				sq.PausedShards = append(sq.PausedShards, s.shards[i].Name)
			}
			sq.Shards = append(sq.Shards, queueShard{Shard: s.shards[i].Name, Queue: q})
		}
	}
	out := make([]shardedQueue, 0, len(order))
	for _, k := range order {
		sq := rows[k]
		sq.Paused = len(sq.PausedShards) == len(s.shards)
		out = append(out, *sq)
	}
	sortQueues(out)
	return out
}

func sortQueues(qs []shardedQueue) {
	sort.Slice(qs, func(i, j int) bool {
		if qs[i].Table != qs[j].Table {
			return qs[i].Table < qs[j].Table
		}
		return qs[i].Queue.Queue < qs[j].Queue.Queue
	})
}

// pauseRequest is the optional body of pause.
type pauseRequest struct {
	Reason string `json:"reason"`
}

func (s *Server) pauseQueue(w http.ResponseWriter, r *http.Request, p principal) error {
	t, err := table(r)
	if err != nil {
		return err
	}
	if _, err := query(r); err != nil {
		return err
	}
	var in pauseRequest
	if err := s.decodeBody(w, r, &in, true); err != nil {
		return err
	}
	queue := r.PathValue("queue")
	return s.setPaused(w, r, p, t, queue, true, func(ctx context.Context, sh dbShard) (bool, error) {
		return s.opSetPaused(ctx, sh, t, queue, true, p.actor(), in.Reason)
	}, "reason", in.Reason)
}

func (s *Server) resumeQueue(w http.ResponseWriter, r *http.Request, p principal) error {
	t, err := table(r)
	if err != nil {
		return err
	}
	if _, err := query(r); err != nil {
		return err
	}
	if err := s.decodeBody(w, r, &struct{}{}, true); err != nil {
		return err
	}
	queue := r.PathValue("queue")
	return s.setPaused(w, r, p, t, queue, false, func(ctx context.Context, sh dbShard) (bool, error) {
		return s.opSetPaused(ctx, sh, t, queue, false, "", "")
	})
}

// setPaused pauses or resumes (f) the queue on every shard: a sharded
// logical queue is one queue. Changed is whether any shard was in the
// other state; on a sharded server Shards has each shard's. When a shard
// fails the answer is an error naming it, with every shard's outcome (the
// others stay changed; the request is idempotent: send it again).
func (s *Server) setPaused(w http.ResponseWriter, r *http.Request, p principal, t lease.Table, queue string, pause bool,
	f func(ctx context.Context, sh dbShard) (bool, error), logArgs ...any) error {
	verb := "resume"
	if pause {
		verb = "pause"
	}
	results := make([]ShardResult, len(s.shards))
	errs := s.onEveryShard(r.Context(), func(ctx context.Context, i int, sh dbShard) error {
		changed, err := f(ctx, sh)
		if err == nil {
			results[i] = ShardResult{Shard: sh.Name, Paused: &pause, Changed: &changed}
			s.log.InfoContext(ctx, "api "+verb, append([]any{"table", t, "queue", queue, "shard", sh.Name, "actor", p.actor(),
				"changed", changed}, logArgs...)...)
		}
		return err
	})
	if !s.sharded() {
		if errs[0] != nil {
			return errs[0]
		}
		writeJSON(w, http.StatusOK, queueState{Table: t, Queue: queue, Paused: &pause, Changed: results[0].Changed})
		return nil
	}
	if err := s.shardFailure(r.Context(), verb+" "+string(t)+"/"+queue, results, errs); err != nil {
		return err
	}
	changed := false
	for _, res := range results {
		changed = changed || *res.Changed
	}
	writeJSON(w, http.StatusOK, queueState{Table: t, Queue: queue, Paused: &pause, Changed: &changed, Shards: results})
	return nil
}

// limitShard is the shard a limit request sets the budget of: the one
// database, or on a sharded server the shard ?shard= names. Without one a
// sharded server refuses: a global W over the shards is kept by workq
// shard-limit (ShardingConfig.GlobalLimits), whose leader would overwrite
// a budget written here.
func (s *Server) limitShard(r *http.Request) (dbShard, error) {
	q, err := query(r, "shard")
	if err != nil {
		return dbShard{}, err
	}
	name := q.Get("shard")
	if name == "" && s.sharded() {
		return dbShard{}, invalid("shard", "this API serves several shards (%s): a limit W over all of them is kept by "+
			"`workq shard-limit --limit TABLE/QUEUE=W` (or ShardingConfig.GlobalLimits of a sharded Client), which moves "+
			"each shard's budget; to set one shard's budget yourself name it with ?shard=NAME (the shard-limit leader "+
			"overwrites it when it keeps a limit on this queue)", s.shardNames())
	}
	return s.shardNamed("shard", name)
}

// limitRequest is the body of PUT .../limit.
type limitRequest struct {
	Limit *int64 `json:"limit"`
}

func (s *Server) setLimit(w http.ResponseWriter, r *http.Request, p principal) error {
	t, err := table(r)
	if err != nil {
		return err
	}
	sh, err := s.limitShard(r)
	if err != nil {
		return err
	}
	var in limitRequest
	if err := s.decodeBody(w, r, &in, false); err != nil {
		return err
	}
	if in.Limit == nil || *in.Limit < 0 || *in.Limit > lease.MaxLimit {
		return invalid("limit", "want W, a whole number from 0 to %d (DELETE removes the limit)", lease.MaxLimit)
	}
	queue := r.PathValue("queue")
	if err := s.opSetLimit(r.Context(), sh, t, queue, int(*in.Limit)); err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "api set limit", "table", t, "queue", queue, "shard", sh.Name, "actor", p.actor(), "limit", *in.Limit)
	limit := int32(*in.Limit)
	writeJSON(w, http.StatusOK, queueState{Table: t, Queue: queue, Limit: &limit, Shard: sh.Name})
	return nil
}

func (s *Server) removeLimit(w http.ResponseWriter, r *http.Request, p principal) error {
	t, err := table(r)
	if err != nil {
		return err
	}
	sh, err := s.limitShard(r)
	if err != nil {
		return err
	}
	queue := r.PathValue("queue")
	if err := s.opSetLimit(r.Context(), sh, t, queue, -1); err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "api remove limit", "table", t, "queue", queue, "shard", sh.Name, "actor", p.actor())
	writeJSON(w, http.StatusOK, queueState{Table: t, Queue: queue, Shard: sh.Name})
	return nil
}
