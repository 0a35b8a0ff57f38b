package api

import (
	"context"
	"net/http"
	"time"

	"github.com/workq/workq"
)

// Flow control (docs/concepts.md, "Flow control"): its status, its rules,
// a queue's fairness and the pause of one kind of a queue. Every handler
// is a call of the Client's (workq.Client.FlowStatus, SetFlowLimit,
// RemoveFlowLimit, SetFairness, PauseKind, ResumeKind), which validates
// the request (an error wrapping ErrInvalid: 400, nothing written) and,
// on a sharded server, acts on every shard unless the request names one.

// flowRule is one rule as PUT /v1/flow/limits sets it and answers it.
type flowRule struct {
	Table       workq.Table `json:"table"`
	Queue       string      `json:"queue"`
	Shard       string      `json:"shard,omitempty"`
	Kind        string      `json:"kind"`
	PerKey      bool        `json:"per_key"`
	Rate        int         `json:"rate"`
	Period      string      `json:"period,omitempty"` // a Go duration string; with a rate only
	Concurrency int         `json:"concurrency"`
}

// flowLimitRow is one rule of GET /v1/flow with its use now.
type flowLimitRow struct {
	flowRule
	UpdatedAt      time.Time  `json:"updated_at"`
	Started        int        `json:"started"`
	InProgress     int        `json:"in_progress"`
	ActiveKeys     int        `json:"active_keys"`
	ThrottledUntil *time.Time `json:"throttled_until,omitempty"`
}

type flowQueueRow struct {
	Table workq.Table `json:"table"`
	Queue string      `json:"queue"`
	Shard string      `json:"shard,omitempty"`
	Fair  bool        `json:"fair"`
	Auto  bool        `json:"auto"`
}

type pausedKindRow struct {
	Table    workq.Table `json:"table"`
	Queue    string      `json:"queue"`
	Shard    string      `json:"shard,omitempty"`
	Kind     string      `json:"kind"`
	PausedAt time.Time   `json:"paused_at"`
	PausedBy string      `json:"paused_by"`
	Reason   string      `json:"reason,omitempty"`
}

type throttleRow struct {
	Table             workq.Table `json:"table"`
	Queue             string      `json:"queue"`
	Shard             string      `json:"shard,omitempty"`
	Kind              string      `json:"kind,omitempty"`
	Key               string      `json:"key,omitempty"`
	Until             *time.Time  `json:"until,omitempty"`
	Rate              float64     `json:"rate"`
	StartedLastSecond int         `json:"started_last_second"`
}

// flowStatus is the answer of GET /v1/flow: the Client's FlowStatus.
type flowStatus struct {
	Queues      []flowQueueRow  `json:"queues"`
	Limits      []flowLimitRow  `json:"limits"`
	PausedKinds []pausedKindRow `json:"paused_kinds"`
	Throttles   []throttleRow   `json:"throttles"`
}

