package inboxrt_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/inbox"
	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/config"
	"github.com/workq/workq/internal/inboxrt"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/topicproc"
	"github.com/workq/workq/internal/worker"
	"github.com/workq/workq/workqtype"
)

type env struct {
	t      *testing.T
	ctx    context.Context
	pool   *pgxpool.Pool
	client *inboxrt.Client
}

func newEnv(t *testing.T, maxConns int32) *env {
	t.Helper()
	return &env{t: t, ctx: context.Background(), pool: testdb.PoolWith(t, maxConns), client: inboxrt.NewClient(inboxrt.ClientOptions{})}
}

func (e *env) receive(m inbox.Message) inbox.Received {
	e.t.Helper()
	r, err := e.client.Receive(e.ctx, e.pool, m)
	if err != nil {
		e.t.Fatalf("receive %s/%s: %v", m.Source, m.MessageID, err)
	}
	return r
}

func (e *env) count(where string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(e.ctx, "select count(*) from workq.inbox where "+where, args...).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// row returns the whole stored row as text, with its xmin and ctid: equal
// snapshots mean the row was not written at all.
func (e *env) row(id int64) string {
	e.t.Helper()
	var s string
	if err := e.pool.QueryRow(e.ctx, "select xmin::text || ' ' || ctid::text || ' ' || to_jsonb(i)::text from workq.inbox i where id = $1", id).Scan(&s); err != nil {
		e.t.Fatal(err)
	}
	return s
}

// process claims the queue's ready messages and ends each with outcome.
func (e *env) process(queue string, outcome lease.Outcome) []int64 {
	e.t.Helper()
	eng := lease.New(e.pool, lease.Inbox)
	c, err := eng.Claim(e.ctx, lease.ClaimParams{Queue: queue, Max: 100, Lease: time.Minute, WorkerID: "test"})
	if err != nil {
		e.t.Fatal(err)
	}
	var ends []lease.Completion
	var ids []int64
	for _, it := range c.Items {
		ends = append(ends, lease.Completion{ID: it.ID, Token: c.Token, RunID: it.RunID, Outcome: outcome, Error: "test"})
		ids = append(ids, it.ID)
	}
	if _, err := eng.Complete(e.ctx, ends); err != nil {
		e.t.Fatal(err)
	}
	return ids
}

func (e *env) status(id int64) lease.Status {
	e.t.Helper()
	s, err := admin.Get(e.ctx, e.pool, lease.Inbox, id)
	if err != nil {
		e.t.Fatal(err)
	}
	st, err := admin.ParseStatus(s.Status)
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

// waitStatus polls until message id has status want.
func (e *env) waitStatus(id int64, want lease.Status) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := e.status(id)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("message %d: status %s after 30s, want %s", id, got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestReceiveDuplicates(t *testing.T) {
	e := newEnv(t, 4)
	msg := inbox.Message{Source: "billing", MessageID: "inv-1", Topic: "invoice.paid", Payload: json.RawMessage(`{"amount": 10, "currency": "EUR"}`), Queue: "dup"}
	first := e.receive(msg)
	if !first.New() || first.Duplicate || first.Processed || first.Status != "ready" || first.ID == 0 {
		t.Fatalf("first receive %+v, want new and ready", first)
	}
	before := e.row(first.ID)
	// The same JSON value, written differently (key order, spacing), is the
	// same payload.
	same := msg
	same.Payload = json.RawMessage(`{"currency":"EUR","amount":10}`)
	steps := []struct {
		name      string
		do        func()
		processed bool
		status    lease.Status
	}{
		{"before processing", func() {}, false, lease.StatusReady},
		{"after processing", func() {
			if ids := e.process("dup", lease.Done); !slices.Equal(ids, []int64{first.ID}) {
				t.Fatalf("processed %v, want [%d]", ids, first.ID)
			}
			before = e.row(first.ID)
		}, true, lease.StatusDone},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			s.do()
			for _, m := range []inbox.Message{msg, same} {
				got := e.receive(m)
				want := inbox.Received{ID: first.ID, Duplicate: true, Processed: s.processed, Status: inboxrt.StatusName(s.status)}
				if got != want {
					t.Fatalf("repeat: %+v, want %+v", got, want)
				}
			}
			if after := e.row(first.ID); after != before {
				t.Fatalf("a duplicate wrote the stored row:\n before %s\n after  %s", before, after)
			}
			if n := e.count("source = 'billing'"); n != 1 {
				t.Fatalf("%d rows, want 1", n)
			}
		})
	}
	if ids := e.process("dup", lease.Done); len(ids) != 0 {
		t.Fatalf("a duplicate of a processed message made %v claimable again", ids)
	}
	// The same message id from another source is another message.
	other := msg
	other.Source = "shipping"
	if r := e.receive(other); !r.New() || r.ID == first.ID {
		t.Fatalf("same id from another source: %+v, want a new message", r)
	}
}

func TestReceiveConflictChangesNothing(t *testing.T) {
	e := newEnv(t, 4)
	msg := inbox.Message{Source: "billing", MessageID: "inv-1", Payload: map[string]any{"amount": 10}}
	first := e.receive(msg)
	before := e.row(first.ID)
	for _, payload := range []any{map[string]any{"amount": 11}, map[string]any{"amount": 10.5}, json.RawMessage(`{"amount": 10.0}`), nil} {
		m := msg
		m.Payload = payload
		got, err := e.client.Receive(e.ctx, e.pool, m)
		if !errors.Is(err, inbox.ErrConflict) {
			t.Fatalf("payload %v: err %v, want ErrConflict", payload, err)
		}
		var ce *inbox.ConflictError
		if !errors.As(err, &ce) || ce.ID != first.ID || ce.Source != "billing" || ce.MessageID != "inv-1" {
			t.Fatalf("payload %v: error %#v, want a *ConflictError naming inbox %d", payload, err, first.ID)
		}
		if !got.Conflict || got.Duplicate || got.ID != first.ID {
			t.Fatalf("payload %v: %+v, want a conflict with id %d", payload, got, first.ID)
		}
		if after := e.row(first.ID); after != before {
			t.Fatalf("payload %v: the conflict changed the row:\n before %s\n after  %s", payload, before, after)
		}
	}
	if n := e.count("true"); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}
}

