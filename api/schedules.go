package api

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"

	"github.com/workq/workq"
	"github.com/workq/workq/workqtype"
)

// scheduleRequest is the body of POST /v1/schedules: workq.ScheduleSpec in
// JSON. Fields left out take the Spec's defaults (timezone UTC, queue
// default, max_attempts 4, overlap allow, misfire run_once, misfire_cap
// 100, enabled).
type scheduleRequest struct {
	Name        string          `json:"name"`
	Cron        string          `json:"cron"`
	Timezone    *string         `json:"timezone"`
	Queue       *string         `json:"queue"`
	Kind        string          `json:"kind"`
	Payload     json.RawMessage `json:"payload"`
	Priority    int16           `json:"priority"`
	MaxAttempts *int            `json:"max_attempts"`
	Overlap     string          `json:"overlap"`
	Misfire     string          `json:"misfire"`
	MisfireCap  *int            `json:"misfire_cap"`
	Enabled     *bool           `json:"enabled"`
}

// scheduleChanges is the body of PATCH /v1/schedules/{name}: the fields
// to change (workq.ScheduleChanges); at least one.
type scheduleChanges struct {
	Cron        *string         `json:"cron"`
	Timezone    *string         `json:"timezone"`
	Queue       *string         `json:"queue"`
	Kind        *string         `json:"kind"`
	Payload     json.RawMessage `json:"payload"`
	Priority    *int16          `json:"priority"`
	MaxAttempts *int            `json:"max_attempts"`
	Overlap     *string         `json:"overlap"`
	Misfire     *string         `json:"misfire"`
	MisfireCap  *int            `json:"misfire_cap"`
}

// triggerRequest is the optional body of POST .../trigger.
type triggerRequest struct {
	Force bool `json:"force"` // run even while the previous run is live under overlap skip
}

// scheduleName reads the {name} path parameter.
func scheduleName(r *http.Request) (string, error) {
	name := r.PathValue("name")
	if !workqtype.ValidName(name) {
		return "", invalid("name", "%q is not a valid schedule name (1-128 of A-Z a-z 0-9 _ . : -)", name)
	}
	return name, nil
}

// nonZero refuses an explicit 0 where 0 would mean "the default".
func nonZero(field string, p *int) (int, error) {
	if p == nil {
		return 0, nil
	}
	if *p == 0 {
		return 0, invalid(field, "must not be 0 (omit it for the default)")
	}
	return *p, nil
}

// scheduleOut is a schedule as the API answers it: with its shard on a
// sharded server.
type scheduleOut struct {
	Shard string `json:"shard,omitempty"`
	workq.Schedule
}

// scheduleShard is the shard of the schedule called name: on a sharded
// server the shard of its name, as workq.Client places it
// (workqtype.ShardKeySchedule), unless the shard query parameter (of the
// endpoints that take it) names one, to reach a schedule stored
// elsewhere.
func (s *Server) scheduleShard(name, shard string) (dbShard, error) {
	if shard != "" || !s.sharded() {
		return s.shardNamed("shard", shard)
	}
	return s.shardNamed("shard", s.client.ShardFor(workq.ScheduleKey(name)))
}

// listSchedules lists the schedules of every shard, by name (then shard),
// each tagged with its shard.
func (s *Server) listSchedules(w http.ResponseWriter, r *http.Request, _ principal) error {
	if _, err := query(r); err != nil {
		return err
	}
	per := make([][]workq.Schedule, len(s.shards))
	errs := s.onEachShard(r.Context(), func(ctx context.Context, i int, sh dbShard) error {
		var err error
		per[i], err = s.opSchedules(ctx, sh)
		return err
	})
	if !s.sharded() && errs[0] != nil {
		return errs[0]
	}
	if err := s.shardFailure(r.Context(), "listing the schedules", make([]ShardResult, len(s.shards)), errs); err != nil {
		return err
	}
	list := []scheduleOut{}
	for i, scs := range per {
		for _, sc := range scs {
			list = append(list, scheduleOut{Shard: s.shards[i].Name, Schedule: sc})
		}
	}
	sort.SliceStable(list, func(i, j int) bool {
		if list[i].Name != list[j].Name {
			return list[i].Name < list[j].Name
		}
		return list[i].Shard < list[j].Shard
	})
	writeJSON(w, http.StatusOK, struct {
		Schedules []scheduleOut `json:"schedules"`
	}{list})
	return nil
}

func (s *Server) createSchedule(w http.ResponseWriter, r *http.Request, p principal) error {
	if _, err := query(r); err != nil {
		return err
	}
	var in scheduleRequest
	if err := s.decodeBody(w, r, &in, false); err != nil {
		return err
	}
	q, err := queueName("queue", in.Queue)
	if err != nil {
		return err
	}
	sp := workq.ScheduleSpec{Name: in.Name, Cron: in.Cron, Queue: q, Kind: in.Kind, Payload: payloadOf(in.Payload),
		Priority: in.Priority, Overlap: workq.OverlapPolicy(in.Overlap), Misfire: workq.MisfirePolicy(in.Misfire),
		Disabled: in.Enabled != nil && !*in.Enabled}
	if in.Timezone != nil {
		if *in.Timezone == "" {
			return invalid("timezone", "must not be empty (omit it for UTC)")
		}
		sp.Timezone = *in.Timezone
	}
	if sp.MaxAttempts, err = nonZero("max_attempts", in.MaxAttempts); err != nil {
		return err
	}
	if sp.MisfireCap, err = nonZero("misfire_cap", in.MisfireCap); err != nil {
		return err
	}
	sh, err := s.scheduleShard(sp.Name, "")
	if err != nil {
		return err
	}
	sc, err := s.opCreateSchedule(r.Context(), sh, sp)
	if err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "api schedule created", "name", sc.Name, "shard", sh.Name, "actor", p.actor())
	writeJSON(w, http.StatusCreated, scheduleOut{Shard: sh.Name, Schedule: sc})
	return nil
}