// ruleOf is the API's rule of the Client's l.
func ruleOf(l workq.FlowLimit) flowRule {
	r := flowRule{Table: l.Table, Queue: l.Queue, Shard: l.Shard, Kind: l.Kind, PerKey: l.PerKey, Rate: l.Rate, Concurrency: l.Concurrency}
	if l.Rate > 0 {
		p := l.Period
		if p == 0 {
			p = time.Second
		}
		r.Period = p.String()
	}
	return r
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// flowStatusOf is the API's shape of the Client's status.
func flowStatusOf(st workq.FlowStatus) flowStatus {
	out := flowStatus{Queues: []flowQueueRow{}, Limits: []flowLimitRow{}, PausedKinds: []pausedKindRow{}, Throttles: []throttleRow{}}
	for _, q := range st.Queues {
		out.Queues = append(out.Queues, flowQueueRow{Table: q.Table, Queue: q.Queue, Shard: q.Shard, Fair: q.Fair, Auto: q.Auto})
	}
	for _, l := range st.Limits {
		out.Limits = append(out.Limits, flowLimitRow{flowRule: ruleOf(l.FlowLimit), UpdatedAt: l.UpdatedAt, Started: l.Started,
			InProgress: l.InProgress, ActiveKeys: l.ActiveKeys, ThrottledUntil: optTime(l.ThrottledUntil)})
	}
	for _, p := range st.PausedKinds {
		out.PausedKinds = append(out.PausedKinds, pausedKindRow{Table: p.Table, Queue: p.Queue, Shard: p.Shard, Kind: p.Kind,
			PausedAt: p.PausedAt, PausedBy: p.PausedBy, Reason: p.Reason})
	}
	for _, t := range st.Throttles {
		out.Throttles = append(out.Throttles, throttleRow{Table: t.Table, Queue: t.Queue, Shard: t.Shard, Kind: t.Kind, Key: t.Key,
			Until: optTime(t.Until), Rate: t.Rate, StartedLastSecond: t.StartedLastSecond})
	}
	return out
}

// everyShard is the error of a call of the Client over every shard: on a
// sharded server the failure of some shards names them (shardFailure).
func (s *Server) everyShard(ctx context.Context, what string, err error) error {
	if err == nil || !s.sharded() {
		return err
	}
	if ferr := s.shardFailure(ctx, what, make([]ShardResult, len(s.shards)), s.shardErrors(err)); ferr != nil {
		return ferr
	}
	return err
}

// flowShard is the Client's shard of a flow request's shard member: ""
// (every shard), or the shard it names (400 or 404 when there is none).
func (s *Server) flowShard(field, name string) (string, error) {
	if name == "" {
		return "", nil
	}
	sh, err := s.shardNamed(field, name)
	return sh.Name, err
}

func (s *Server) flowStatus(w http.ResponseWriter, r *http.Request, _ principal) error {
	if _, err := query(r); err != nil {
		return err
	}
	ctx, cancel := s.shardContext(r.Context()) // the Client reads every shard at once
	defer cancel()
	st, err := s.client.FlowStatus(ctx)
	if err := s.everyShard(r.Context(), "reading flow control", err); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, flowStatusOf(st))
	return nil
}

// flowLimitRequest is the body of PUT /v1/flow/limits.
type flowLimitRequest struct {
	Table       workq.Table `json:"table"`
	Queue       string      `json:"queue"`
	Shard       string      `json:"shard"`
	Kind        string      `json:"kind"`
	PerKey      bool        `json:"per_key"`
	Rate        int64       `json:"rate"`
	Period      *string     `json:"period"`
	Concurrency int64       `json:"concurrency"`
}

func (s *Server) setFlowLimit(w http.ResponseWriter, r *http.Request, p principal) error {
	if _, err := query(r); err != nil {
		return err
	}
	var in flowLimitRequest
	if err := s.decodeBody(w, r, &in, false); err != nil {
		return err
	}
	l := workq.FlowLimit{Table: in.Table, Queue: in.Queue, Kind: in.Kind, PerKey: in.PerKey}
	// Out of int32 is out of range for the Client too; clamped so that a
	// huge number is its error, not a wrapped small one.
	clamp := func(n int64) int {
		const big = 1 << 40
		return int(max(-big, min(n, big)))
	}
	l.Rate, l.Concurrency = clamp(in.Rate), clamp(in.Concurrency)
	if in.Period != nil {
		d, err := parseDuration("period", *in.Period)
		if err != nil {
			return err
		}
		l.Period = d
	}
	var err error
	if l.Shard, err = s.flowShard("shard", in.Shard); err != nil {
		return err
	}
	if err := s.everyShard(r.Context(), "set flow limit "+l.String(), s.client.SetFlowLimit(r.Context(), l)); err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "api set flow limit", "limit", l.String(), "rate", l.Rate, "period", l.Period,
		"concurrency", l.Concurrency, "actor", p.actor())
	writeJSON(w, http.StatusOK, ruleOf(l))
	return nil
}

// flowRemoved is the answer of DELETE /v1/flow/limits.
type flowRemoved struct {
	Table   workq.Table `json:"table"`
	Queue   string      `json:"queue"`
	Shard   string      `json:"shard,omitempty"`
	Kind    string      `json:"kind"`
	PerKey  bool        `json:"per_key"`
	Removed bool        `json:"removed"` // false: there was no such rule (nothing changed)
}