// Many goroutines receive the same message at once: exactly one inserts it,
// every other gets a duplicate of the same id, and the handler runs once.
func TestReceiveConcurrent(t *testing.T) {
	const racers = 16
	e := newEnv(t, racers+4)
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		results = make([]inbox.Received, racers)
		errs    = make([]error, racers)
	)
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			// Half of them in a transaction of their own, as a consumer would.
			if i%2 == 0 {
				results[i], errs[i] = e.client.Receive(e.ctx, e.pool, inbox.Message{Source: "s", MessageID: "race", Topic: "t", Queue: "race"})
				return
			}
			tx, err := e.pool.Begin(e.ctx)
			if err != nil {
				errs[i] = err
				return
			}
			defer tx.Rollback(e.ctx)
			if results[i], errs[i] = e.client.Receive(e.ctx, tx, inbox.Message{Source: "s", MessageID: "race", Topic: "t", Queue: "race"}); errs[i] == nil {
				errs[i] = tx.Commit(e.ctx)
			}
		}()
	}
	close(start)
	wg.Wait()
	fresh := 0
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("racer %d: %v", i, errs[i])
		}
		if r.New() {
			fresh++
		} else if !r.Duplicate {
			t.Fatalf("racer %d: %+v, want new or duplicate", i, r)
		}
		if r.ID != results[0].ID {
			t.Fatalf("racer %d got id %d, racer 0 id %d", i, r.ID, results[0].ID)
		}
	}
	if fresh != 1 {
		t.Fatalf("%d racers inserted the message, want exactly 1", fresh)
	}
	var runs atomic.Int32
	p := inboxrt.NewProcessor()
	if err := p.Handle("t", func(ctx context.Context, j *worker.Job) error { runs.Add(1); return nil }); err != nil {
		t.Fatal(err)
	}
	w := startWorker(t, e, p, "race")
	e.waitStatus(results[0].ID, lease.StatusDone)
	// Received again while and after it runs: still one run.
	if r := e.receive(inbox.Message{Source: "s", MessageID: "race", Topic: "t", Queue: "race"}); !r.Processed {
		t.Fatalf("repeat after processing: %+v, want processed", r)
	}
	if err := w.Stop(e.ctx); err != nil {
		t.Fatal(err)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
}

