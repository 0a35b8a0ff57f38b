package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/workq/workq"
	"github.com/workq/workq/inbox"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/timers"
)

// Requests that write items. Durations are Go duration strings ("30s",
// "1h30m"), times RFC 3339; a queue left out is "default". Each item is
// checked by the Client's checks (ValidateArgs, the kinds' Validate)
// before anything is written, then written by the Client's method
// (Enqueue, EnqueueMany, Send, SendMany, ScheduleTimer, ScheduleTimers;
// the inbox's ReceiveManyTx), which runs the enqueue middleware and puts
// each item on its key's shard. On one database a batch is one statement
// or one transaction, all or nothing; a sharded Client writes each
// shard's part in its own, in shard order.

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
	LimitKey    string            `json:"limit_key"`
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
	Shard     string `json:"shard,omitempty"` // on a sharded Client: the run's database
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
	Shard   string    `json:"shard,omitempty"` // on a sharded Client
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
	Shard     string `json:"shard,omitempty"` // on a sharded Client
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

// job is one job of a request as the Client enqueues it: its args (a
// workq.RawArgs of the kind and payload) and options.
func (s *Server) job(i int, in jobRequest) (workq.EnqueueParams, error) {
	pre := prefix(i)
	q, err := queueName(join(pre, "queue"), in.Queue)
	if err != nil {
		return workq.EnqueueParams{}, err
	}
	delay, runAt, err := when(pre, "delay", in.Delay, "run_at", in.RunAt)
	if err != nil {
		return workq.EnqueueParams{}, err
	}
	o := &workq.EnqueueOpts{Queue: q, Priority: in.Priority, RunAt: runAt, Delay: delay, MaxAttempts: in.MaxAttempts,
		DedupKey: in.DedupKey, Metadata: in.Metadata, LimitKey: in.LimitKey}
	if u := in.Unique; u != nil {
		o.Unique = workq.UniqueOpts{ByArgs: u.ByArgs, ByQueue: u.ByQueue}
		for _, st := range u.ByStates {
			o.Unique.ByStates = append(o.Unique.ByStates, workq.JobState(st))
		}
		if u.ByPeriod != nil {
			if o.Unique.ByPeriod, err = parseDuration(join(pre, "unique.by_period"), *u.ByPeriod); err != nil {
				return workq.EnqueueParams{}, err
			}
		}
		if o.Unique.IsZero() {
			return workq.EnqueueParams{}, invalid(join(pre, "unique"), "give at least one of by_args, by_period, by_queue, by_states (or leave unique out)")
		}
	}
	p := workq.EnqueueParams{Args: workq.RawArgs{KindName: in.Kind, Payload: payloadOf(in.Payload)}, Opts: o}
	if err := s.client.ValidateArgs(p.Args, p.Opts); err != nil {
		return workq.EnqueueParams{}, invalidErr(pre, err)
	}
	return p, nil
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
	res, err := s.client.Enqueue(r.Context(), j.Args, j.Opts)
	if err != nil {
		return err
	}
	writeJSON(w, created(!res.Duplicate), jobResult{ID: res.ID, Duplicate: res.Duplicate, Shard: s.shardLabel(res.Shard)})
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
		timed = timed || !j.Opts.RunAt.IsZero()
		if j.Opts.DedupKey != "" && dedupAt < 0 {
			dedupAt = i
		}
		if !j.Opts.Unique.IsZero() && uniqueAt < 0 {
			uniqueAt = i
		}
	}
	if dedupAt >= 0 && uniqueAt >= 0 && !timed {
		return invalid(join(prefix(max(dedupAt, uniqueAt)), "unique"),
			"items[%d] has a dedup_key and items[%d] is unique: one batch takes one or the other", dedupAt, uniqueAt)
	}
	// One statement, or with a run_at one transaction, per shard.
	res, err := s.client.EnqueueMany(r.Context(), jobs)
	if err != nil {
		return err
	}
	out := make([]jobResult, len(res))
	anyNew := false
	for i, e := range res {
		out[i] = jobResult{ID: e.ID, Duplicate: e.Duplicate, Shard: s.shardLabel(e.Shard)}
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
	if err := s.validateMessage(m); err != nil {
		return outbox.Message{}, invalidErr(pre, err)
	}
	return m, nil
}