func (s *Server) removeFlowLimit(w http.ResponseWriter, r *http.Request, p principal) error {
	q, err := query(r, "table", "queue", "kind", "per_key", "shard")
	if err != nil {
		return err
	}
	l := workq.FlowLimit{Table: workq.Table(q.Get("table")), Queue: q.Get("queue"), Kind: q.Get("kind")}
	switch v := q.Get("per_key"); v {
	case "", "false":
	case "true":
		l.PerKey = true
	default:
		return invalid("per_key", "%q: want true or false", v)
	}
	if l.Shard, err = s.flowShard("shard", q.Get("shard")); err != nil {
		return err
	}
	removed, err := s.client.RemoveFlowLimit(r.Context(), l)
	if err := s.everyShard(r.Context(), "remove flow limit "+l.String(), err); err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "api remove flow limit", "limit", l.String(), "removed", removed, "actor", p.actor())
	writeJSON(w, http.StatusOK, flowRemoved{Table: l.Table, Queue: l.Queue, Shard: l.Shard, Kind: l.Kind, PerKey: l.PerKey, Removed: removed})
	return nil
}

// fairRequest is the body of PUT /v1/queues/{table}/{queue}/fair.
type fairRequest struct {
	Fair *bool `json:"fair"`
}

// fairState is its answer.
type fairState struct {
	Table workq.Table `json:"table"`
	Queue string      `json:"queue"`
	Fair  bool        `json:"fair"`
}

func (s *Server) setFair(w http.ResponseWriter, r *http.Request, p principal) error {
	t, err := table(r)
	if err != nil {
		return err
	}
	if _, err := query(r); err != nil {
		return err
	}
	var in fairRequest
	if err := s.decodeBody(w, r, &in, false); err != nil {
		return err
	}
	if in.Fair == nil {
		return invalid("fair", "required: true (claims take the queue's limit keys in turn) or false")
	}
	queue := r.PathValue("queue")
	q := workq.QueueRef{Table: t, Queue: queue}
	if err := s.everyShard(r.Context(), "set fairness of "+q.String(), s.client.SetFairness(r.Context(), q, *in.Fair)); err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "api set fairness", "table", t, "queue", queue, "fair", *in.Fair, "actor", p.actor())
	writeJSON(w, http.StatusOK, fairState{Table: t, Queue: queue, Fair: *in.Fair})
	return nil
}

// kindState is the answer of a kind's pause and resume.
type kindState struct {
	Table   workq.Table `json:"table"`
	Queue   string      `json:"queue"`
	Kind    string      `json:"kind"`
	Paused  bool        `json:"paused"`
	Changed bool        `json:"changed"` // the kind was in the other state (on a sharded server: on some shard)
}

func (s *Server) pauseKind(w http.ResponseWriter, r *http.Request, p principal) error {
	return s.setKindPaused(w, r, p, true)
}

func (s *Server) resumeKind(w http.ResponseWriter, r *http.Request, p principal) error {
	return s.setKindPaused(w, r, p, false)
}

func (s *Server) setKindPaused(w http.ResponseWriter, r *http.Request, p principal, pause bool) error {
	t, err := table(r)
	if err != nil {
		return err
	}
	if _, err := query(r); err != nil {
		return err
	}
	var in pauseRequest
	if pause {
		err = s.decodeBody(w, r, &in, true)
	} else {
		err = s.decodeBody(w, r, &struct{}{}, true)
	}
	if err != nil {
		return err
	}
	k := workq.KindRef{Table: t, Queue: r.PathValue("queue"), Kind: r.PathValue("kind")}
	verb := "resume kind"
	var changed bool
	if pause {
		verb = "pause kind"
		changed, err = s.client.PauseKind(r.Context(), k, &workq.ActionOpts{Actor: p.actor(), Reason: in.Reason})
	} else {
		changed, err = s.client.ResumeKind(r.Context(), k)
	}
	if err := s.everyShard(r.Context(), verb+" "+k.String(), err); err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "api "+verb, "table", t, "queue", k.Queue, "kind", k.Kind, "changed", changed,
		"actor", p.actor(), "reason", in.Reason)
	writeJSON(w, http.StatusOK, kindState{Table: t, Queue: k.Queue, Kind: k.Kind, Paused: pause, Changed: changed})
	return nil
}
