package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/inbox"
	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/timers"
	"github.com/workq/workq/workqtype"
)

// Requests that write items. Durations are Go duration strings ("30s",
// "1h30m"), times RFC 3339; a queue left out is "default". Each item is
// checked by its package's client (the checks the CLI runs) before
// anything is written; a batch is written by one statement or in one
// transaction, all or nothing.

type jobRequest struct {
	Queue       *string           `json:"queue"`
	Kind        string            `json:"kind"`
	Payload     json.RawMessage   `json:"payload"`
	Priority    int16             `json:"priority"`
	Delay       *string           `json:"delay"`
	RunAt       *string           `json:"run_at"`
	MaxAttempts int               `json:"max_attempts"`
	DedupKey    string            `json:"dedup_key"`
	Unique      *uniqueRequest    `json:"unique"`
	Metadata    map[string]string `json:"metadata"`
}

type uniqueRequest struct {
	ByArgs   bool     `json:"by_args"`
	ByPeriod *string  `json:"by_period"`
	ByQueue  bool     `json:"by_queue"`
	ByStates []string `json:"by_states"`
}

type jobResult struct {
	ID        int64  `json:"id"`
	Duplicate bool   `json:"duplicate"`       // a run held the dedup or unique key: ID is that run
	Shard     string `json:"shard,omitempty"` // with Options.Shards: the run's database
}

type outboxRequest struct {
	Queue         *string           `json:"queue"`
	Topic         string            `json:"topic"`
	Payload       json.RawMessage   `json:"payload"`
	PartitionKey  *string           `json:"partition_key"`
	Headers       map[string]string `json:"headers"`
	MessageID     string            `json:"message_id"`
	CorrelationID string            `json:"correlation_id"`
	Priority      int16             `json:"priority"`
	Delay         *string           `json:"delay"`
	RunAt         *string           `json:"run_at"`
	MaxAttempts   int               `json:"max_attempts"`
}

type timerRequest struct {
	Queue       *string         `json:"queue"`
	Topic       string          `json:"topic"`
	Payload     json.RawMessage `json:"payload"`
	DueTime     *string         `json:"due_time"`
	Delay       *string         `json:"delay"`
	Priority    int16           `json:"priority"`
	MaxAttempts int             `json:"max_attempts"`
}

type timerResult struct {
	ID      int64     `json:"id"`
	DueTime time.Time `json:"due_time"`
	DueNow  bool      `json:"due_now"`
	Shard   string    `json:"shard,omitempty"` // with Options.Shards
}

type inboxRequest struct {
	Source      string          `json:"source"`
	MessageID   string          `json:"message_id"`
	Topic       string          `json:"topic"`
	Queue       *string         `json:"queue"`
	Payload     json.RawMessage `json:"payload"`
	Priority    int16           `json:"priority"`
	MaxAttempts int             `json:"max_attempts"`
}

type inboxResult struct {
	ID        int64  `json:"id"`
	Result    string `json:"result"`          // new or duplicate
	Processed bool   `json:"processed"`       // a duplicate whose stored message is done
	Status    string `json:"status"`          // the stored message's status: ready, processing, processed, dead
	Shard     string `json:"shard,omitempty"` // with Options.Shards
}

// batch is the body of every batch request.
type batch[T any] struct {
	Items []T `json:"items"`
}

// items is the response of a batch request.
type items[T any] struct {
	Items []T `json:"items"`
}

// payloadOf returns a request's payload for a client: nil (the client's
// {}) when the field was left out.
func payloadOf(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	return raw
}

// prefix is how errors of item i of a batch name their fields; "" for a
// single item.
func prefix(i int) string {
	if i < 0 {
		return ""
	}
	return fmt.Sprintf("items[%d]", i)
}

func join(pre, field string) string {
	if pre == "" {
		return field
	}
	return pre + "." + field
}

// when reads the delay and run-at fields: at most one of them.
func when(pre, delayField string, delay *string, atField string, at *string) (time.Duration, time.Time, error) {
	if delay != nil && at != nil {
		return 0, time.Time{}, invalid(join(pre, delayField), "give %s or %s, not both", delayField, atField)
	}
	if delay != nil {
		d, err := parseDuration(join(pre, delayField), *delay)
		return d, time.Time{}, err
	}
	if at != nil {
		t, err := parseTime(join(pre, atField), *at)
		return 0, t, err
	}
	return 0, time.Time{}, nil
}