func (s *Server) getSchedule(w http.ResponseWriter, r *http.Request, _ principal) error {
	name, err := scheduleName(r)
	if err != nil {
		return err
	}
	q, err := query(r, "shard")
	if err != nil {
		return err
	}
	sh, err := s.scheduleShard(name, q.Get("shard"))
	if err != nil {
		return err
	}
	sc, err := s.opGetSchedule(r.Context(), sh, name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, scheduleOut{Shard: sh.Name, Schedule: sc})
	return nil
}

func (s *Server) updateSchedule(w http.ResponseWriter, r *http.Request, p principal) error {
	name, err := scheduleName(r)
	if err != nil {
		return err
	}
	if _, err := query(r); err != nil {
		return err
	}
	var in scheduleChanges
	if err := s.decodeBody(w, r, &in, false); err != nil {
		return err
	}
	c := workq.ScheduleChanges{Cron: in.Cron, Timezone: in.Timezone, Kind: in.Kind, Priority: in.Priority,
		MaxAttempts: in.MaxAttempts, MisfireCap: in.MisfireCap}
	if in.Queue != nil {
		q, err := queueName("queue", in.Queue)
		if err != nil {
			return err
		}
		c.Queue = &q
	}
	if len(in.Payload) > 0 {
		c.Payload = json.RawMessage(in.Payload)
	}
	if in.Overlap != nil {
		o := workq.OverlapPolicy(*in.Overlap)
		c.Overlap = &o
	}
	if in.Misfire != nil {
		m := workq.MisfirePolicy(*in.Misfire)
		c.Misfire = &m
	}
	if c == (workq.ScheduleChanges{}) {
		return invalid("", "nothing to update: give at least one of cron, timezone, queue, kind, payload, priority, "+
			"max_attempts, overlap, misfire, misfire_cap")
	}
	sh, err := s.scheduleShard(name, "")
	if err != nil {
		return err
	}
	sc, err := s.opUpdateSchedule(r.Context(), sh, name, c)
	if err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "api schedule updated", "name", name, "shard", sh.Name, "actor", p.actor())
	writeJSON(w, http.StatusOK, scheduleOut{Shard: sh.Name, Schedule: sc})
	return nil
}

func (s *Server) deleteSchedule(w http.ResponseWriter, r *http.Request, p principal) error {
	name, err := scheduleName(r)
	if err != nil {
		return err
	}
	q, err := query(r, "shard")
	if err != nil {
		return err
	}
	sh, err := s.scheduleShard(name, q.Get("shard"))
	if err != nil {
		return err
	}
	if err := s.opDeleteSchedule(r.Context(), sh, name); err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "api schedule deleted", "name", name, "shard", sh.Name, "actor", p.actor())
	writeJSON(w, http.StatusOK, struct {
		Deleted string `json:"deleted"`
		Shard   string `json:"shard,omitempty"`
	}{name, sh.Name})
	return nil
}

func (s *Server) triggerSchedule(w http.ResponseWriter, r *http.Request, p principal) error {
	name, err := scheduleName(r)
	if err != nil {
		return err
	}
	if _, err := query(r); err != nil {
		return err
	}
	var in triggerRequest
	if err := s.decodeBody(w, r, &in, true); err != nil {
		return err
	}
	sh, err := s.scheduleShard(name, "")
	if err != nil {
		return err
	}
	tr, err := s.opTriggerSchedule(r.Context(), sh, name, in.Force)
	if err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "api schedule triggered", "name", name, "shard", sh.Name, "actor", p.actor(), "run_id", tr.RunID, "force", in.Force)
	writeJSON(w, http.StatusCreated, struct {
		workq.TriggeredRun
		Shard string `json:"shard,omitempty"` // the shard of the run
	}{tr, sh.Name})
	return nil
}

func (s *Server) toggleSchedule(w http.ResponseWriter, r *http.Request, p principal, enable bool) error {
	name, err := scheduleName(r)
	if err != nil {
		return err
	}
	if _, err := query(r); err != nil {
		return err
	}
	if err := s.decodeBody(w, r, &struct{}{}, true); err != nil {
		return err
	}
	sh, err := s.scheduleShard(name, "")
	if err != nil {
		return err
	}
	sc, err := s.opEnableSchedule(r.Context(), sh, name, enable)
	if err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "api schedule toggled", "name", name, "shard", sh.Name, "enabled", sc.Enabled, "actor", p.actor())
	writeJSON(w, http.StatusOK, scheduleOut{Shard: sh.Name, Schedule: sc})
	return nil
}

func (s *Server) enableSchedule(w http.ResponseWriter, r *http.Request, p principal) error {
	return s.toggleSchedule(w, r, p, true)
}

func (s *Server) disableSchedule(w http.ResponseWriter, r *http.Request, p principal) error {
	return s.toggleSchedule(w, r, p, false)
}
