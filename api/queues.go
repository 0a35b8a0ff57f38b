package api

import (
	"net/http"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/lease"
)

// queueState is the answer of pause, resume and the limit endpoints.
type queueState struct {
	Table   lease.Table `json:"table"`
	Queue   string      `json:"queue"`
	Paused  *bool       `json:"paused,omitempty"`
	Changed *bool       `json:"changed,omitempty"` // pause, resume: whether the queue was in the other state
	Limit   *int32      `json:"limit,omitempty"`   // set limit: W
}

func (s *Server) listQueues(w http.ResponseWriter, r *http.Request, _ principal) error {
	if _, err := query(r); err != nil {
		return err
	}
	qs, err := admin.Queues(r.Context(), s.o.DB)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct {
		Queues []admin.Queue `json:"queues"`
	}{qs})
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
	var in pauseRequest
	if err := s.decodeBody(w, r, &in, true); err != nil {
		return err
	}
	queue := r.PathValue("queue")
	changed, err := lease.Pause(r.Context(), s.o.DB, t, queue, p.actor(), in.Reason)
	if err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "api pause", "table", t, "queue", queue, "actor", p.actor(), "reason", in.Reason, "changed", changed)
	paused := true
	writeJSON(w, http.StatusOK, queueState{Table: t, Queue: queue, Paused: &paused, Changed: &changed})
	return nil
}

func (s *Server) resumeQueue(w http.ResponseWriter, r *http.Request, p principal) error {
	t, err := table(r)
	if err != nil {
		return err
	}
	if err := s.decodeBody(w, r, &struct{}{}, true); err != nil {
		return err
	}
	queue := r.PathValue("queue")
	changed, err := lease.Resume(r.Context(), s.o.DB, t, queue)
	if err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "api resume", "table", t, "queue", queue, "actor", p.actor(), "changed", changed)
	paused := false
	writeJSON(w, http.StatusOK, queueState{Table: t, Queue: queue, Paused: &paused, Changed: &changed})
	return nil
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
	var in limitRequest
	if err := s.decodeBody(w, r, &in, false); err != nil {
		return err
	}
	if in.Limit == nil || *in.Limit < 0 || *in.Limit > lease.MaxLimit {
		return invalid("limit", "want W, a whole number from 0 to %d (DELETE removes the limit)", lease.MaxLimit)
	}
	queue := r.PathValue("queue")
	if err := lease.SetLimit(r.Context(), s.o.DB, t, queue, int(*in.Limit)); err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "api set limit", "table", t, "queue", queue, "actor", p.actor(), "limit", *in.Limit)
	limit := int32(*in.Limit)
	writeJSON(w, http.StatusOK, queueState{Table: t, Queue: queue, Limit: &limit})
	return nil
}

func (s *Server) removeLimit(w http.ResponseWriter, r *http.Request, p principal) error {
	t, err := table(r)
	if err != nil {
		return err
	}
	queue := r.PathValue("queue")
	if err := lease.SetLimit(r.Context(), s.o.DB, t, queue, -1); err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "api remove limit", "table", t, "queue", queue, "actor", p.actor())
	writeJSON(w, http.StatusOK, queueState{Table: t, Queue: queue})
	return nil
}