func (s *Server) job(i int, in jobRequest) (jobq.Job, error) {
	pre := prefix(i)
	q, err := queueName(join(pre, "queue"), in.Queue)
	if err != nil {
		return jobq.Job{}, err
	}
	delay, runAt, err := when(pre, "delay", in.Delay, "run_at", in.RunAt)
	if err != nil {
		return jobq.Job{}, err
	}
	j := jobq.Job{Queue: q, Kind: in.Kind, Payload: payloadOf(in.Payload), Priority: in.Priority, RunAt: runAt, Delay: delay,
		MaxAttempts: in.MaxAttempts, DedupKey: in.DedupKey, Metadata: in.Metadata}
	if u := in.Unique; u != nil {
		j.Unique = jobq.Unique{ByArgs: u.ByArgs, ByQueue: u.ByQueue, States: u.ByStates}
		if u.ByPeriod != nil {
			if j.Unique.ByPeriod, err = parseDuration(join(pre, "unique.by_period"), *u.ByPeriod); err != nil {
				return jobq.Job{}, err
			}
		}
		if j.Unique.IsZero() {
			return jobq.Job{}, invalid(join(pre, "unique"), "give at least one of by_args, by_period, by_queue, by_states (or leave unique out)")
		}
	}
	if err := s.jobs.Validate(j); err != nil {
		return jobq.Job{}, invalidErr(pre, err)
	}
	return j, nil
}

func created(anyNew bool) int {
	if anyNew {
		return http.StatusCreated
	}
	return http.StatusOK
}

func (s *Server) enqueueJob(w http.ResponseWriter, r *http.Request, _ principal) error {
	j, err := readOne(s, w, r, s.job)
	if err != nil {
		return err
	}
	sh, err := s.placedJobs([]jobq.Job{j})
	if err != nil {
		return err
	}
	res, err := s.jobs.Enqueue(r.Context(), sh.DB, j)
	if err != nil {
		return err
	}
	writeJSON(w, created(!res.Duplicate), jobResult{ID: res.ID, Duplicate: res.Duplicate, Shard: sh.Name})
	return nil
}

// readOne decodes a single-item request and builds its item (build gets
// index -1: errors name the fields alone).
func readOne[Req, Item any](s *Server, w http.ResponseWriter, r *http.Request, build func(int, Req) (Item, error)) (Item, error) {
	var in Req
	if err := s.decodeBody(w, r, &in, false); err != nil {
		var zero Item
		return zero, err
	}
	return build(-1, in)
}