func (s *Server) sendMessage(w http.ResponseWriter, r *http.Request, _ principal) error {
	m, err := readOne(s, w, r, s.message)
	if err != nil {
		return err
	}
	sent, err := s.client.Send(r.Context(), m)
	if err != nil {
		return err
	}
	sent.Shard = s.shardLabel(sent.Shard)
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
	sent, err := s.client.SendMany(r.Context(), msgs)
	if err != nil {
		return err
	}
	for i := range sent {
		sent[i].Shard = s.shardLabel(sent[i].Shard)
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
	if err := s.validateTimer(t); err != nil {
		return timers.Timer{}, invalidErr(pre, err)
	}
	return t, nil
}

func (s *Server) scheduleTimer(w http.ResponseWriter, r *http.Request, _ principal) error {
	t, err := readOne(s, w, r, s.timer)
	if err != nil {
		return err
	}
	res, err := s.client.ScheduleTimer(r.Context(), t)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, timerResult{ID: res.ID, DueTime: res.DueTime, DueNow: res.DueNow, Shard: s.shardLabel(res.Shard)})
	return nil
}

func (s *Server) scheduleTimers(w http.ResponseWriter, r *http.Request, _ principal) error {
	ts, err := readBatch(s, w, r, s.timer)
	if err != nil {
		return err
	}
	res, err := s.client.ScheduleTimers(r.Context(), ts)
	if err != nil {
		return err
	}
	out := make([]timerResult, len(res))
	for i, x := range res {
		out[i] = timerResult{ID: x.ID, DueTime: x.DueTime, DueNow: x.DueNow, Shard: s.shardLabel(x.Shard)}
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
	if err := s.validateInbox(m); err != nil {
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
	res, err := s.client.Receive(r.Context(), m)
	res.Shard = s.shardLabel(res.Shard)
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
	res, err := s.receiveAll(r.Context(), msgs)
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
		out[i].Shard = s.shardLabel(x.Shard)
		anyNew = anyNew || x.New()
	}
	writeJSON(w, created(anyNew), items[inboxResult]{out})
	return nil
}

// receiveAll receives msgs all or nothing: a batch with a conflict
// receives none of them (errConflicts, with every result), where the
// Client's ReceiveMany would receive the others. Each message goes to the
// shard the Client puts it on (ShardFor its InboxKey), each shard's part
// in a transaction of the Client's ReceiveManyTx on that shard; they
// commit, in shard order, only when every shard's part is received. (A
// commit that fails after an earlier shard's committed leaves that part
// received: the error says so, and a retry finds those as duplicates.)
func (s *Server) receiveAll(ctx context.Context, msgs []inbox.Message) ([]inbox.Received, error) {
	groups := map[string][]int{}
	for i, m := range msgs {
		name := s.client.ShardFor(workq.InboxKey(m.Source, m.MessageID))
		groups[name] = append(groups[name], i)
	}
	res := make([]inbox.Received, len(msgs))
	var txs []pgx.Tx
	var names []string
	defer func() {
		for _, tx := range txs {
			_ = tx.Rollback(context.WithoutCancel(ctx)) // after Commit: nothing to do
		}
	}()
	conflicts := false
	for _, name := range s.client.Shards() {
		idx, ok := groups[name]
		if !ok {
			continue
		}
		sc, err := s.client.Shard(name)
		if err != nil {
			return nil, err
		}
		tx, err := sc.Pool().Begin(ctx)
		if err != nil {
			return nil, fmt.Errorf("shard %s: %w", name, err)
		}
		txs, names = append(txs, tx), append(names, name)
		part := make([]inbox.Message, len(idx))
		for i, x := range idx {
			part[i] = msgs[x]
		}
		rs, err := sc.ReceiveManyTx(ctx, tx, part)
		if errors.Is(err, inbox.ErrConflict) && len(rs) == len(idx) {
			conflicts, err = true, nil
		}
		if err != nil {
			return nil, fmt.Errorf("shard %s: %w", name, err)
		}
		for i, x := range idx {
			res[x] = rs[i]
		}
	}
	if conflicts {
		return res, errConflicts
	}
	for i, tx := range txs {
		if err := tx.Commit(ctx); err != nil {
			return nil, fmt.Errorf("shard %s: commit (the shards before it, %v, committed): %w", names[i], names[:i], err)
		}
	}
	return res, nil
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