func startWorker(t *testing.T, e *env, p *topicproc.Processor, queues ...string) *worker.Worker {
	t.Helper()
	cfg := config.Default()
	cfg.Poll = 20 * time.Millisecond
	cfg.BackoffBase, cfg.BackoffCap = time.Millisecond, 5*time.Millisecond
	w, err := worker.New(e.pool, cfg.Worker(), worker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AddSource(p.Source(queues...)); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(e.ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	return w
}

func TestReceiveMany(t *testing.T) {
	e := newEnv(t, 4)
	stored := e.receive(inbox.Message{Source: "s", MessageID: "old", Payload: map[string]int{"v": 1}, Queue: "many"})
	clash := e.receive(inbox.Message{Source: "s", MessageID: "clash", Payload: map[string]int{"v": 1}, Queue: "many"})
	clashRow := e.row(clash.ID)
	msg := func(id string, v int) inbox.Message {
		return inbox.Message{Source: "s", MessageID: id, Payload: map[string]int{"v": v}, Queue: "many"}
	}
	batch := []inbox.Message{
		msg("b", 1),     // 0 new
		msg("old", 1),   // 1 duplicate of a stored message
		msg("a", 1),     // 2 new
		msg("b", 1),     // 3 repeat within the batch: duplicate of 0
		msg("clash", 2), // 4 conflict with a stored message
		msg("a", 2),     // 5 repeat within the batch, other payload: conflict with 2
		msg("b", 1),     // 6 duplicate of 0 again
	}
	got, err := e.client.ReceiveMany(e.ctx, e.pool, batch)
	if !errors.Is(err, inbox.ErrConflict) {
		t.Fatalf("err %v, want ErrConflict", err)
	}
	if len(got) != len(batch) {
		t.Fatalf("%d results for %d messages", len(got), len(batch))
	}
	ready := "ready"
	want := []inbox.Received{
		{ID: got[0].ID, Status: ready},
		{ID: stored.ID, Duplicate: true, Status: ready},
		{ID: got[2].ID, Status: ready},
		{ID: got[0].ID, Duplicate: true, Status: ready},
		{ID: clash.ID, Conflict: true, Status: ready},
		{ID: got[2].ID, Conflict: true, Status: ready},
		{ID: got[0].ID, Duplicate: true, Status: ready},
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("message %d (%s): %+v, want %+v", i, batch[i].MessageID, got[i], want[i])
		}
	}
	if got[0].ID == 0 || got[2].ID == 0 || got[0].ID == got[2].ID {
		t.Fatalf("new ids %d and %d", got[0].ID, got[2].ID)
	}
	var conflicts []int
	for _, ce := range conflictErrors(err) {
		conflicts = append(conflicts, ce.Index)
	}
	if !slices.Equal(conflicts, []int{4, 5}) {
		t.Fatalf("conflict errors at %v, want [4 5]: %v", conflicts, err)
	}
	if n := e.count("queue = 'many'"); n != 4 {
		t.Fatalf("%d rows, want 4 (old, clash, a, b)", n)
	}
	if after := e.row(clash.ID); after != clashRow {
		t.Fatalf("the conflict changed the row")
	}
	var payload string
	if err := e.pool.QueryRow(e.ctx, "select payload::text from workq.inbox where id = $1", got[2].ID).Scan(&payload); err != nil || payload != `{"v": 1}` {
		t.Fatalf("stored payload of a: %s, %v; want the first occurrence's", payload, err)
	}
	// A batch without conflicts returns no error.
	again, err := e.client.ReceiveMany(e.ctx, e.pool, []inbox.Message{msg("a", 1), msg("c", 1)})
	if err != nil || !again[0].Duplicate || !again[1].New() {
		t.Fatalf("second batch: %+v, %v", again, err)
	}
}

func conflictErrors(err error) []*inbox.ConflictError {
	var out []*inbox.ConflictError
	var walk func(error)
	walk = func(err error) {
		if ce, ok := err.(*inbox.ConflictError); ok {
			out = append(out, ce)
			return
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	return out
}

func TestReceiveRolledBack(t *testing.T) {
	e := newEnv(t, 4)
	m := inbox.Message{Source: "s", MessageID: "tx", Payload: map[string]int{"v": 1}}
	tx, err := e.pool.Begin(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.client.Receive(e.ctx, tx, m)
	if err != nil || !r.New() {
		t.Fatalf("receive in tx: %+v, %v", r, err)
	}
	// Within the transaction a repeat is a duplicate already.
	if r2, err := e.client.Receive(e.ctx, tx, m); err != nil || !r2.Duplicate || r2.ID != r.ID {
		t.Fatalf("repeat in tx: %+v, %v", r2, err)
	}
	if many, err := e.client.ReceiveMany(e.ctx, tx, []inbox.Message{m, {Source: "s", MessageID: "tx2"}}); err != nil || !many[0].Duplicate || !many[1].New() {
		t.Fatalf("batch in tx: %+v, %v", many, err)
	}
	if err := tx.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
	if n := e.count("true"); n != 0 {
		t.Fatalf("%d rows after rollback, want 0", n)
	}
	if r := e.receive(m); !r.New() {
		t.Fatalf("receive after rollback: %+v, want new", r)
	}
}

func TestReceiveValidation(t *testing.T) {
	e := newEnv(t, 4)
	long := func(n int) string { return string(make([]byte, n)) }
	ok := inbox.Message{Source: "s", MessageID: "m"}
	cases := []struct {
		name string
		edit func(*inbox.Message)
	}{
		{"no source", func(m *inbox.Message) { m.Source = "" }},
		{"no message id", func(m *inbox.Message) { m.MessageID = "" }},
		{"source too long", func(m *inbox.Message) { m.Source = fmt.Sprintf("%0257d", 0) }},
		{"message id too long", func(m *inbox.Message) { m.MessageID = fmt.Sprintf("%0513d", 0) }},
		{"NUL in message id", func(m *inbox.Message) { m.MessageID = "a" + long(1) }},
		{"source not UTF-8", func(m *inbox.Message) { m.Source = "\xff" }},
		{"bad queue", func(m *inbox.Message) { m.Queue = "no spaces" }},
		{"bad topic", func(m *inbox.Message) { m.Topic = "tab\there" }},
		{"array payload", func(m *inbox.Message) { m.Payload = json.RawMessage(`[1]`) }},
		{"invalid JSON", func(m *inbox.Message) { m.Payload = []byte(`{`) }},
		{"NUL in payload", func(m *inbox.Message) { m.Payload = json.RawMessage(`{"a":"\u0000"}`) }},
		{"unmarshalable payload", func(m *inbox.Message) { m.Payload = map[string]any{"f": func() {}} }},
		{"max attempts", func(m *inbox.Message) { m.MaxAttempts = 1001 }},
		{"negative max attempts", func(m *inbox.Message) { m.MaxAttempts = -1 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := ok
			c.edit(&m)
			if err := e.client.Validate(m); !errors.Is(err, workqtype.ErrInvalid) {
				t.Fatalf("Validate: %v, want ErrInvalid", err)
			}
			if _, err := e.client.Receive(e.ctx, e.pool, m); !errors.Is(err, workqtype.ErrInvalid) {
				t.Fatalf("Receive: %v, want ErrInvalid", err)
			}
			// One bad message rejects the whole batch.
			if _, err := e.client.ReceiveMany(e.ctx, e.pool, []inbox.Message{ok, m}); !errors.Is(err, workqtype.ErrInvalid) {
				t.Fatalf("ReceiveMany: %v, want ErrInvalid", err)
			}
			if n := e.count("true"); n != 0 {
				t.Fatalf("%d rows written, want 0", n)
			}
		})
	}
	big := inboxrt.NewClient(inboxrt.ClientOptions{MaxPayloadBytes: 16})
	var tooLarge *workqtype.PayloadTooLargeError
	if _, err := big.Receive(e.ctx, e.pool, inbox.Message{Source: "s", MessageID: "m", Payload: map[string]string{"k": "a long value"}}); !errors.As(err, &tooLarge) {
		t.Fatalf("payload over the limit: %v, want *PayloadTooLargeError", err)
	}
	if n := e.count("true"); n != 0 {
		t.Fatalf("%d rows written, want 0", n)
	}
}

// A real worker routes by topic; a message without a topic, or with a topic
// without a handler, goes to the default handler.
func TestProcessorRoutesByTopic(t *testing.T) {
	e := newEnv(t, 8)
	seen := make(chan string, 10)
	p := inboxrt.NewProcessor()
	if err := p.Handle("order.created", func(ctx context.Context, j *worker.Job) error {
		var v struct{ Order string }
		if err := j.Decode(&v); err != nil {
			return err
		}
		seen <- "order.created:" + v.Order + ":" + j.MessageID + ":" + j.Kind
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := p.Handle("", nil); err == nil {
		t.Fatal("Handle of the empty topic: no error")
	}
	p.HandleDefault(func(ctx context.Context, j *worker.Job) error {
		seen <- "default:" + j.Topic + ":" + j.MessageID
		return nil
	})
	startWorker(t, e, p, "routes")
	for _, m := range []inbox.Message{
		{Source: "shop", MessageID: "1", Topic: "order.created", Payload: map[string]string{"order": "o-1"}, Queue: "routes"},
		{Source: "shop", MessageID: "2", Queue: "routes"},
		{Source: "shop", MessageID: "3", Topic: "order.cancelled", Queue: "routes"},
	} {
		e.receive(m)
	}
	var got []string
	for range 3 {
		got = append(got, <-seen)
	}
	slices.Sort(got)
	want := []string{"default::2", "default:order.cancelled:3", "order.created:o-1:1:shop"}
	if !slices.Equal(got, want) {
		t.Fatalf("handled %v, want %v", got, want)
	}
}

// A message whose handler keeps failing is dead after its max attempts;
// Revive puts it back with its attempts reset and an audit row, and it is
// then processed.
func TestDeadThenRevive(t *testing.T) {
	e := newEnv(t, 8)
	var fail atomic.Bool
	fail.Store(true)
	var calls atomic.Int32
	p := inboxrt.NewProcessor()
	p.HandleDefault(func(ctx context.Context, j *worker.Job) error {
		calls.Add(1)
		if fail.Load() {
			return fmt.Errorf("downstream unavailable (attempt %d)", j.Attempt)
		}
		return nil
	})
	r := e.receive(inbox.Message{Source: "s", MessageID: "dead", Queue: "dead", MaxAttempts: 3})
	startWorker(t, e, p, "dead")
	e.waitStatus(r.ID, lease.StatusFailed)
	dead, err := admin.Get(e.ctx, e.pool, lease.Inbox, r.ID)
	if err != nil || dead.Attempts != 3 || dead.LastError != "downstream unavailable (attempt 3)" || calls.Load() != 3 {
		t.Fatalf("dead message %+v (%v), %d calls; want 3 attempts and the last error", dead, err, calls.Load())
	}
	if got := e.receive(inbox.Message{Source: "s", MessageID: "dead", Queue: "dead"}); !got.Duplicate || got.Processed || got.Status != "dead" {
		t.Fatalf("repeat of a dead message: %+v, want a duplicate, not processed, failed", got)
	}
	if _, err := admin.Retry(e.ctx, e.pool, lease.Inbox, admin.Actor{Reason: "no actor"}, r.ID); err == nil {
		t.Fatal("revive without an actor: no error")
	}
	fail.Store(false)
	ids, err := admin.Retry(e.ctx, e.pool, lease.Inbox, admin.Actor{Name: "op:alice", Reason: "downstream is back"}, r.ID)
	if err != nil || !slices.Equal(ids.Applied, []int64{r.ID}) {
		t.Fatalf("revive: %v, %v", ids, err)
	}
	e.waitStatus(r.ID, lease.StatusDone)
	done, err := admin.Get(e.ctx, e.pool, lease.Inbox, r.ID)
	if err != nil || done.Attempts != 1 {
		t.Fatalf("revived message %+v (%v), want processed on its first attempt after revive", done, err)
	}
	runs, err := admin.Attempts(e.ctx, e.pool, lease.Inbox, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	var outcomes []string
	for _, run := range runs {
		outcomes = append(outcomes, run.Outcome)
	}
	if want := []string{"retry", "retry", "failed", "revived", "done"}; !slices.Equal(outcomes, want) {
		t.Fatalf("run archive %v, want %v", outcomes, want)
	}
	if a := runs[3]; a.Worker != "op:alice" || a.Error != "downstream is back" {
		t.Fatalf("audit row %+v, want by op:alice with the reason", a)
	}
	// Reviving a processed message does nothing.
	if ids, err := admin.Retry(e.ctx, e.pool, lease.Inbox, admin.Actor{Name: "op:alice", Reason: "again"}, r.ID); err != nil || len(ids.Applied) != 0 {
		t.Fatalf("revive of a processed message: %v, %v; want nothing", ids, err)
	}
}

func TestDeleteProcessed(t *testing.T) {
	e := newEnv(t, 4)
	msg := func(id string) inbox.Message { return inbox.Message{Source: "s", MessageID: id, Queue: "window"} }
	var batch []inbox.Message
	for i := range 2500 {
		batch = append(batch, msg(fmt.Sprintf("old-%04d", i)))
	}
	batch = append(batch, msg("recent"), msg("dead"), msg("ready"))
	if _, err := e.client.ReceiveMany(e.ctx, e.pool, batch); err != nil {
		t.Fatal(err)
	}
	// Age the rows on the database clock rather than waiting.
	for _, sql := range []string{
		"update workq.inbox set status = 2, finished_at = now() - interval '2 hours' where message_id like 'old-%'",
		"update workq.inbox set status = 2, finished_at = now() - interval '1 minute' where message_id = 'recent'",
		"update workq.inbox set status = 3, finished_at = now() - interval '2 hours' where message_id = 'dead'",
	} {
		if _, err := e.pool.Exec(e.ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	for _, bad := range []struct {
		older time.Duration
		max   int64
	}{{0, 10}, {-time.Hour, 10}, {time.Hour, 0}} {
		if _, err := inboxrt.DeleteProcessed(e.ctx, e.pool, bad.older, bad.max); !errors.Is(err, workqtype.ErrInvalid) {
			t.Fatalf("DeleteProcessed(%s, %d): %v, want ErrInvalid", bad.older, bad.max, err)
		}
	}
	if n := e.count("true"); n != 2503 {
		t.Fatalf("%d rows after invalid calls, want 2503", n)
	}
	// max bounds the total over several batches.
	n, err := inboxrt.DeleteProcessed(e.ctx, e.pool, time.Hour, 2100)
	if err != nil || n != 2100 {
		t.Fatalf("deleted %d, %v; want 2100", n, err)
	}
	n, err = inboxrt.DeleteProcessed(e.ctx, e.pool, time.Hour, 10000)
	if err != nil || n != 400 {
		t.Fatalf("deleted %d, %v; want the remaining 400", n, err)
	}
	for _, id := range []string{"recent", "dead", "ready"} {
		if c := e.count("message_id = $1", id); c != 1 {
			t.Errorf("%s: %d rows, want it kept", id, c)
		}
	}
	if c := e.count("message_id like 'old-%'"); c != 0 {
		t.Fatalf("%d old processed rows left", c)
	}
	// After the window a repeat is a new message; within it, a duplicate.
	if r := e.receive(msg("old-0001")); !r.New() {
		t.Fatalf("repeat after the window: %+v, want new", r)
	}
	if r := e.receive(msg("recent")); !r.Duplicate || !r.Processed {
		t.Fatalf("repeat within the window: %+v, want a processed duplicate", r)
	}
}

// A receive that meets a key being inserted by an open transaction waits
// for it; when that transaction commits, the stored row is newer than the
// waiting statement's snapshot, and the client looks it up again. When it
// rolls back, the waiting receive inserts the message.
func TestReceiveWaitsForAnOpenInsert(t *testing.T) {
	e := newEnv(t, 8)
	cases := []struct {
		name    string
		payload int
		commit  bool
		check   func(inbox.Received, error, int64) string
	}{
		{"commit, same payload", 1, true, func(r inbox.Received, err error, id int64) string {
			if err != nil || !r.Duplicate || r.ID != id {
				return fmt.Sprintf("%+v, %v; want a duplicate of %d", r, err, id)
			}
			return ""
		}},
		{"commit, other payload", 2, true, func(r inbox.Received, err error, id int64) string {
			if !errors.Is(err, inbox.ErrConflict) || !r.Conflict || r.ID != id {
				return fmt.Sprintf("%+v, %v; want a conflict with %d", r, err, id)
			}
			return ""
		}},
		{"rollback", 2, false, func(r inbox.Received, err error, id int64) string {
			if err != nil || !r.New() || r.ID == id {
				return fmt.Sprintf("%+v, %v; want a new message", r, err)
			}
			return ""
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			key := inbox.Message{Source: "open", MessageID: c.name, Payload: map[string]int{"v": 1}}
			tx, err := e.pool.Begin(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(e.ctx)
			first, err := e.client.Receive(e.ctx, tx, key)
			if err != nil {
				t.Fatal(err)
			}
			m := key
			m.Payload = map[string]int{"v": c.payload}
			type res struct {
				r   inbox.Received
				err error
			}
			done := make(chan res, 1)
			go func() {
				r, err := e.client.Receive(e.ctx, e.pool, m)
				done <- res{r, err}
			}()
			// Poll until the second receive waits on the open transaction.
			for {
				var waiting bool
				if err := e.pool.QueryRow(e.ctx, `select exists (select 1 from pg_stat_activity
					where datname = current_database() and wait_event_type = 'Lock' and query like '%InboxReceive%')`).Scan(&waiting); err != nil {
					t.Fatal(err)
				}
				if waiting {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			if c.commit {
				err = tx.Commit(e.ctx)
			} else {
				err = tx.Rollback(e.ctx)
			}
			if err != nil {
				t.Fatal(err)
			}
			got := <-done
			if msg := c.check(got.r, got.err, first.ID); msg != "" {
				t.Fatal(msg)
			}
			if n := e.count("source = 'open' and message_id = $1", c.name); n != 1 {
				t.Fatalf("%d rows, want 1", n)
			}
		})
	}
}