// readBatch decodes a batch request, checks its size and builds every
// item: the first bad one is the error, before anything is written.
func readBatch[Req, Item any](s *Server, w http.ResponseWriter, r *http.Request, build func(int, Req) (Item, error)) ([]Item, error) {
	var in batch[Req]
	if err := s.decodeBody(w, r, &in, false); err != nil {
		return nil, err
	}
	if len(in.Items) == 0 {
		return nil, invalid("items", "give 1 to %d items", MaxBatch)
	}
	if len(in.Items) > MaxBatch {
		return nil, invalid("items", "%d items, want at most %d per request", len(in.Items), MaxBatch)
	}
	out := make([]Item, len(in.Items))
	for i, req := range in.Items {
		var err error
		if out[i], err = build(i, req); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *Server) enqueueJobs(w http.ResponseWriter, r *http.Request, _ principal) error {
	jobs, err := readBatch(s, w, r, s.job)
	if err != nil {
		return err
	}
	timed := false
	dedupAt, uniqueAt := -1, -1
	for i, j := range jobs {
		timed = timed || !j.RunAt.IsZero()
		if j.DedupKey != "" && dedupAt < 0 {
			dedupAt = i
		}
		if !j.Unique.IsZero() && uniqueAt < 0 {
			uniqueAt = i
		}
	}
	if dedupAt >= 0 && uniqueAt >= 0 && !timed {
		return invalid(join(prefix(max(dedupAt, uniqueAt)), "unique"),
			"items[%d] has a dedup_key and items[%d] is unique: one batch takes one or the other", dedupAt, uniqueAt)
	}
	ctx := r.Context()
	sh, err := s.placedJobs(jobs)
	if err != nil {
		return err
	}
	var res []jobq.Enqueued
	if !timed {
		res, err = s.jobs.EnqueueMany(ctx, sh.DB, jobs)
	} else {
		// EnqueueMany takes delays only: jobs with a run_at go one by one,
		// in one transaction.
		err = pgx.BeginFunc(ctx, sh.DB, func(tx pgx.Tx) error {
			res = make([]jobq.Enqueued, len(jobs))
			for i, j := range jobs {
				if res[i], err = s.jobs.Enqueue(ctx, tx, j); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err != nil {
		return err
	}
	out := make([]jobResult, len(res))
	anyNew := false
	for i, e := range res {
		out[i] = jobResult{ID: e.ID, Duplicate: e.Duplicate, Shard: sh.Name}
		anyNew = anyNew || !e.Duplicate
	}
	writeJSON(w, created(anyNew), items[jobResult]{out})
	return nil
}

func (s *Server) message(i int, in outboxRequest) (outbox.Message, error) {
	pre := prefix(i)
	q, err := queueName(join(pre, "queue"), in.Queue)
	if err != nil {
		return outbox.Message{}, err
	}
	delay, runAt, err := when(pre, "delay", in.Delay, "run_at", in.RunAt)
	if err != nil {
		return outbox.Message{}, err
	}
	m := outbox.Message{Queue: q, Topic: in.Topic, Payload: payloadOf(in.Payload), Headers: in.Headers,
		CorrelationID: in.CorrelationID, Priority: in.Priority, RunAt: runAt, Delay: delay, MaxAttempts: in.MaxAttempts}
	if in.PartitionKey != nil {
		if *in.PartitionKey == "" {
			return outbox.Message{}, invalid(join(pre, "partition_key"), "must not be empty (omit it for an unordered message)")
		}
		m.PartitionKey = *in.PartitionKey
	}
	if in.MessageID != "" {
		u, err := uuid.Parse(in.MessageID)
		if err != nil || u == uuid.Nil {
			return outbox.Message{}, invalid(join(pre, "message_id"), "%q is not a UUID", in.MessageID)
		}
		m.MessageID = u
	}
	if err := s.outbox.Validate(m); err != nil {
		return outbox.Message{}, invalidErr(pre, err)
	}
	return m, nil
}

func (s *Server) sendMessage(w http.ResponseWriter, r *http.Request, _ principal) error {
	m, err := readOne(s, w, r, s.message)
	if err != nil {
		return err
	}
	sh, err := s.placed([]string{partitionRoute(m)})
	if err != nil {
		return err
	}
	sent, err := s.outbox.Send(r.Context(), sh.DB, m)
	sent.Shard = sh.Name
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, sent)
	return nil
}

func (s *Server) sendMessages(w http.ResponseWriter, r *http.Request, _ principal) error {
	msgs, err := readBatch(s, w, r, s.message)
	if err != nil {
		return err
	}
	ids := map[uuid.UUID]int{}
	for i, m := range msgs {
		if id := m.MessageID; id != uuid.Nil {
			if j, dup := ids[id]; dup {
				return invalid(join(prefix(i), "message_id"), "%s is also items[%d]'s message id", id, j)
			}
			ids[id] = i
		}
	}
	keys := make([]string, len(msgs))
	for i, m := range msgs {
		keys[i] = partitionRoute(m)
	}
	sh, err := s.placed(keys)
	if err != nil {
		return err
	}
	sent, err := s.outbox.SendMany(r.Context(), sh.DB, msgs)
	for i := range sent {
		sent[i].Shard = sh.Name
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, items[outbox.Sent]{sent})
	return nil
}

func (s *Server) timer(i int, in timerRequest) (timers.Timer, error) {
	pre := prefix(i)
	q, err := queueName(join(pre, "queue"), in.Queue)
	if err != nil {
		return timers.Timer{}, err
	}
	if in.DueTime == nil && in.Delay == nil {
		return timers.Timer{}, invalid(join(pre, "due_time"), "give due_time (RFC 3339) or delay (a duration): when the timer is due")
	}
	delay, due, err := when(pre, "delay", in.Delay, "due_time", in.DueTime)
	if err != nil {
		return timers.Timer{}, err
	}
	if in.Delay != nil && delay == 0 {
		return timers.Timer{}, invalid(join(pre, "delay"), "must be positive (for a timer due now, give due_time with the current time)")
	}
	t := timers.Timer{Queue: q, Topic: in.Topic, Payload: payloadOf(in.Payload), DueTime: due, Delay: delay,
		Priority: in.Priority, MaxAttempts: in.MaxAttempts}
	if err := s.timers.Validate(t); err != nil {
		return timers.Timer{}, invalidErr(pre, err)
	}
	return t, nil
}

func (s *Server) scheduleTimer(w http.ResponseWriter, r *http.Request, _ principal) error {
	t, err := readOne(s, w, r, s.timer)
	if err != nil {
		return err
	}
	sh, err := s.placed(nil)
	if err != nil {
		return err
	}
	res, err := s.timers.Schedule(r.Context(), sh.DB, t)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, timerResult{ID: res.ID, DueTime: res.DueTime, DueNow: res.DueNow, Shard: sh.Name})
	return nil
}

func (s *Server) scheduleTimers(w http.ResponseWriter, r *http.Request, _ principal) error {
	ts, err := readBatch(s, w, r, s.timer)
	if err != nil {
		return err
	}
	sh, err := s.placed(nil)
	if err != nil {
		return err
	}
	res, err := s.timers.ScheduleMany(r.Context(), sh.DB, ts)
	if err != nil {
		return err
	}
	out := make([]timerResult, len(res))
	for i, x := range res {
		out[i] = timerResult{ID: x.ID, DueTime: x.DueTime, DueNow: x.DueNow, Shard: sh.Name}
	}
	writeJSON(w, http.StatusCreated, items[timerResult]{out})
	return nil
}

func (s *Server) inboxMessage(i int, in inboxRequest) (inbox.Message, error) {
	pre := prefix(i)
	q, err := queueName(join(pre, "queue"), in.Queue)
	if err != nil {
		return inbox.Message{}, err
	}
	m := inbox.Message{Source: in.Source, MessageID: in.MessageID, Topic: in.Topic, Queue: q, Payload: payloadOf(in.Payload),
		Priority: in.Priority, MaxAttempts: in.MaxAttempts}
	if err := s.inbox.Validate(m); err != nil {
		return inbox.Message{}, invalidErr(pre, err)
	}
	return m, nil
}

func received(res inbox.Received) inboxResult {
	out := inboxResult{ID: res.ID, Result: "new", Processed: res.Processed, Status: res.Status, Shard: res.Shard}
	if res.Duplicate {
		out.Result = "duplicate"
	}
	return out
}

func (s *Server) receiveMessage(w http.ResponseWriter, r *http.Request, _ principal) error {
	m, err := readOne(s, w, r, s.inboxMessage)
	if err != nil {
		return err
	}
	sh, err := s.placed([]string{workqtype.ShardKeyInbox(m.Source, m.MessageID)})
	if err != nil {
		return err
	}
	res, err := s.inbox.Receive(r.Context(), sh.DB, m)
	res.Shard = sh.Name
	if res.Conflict {
		e := conflict("message %q of source %q was received before with another payload (stored as %d); nothing changed",
			m.MessageID, m.Source, res.ID)
		e.ID = res.ID
		return e
	}
	if err != nil {
		return err
	}
	writeJSON(w, created(res.New()), received(res))
	return nil
}

// errConflicts rolls back an inbox batch that has conflicts.
var errConflicts = errors.New("inbox batch has conflicts")

func (s *Server) receiveMessages(w http.ResponseWriter, r *http.Request, _ principal) error {
	msgs, err := readBatch(s, w, r, s.inboxMessage)
	if err != nil {
		return err
	}
	// ReceiveMany receives the other messages of a batch with conflicts:
	// in a transaction rolled back on a conflict, the request is all or
	// nothing.
	ctx := r.Context()
	var res []inbox.Received
	keys := make([]string, len(msgs))
	for i, m := range msgs {
		keys[i] = workqtype.ShardKeyInbox(m.Source, m.MessageID)
	}
	sh, err := s.placed(keys)
	if err != nil {
		return err
	}
	err = pgx.BeginFunc(ctx, sh.DB, func(tx pgx.Tx) error {
		var rerr error
		res, rerr = s.inbox.ReceiveMany(ctx, tx, msgs)
		if errors.Is(rerr, inbox.ErrConflict) {
			return errConflicts
		}
		return rerr
	})
	if errors.Is(err, errConflicts) {
		e := conflict("%s: nothing was received", conflictSummary(res))
		for i, x := range res {
			if x.Conflict {
				e.Conflicts = append(e.Conflicts, Conflict{Index: i, ID: x.ID})
			}
		}
		return e
	}
	if err != nil {
		return err
	}
	out := make([]inboxResult, len(res))
	anyNew := false
	for i, x := range res {
		out[i] = received(x)
		out[i].Shard = sh.Name
		anyNew = anyNew || x.New()
	}
	writeJSON(w, created(anyNew), items[inboxResult]{out})
	return nil
}

func conflictSummary(res []inbox.Received) string {
	n := 0
	for _, x := range res {
		if x.Conflict {
			n++
		}
	}
	return fmt.Sprintf("%d message(s) were received before with another payload (see conflicts)", n)
}

// placedJobs is placed for jobs, by their dedup or unique key.
func (s *Server) placedJobs(jobs []jobq.Job) (Shard, error) {
	if !s.sharded() {
		return s.shards[0], nil
	}
	keys := make([]string, len(jobs))
	for i, j := range jobs {
		k, err := s.jobs.RouteKey(j)
		if err != nil {
			return Shard{}, invalidErr(prefix(i), err)
		}
		keys[i] = k
	}
	return s.placed(keys)
}

// partitionRoute is an outbox message's route key, as the sharded
// Client's: its partition key's, else its caller-given message id's (so a
// resend lands where the first one did and is refused as a duplicate),
// else "" (round-robin).
func partitionRoute(m outbox.Message) string {
	return workqtype.ShardKeyOutbox(m.PartitionKey, m.MessageID)
}
