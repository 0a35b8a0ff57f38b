package api

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/shardlist"
	"github.com/workq/workq/internal/ui"
)

// queueState is the answer of pause, resume and the limit endpoints.
type queueState struct {
	Table   workq.Table `json:"table"`
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

// onEachShard runs f on every shard at once (f calls the Client of that
// shard), each bounded by Options.ShardTimeout on a sharded server, and
// returns each shard's error (nil: done), in the shards' order. It is the
// Client's scatter-gather (shardlist.Each), for what the API answers per
// shard: pause and resume (each shard's change) and the schedule list
// (each schedule's shard). What the Client answers over every shard (the
// queue list) is one call of the Client.
func (s *Server) onEachShard(ctx context.Context, f func(ctx context.Context, i int, sh dbShard) error) []error {
	shards := make([]shardlist.Shard, len(s.shards))
	index := make(map[string]int, len(s.shards))
	for i, sh := range s.shards {
		shards[i], index[sh.Name] = shardlist.Shard{Name: sh.Name, DB: sh.DB}, i
	}
	var timeout time.Duration
	if s.sharded() {
		timeout = s.shardTimeout()
	}
	answers := shardlist.Each(ctx, shards, timeout, func(ctx context.Context, sh shardlist.Shard) (struct{}, error) {
		i := index[sh.Name]
		return struct{}{}, f(ctx, i, s.shards[i])
	})
	errs := make([]error, len(answers))
	for i, a := range answers {
		errs[i] = a.Err
	}
	return errs
}

// shardTimeout is Options.ShardTimeout, with its default.
func (s *Server) shardTimeout() time.Duration {
	if s.o.ShardTimeout > 0 {
		return s.o.ShardTimeout
	}
	return ui.DefaultShardTimeout
}

// shardContext is ctx bounded by Options.ShardTimeout on a sharded
// server: the bound of a call of the Client that reads every shard at
// once (a shard that does not answer in time fails).
func (s *Server) shardContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if !s.sharded() {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.shardTimeout())
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

// shardErrors are each shard's error of err, the Client's error of an
// operation on every shard: a *workq.ShardsError names the shards that
// failed (nil for the others); any other error is every shard's.
func (s *Server) shardErrors(err error) []error {
	errs := make([]error, len(s.shards))
	var se *workq.ShardsError
	failed := errors.As(err, &se)
	for i, sh := range s.shards {
		if errs[i] = err; failed {
			errs[i] = se.Failed[sh.Name]
		}
	}
	return errs
}

// shardedQueue is a queue of a sharded server: its counts summed over the
// shards, and each shard's.
type shardedQueue struct {
	queueRow
	PausedShards []string     `json:"paused_shards"` // the shards where it is paused
	Shards       []queueShard `json:"shards"`
}

// queueShard is one shard's row of a queue.
type queueShard struct {
	Shard string `json:"shard"`
	queueRow
}

func (s *Server) listQueues(w http.ResponseWriter, r *http.Request, _ principal) error {
	if _, err := query(r); err != nil {
		return err
	}
	ctx, cancel := s.shardContext(r.Context()) // the Client reads every shard at once
	defer cancel()
	qs, err := s.opQueues(ctx)
	if !s.sharded() {
		if err != nil {
			return err
		}
		out := make([]queueRow, len(qs))
		for i, q := range qs {
			out[i] = rowOf(q)
		}
		writeJSON(w, http.StatusOK, struct {
			Queues []queueRow `json:"queues"`
		}{out})
		return nil
	}
	if err != nil {
		if ferr := s.shardFailure(r.Context(), "listing the queues", make([]ShardResult, len(s.shards)), s.shardErrors(err)); ferr != nil {
			return ferr
		}
		return err
	}
	out := make([]shardedQueue, len(qs))
	for i, q := range qs {
		out[i] = shardedQueue{queueRow: rowOf(q), PausedShards: q.PausedShards, Shards: make([]queueShard, len(q.Shards))}
		if out[i].PausedShards == nil {
			out[i].PausedShards = []string{}
		}
		for j, row := range q.Shards {
			out[i].Shards[j] = queueShard{Shard: row.Shard, queueRow: rowOf(row)}
		}
	}
	writeJSON(w, http.StatusOK, struct {
		Queues []shardedQueue `json:"queues"`
	}{out})
	return nil
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
func (s *Server) setPaused(w http.ResponseWriter, r *http.Request, p principal, t workq.Table, queue string, pause bool,
	f func(ctx context.Context, sh dbShard) (bool, error), logArgs ...any) error {
	verb := "resume"
	if pause {
		verb = "pause"
	}
	results := make([]ShardResult, len(s.shards))
	errs := s.onEachShard(r.Context(), func(ctx context.Context, i int, sh dbShard) error {
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
	if in.Limit == nil || *in.Limit < 0 || *in.Limit > math.MaxInt32 {
		return invalid("limit", "want W, a whole number from 0 to %d (DELETE removes the limit)", math.MaxInt32)
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
