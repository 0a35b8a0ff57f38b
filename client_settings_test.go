package workq_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/inbox"
	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/timers"
)

type retryArgs struct{ N int }

func (retryArgs) Kind() string { return "retry.chosen" }

// retryWorker always fails; its NextRetry asks for a retry in an hour.
type retryWorker struct{}

func (retryWorker) Work(context.Context, *workq.Job[retryArgs]) error { return errors.New("boom") }
func (retryWorker) NextRetry(*workq.Job[retryArgs]) time.Time         { return time.Now().Add(time.Hour) }

type plainFailArgs struct{}

func (plainFailArgs) Kind() string { return "retry.policy" }

// untilRunAt is how far in the future item's run_at is, on the database
// clock.
func untilRunAt(t *testing.T, pool *pgxpool.Pool, it admin.Item) time.Duration {
	t.Helper()
	var now time.Time
	if err := pool.QueryRow(context.Background(), `select now()`).Scan(&now); err != nil {
		t.Fatal(err)
	}
	return it.RunAt.Sub(now)
}

// A Worker's NextRetry sets when its failed job runs again (winning over
// Config.RetryPolicy, which sets it for the other kinds); the attempt is
// counted, and the last attempt still fails.
func TestClientNextRetryAndRetryPolicy(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	workers := workq.NewWorkers()
	workq.AddWorker[retryArgs](workers, retryWorker{})
	workq.AddWorker(workers, workq.WorkFunc(func(context.Context, *workq.Job[plainFailArgs]) error { return errors.New("bang") }))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers, Maintenance: workq.MaintenanceConfig{Disabled: true},
		RetryPolicy: func(attempt int, err error) time.Duration {
			if attempt != 1 || err.Error() != "bang" && err.Error() != "boom" {
				t.Errorf("RetryPolicy(%d, %v)", attempt, err)
			}
			return 2 * time.Hour
		}})
	if err != nil {
		t.Fatal(err)
	}
	results, _ := client.Subscribe(outcomeKinds...)
	chosen, err := client.Enqueue(ctx, retryArgs{}, &workq.EnqueueOpts{MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	last, err := client.Enqueue(ctx, retryArgs{N: 1}, &workq.EnqueueOpts{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	policy, err := client.Enqueue(ctx, plainFailArgs{}, &workq.EnqueueOpts{MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer client.Stop(ctx)
	for range 3 {
		select {
		case <-results:
		case <-time.After(10 * time.Second):
			t.Fatal("the attempts did not end")
		}
	}
	for _, c := range []struct {
		name   string
		id     int64
		status string
		delay  time.Duration // 0: not checked
		err    string
	}{
		{"NextRetry", chosen.ID, "ready", time.Hour, "boom"},
		{"last attempt", last.ID, "failed", 0, "boom"},
		{"RetryPolicy", policy.ID, "ready", 2 * time.Hour, "bang"},
	} {
		it, err := admin.Get(ctx, pool, lease.JobRuns, c.id)
		if err != nil {
			t.Fatal(err)
		}
		if it.Status != c.status || it.Attempts != 1 || it.LastError != c.err {
			t.Errorf("%s: status %s attempts %d last error %q, want %s, 1, %q", c.name, it.Status, it.Attempts, it.LastError, c.status, c.err)
		}
		// The delay is added on the database clock when the completion
		// flushes, a moment after the handler chose it.
		if got := untilRunAt(t, pool, it); c.delay > 0 && (got > c.delay || got < c.delay-5*time.Second) {
			t.Errorf("%s: runs again in %s, want about %s", c.name, got, c.delay)
		}
	}
}

type defaultsArgs struct{}

func (defaultsArgs) Kind() string { return "with.defaults" }
func (defaultsArgs) EnqueueOpts() workq.EnqueueOpts {
	return workq.EnqueueOpts{Queue: "kindq", Priority: 5, MaxAttempts: 7}
}

// An ArgsWithOpts kind's queue, priority and max attempts apply to its
// jobs; options given to Enqueue override them field by field.
func TestClientPerKindEnqueueDefaults(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	client, err := workq.NewClient(pool, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		opts     *workq.EnqueueOpts
		queue    string
		priority int16
		max      int32
	}{
		{nil, "kindq", 5, 7},
		{&workq.EnqueueOpts{Priority: 9}, "kindq", 9, 7},
		{&workq.EnqueueOpts{Queue: "other", MaxAttempts: 2}, "other", 5, 2},
	} {
		e, err := client.Enqueue(ctx, defaultsArgs{}, c.opts)
		if err != nil {
			t.Fatal(err)
		}
		it, err := admin.Get(ctx, pool, lease.JobRuns, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if it.Queue != c.queue || it.Priority != c.priority || it.MaxAttempts != c.max {
			t.Errorf("opts %+v: queue %s priority %d max attempts %d, want %s %d %d", c.opts, it.Queue, it.Priority, it.MaxAttempts,
				c.queue, c.priority, c.max)
		}
	}
}

// Config.Queues is River's way to name the job queues worked and their
// limits; it refuses what it cannot mean.
func TestClientQueuesConfig(t *testing.T) {
	pool := testdb.Pool(t)
	for _, c := range []struct {
		name string
		cfg  workq.Config
	}{
		{"negative max workers", workq.Config{Queues: map[string]workq.QueueConfig{"a": {MaxWorkers: -1}}}},
		{"bad queue name", workq.Config{Queues: map[string]workq.QueueConfig{"a b": {}}}},
	} {
		if _, err := workq.NewClient(pool, c.cfg); !errors.Is(err, workq.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", c.name, err)
		}
	}
	if _, err := workq.NewClient(pool, workq.Config{Queues: map[string]workq.QueueConfig{"a": {MaxWorkers: 1}, "b": {}}}); err != nil {
		t.Fatal(err)
	}
}

// recorder keeps what middleware saw, in order, by item.
type recorder struct {
	mu  sync.Mutex
	log map[string][]string
}

func (r *recorder) add(key, line string) {
	r.mu.Lock()
	if r.log == nil {
		r.log = map[string][]string{}
	}
	r.log[key] = append(r.log[key], line)
	r.mu.Unlock()
}

func (r *recorder) get(key string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.log[key])
}

func itemKey(table string, id int64) string { return fmt.Sprintf("%s/%d", table, id) }

// Work middleware runs around the handlers of all four kinds of work, the
// first outermost, and can turn their errors; enqueue middleware runs
// around single and batch enqueues, can change the jobs, and a refusal
// writes nothing.
func TestClientMiddleware(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	rec := &recorder{}
	type ctxKey struct{}
	seen := make(chan workq.WorkInfo, 8)
	work := func(name string) workq.WorkMiddleware {
		return func(ctx context.Context, info workq.WorkInfo, next func(context.Context) error) error {
			key := itemKey(info.Table, info.ID)
			rec.add(key, name+">")
			err := next(context.WithValue(ctx, ctxKey{}, name))
			rec.add(key, "<"+name)
			if name == "outer" {
				seen <- info
			}
			if errors.Is(err, errTurn) {
				return workq.Permanent(err) // turn a retry into a failure
			}
			return err
		}
	}
	handled := func(ctx context.Context, table string, id int64) error {
		if ctx.Value(ctxKey{}) != "inner" {
			t.Errorf("%s: the handler did not get the innermost middleware's context", table)
		}
		rec.add(itemKey(table, id), "handler")
		return nil
	}
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[EmailArgs]) error {
		if job.Args.To == "turn" {
			return errTurn
		}
		return handled(ctx, "job_runs", job.ID)
	}))
	msg := func(table string) func(context.Context, *workq.Message[OrderPaid]) error {
		return func(ctx context.Context, m *workq.Message[OrderPaid]) error { return handled(ctx, table, m.ID) }
	}
	must(workq.HandleOutbox(workers, "mw.out", msg("outbox")))
	must(workq.HandleInbox(workers, "mw.in", msg("inbox")))
	must(workq.HandleTimer(workers, "mw.timer", msg("timers")))

	enq := func(name string) workq.EnqueueMiddleware {
		return func(ctx context.Context, jobs []*workq.EnqueueParams, next func(context.Context) ([]workq.Enqueued, error)) ([]workq.Enqueued, error) {
			rec.add("enqueue", fmt.Sprintf("%s> %d", name, len(jobs)))
			for _, j := range jobs {
				if j.Args.Kind() == "refused" {
					return nil, errors.New("refused by middleware")
				}
				if j.Opts.Priority == 0 {
					j.Opts.Priority = 3 // a middleware sets what the caller did not
				}
			}
			rs, err := next(ctx)
			rec.add("enqueue", fmt.Sprintf("<%s %d", name, len(rs)))
			return rs, err
		}
	}
	client, err := workq.NewClient(pool, workq.Config{Workers: workers, Maintenance: workq.MaintenanceConfig{Disabled: true},
		WorkMiddleware:    []workq.WorkMiddleware{work("outer"), work("inner")},
		EnqueueMiddleware: []workq.EnqueueMiddleware{enq("outer"), enq("inner")}})
	must(err)
	results, _ := client.Subscribe(workq.EventFailed)

	e, err := client.Enqueue(ctx, EmailArgs{To: "mw@example.com"}, nil)
	must(err)
	it, err := admin.Get(ctx, pool, lease.JobRuns, e.ID)
	must(err)
	if it.Priority != 3 {
		t.Errorf("priority %d: the enqueue middleware's change was not applied", it.Priority)
	}
	if got, want := rec.get("enqueue"), []string{"outer> 1", "inner> 1", "<inner 1", "<outer 1"}; !slices.Equal(got, want) {
		t.Errorf("enqueue middleware ran %q, want %q", got, want)
	}
	if _, err := client.Enqueue(ctx, workq.RawArgs{KindName: "refused"}, nil); err == nil {
		t.Error("the refused enqueue succeeded")
	}
	if _, err := client.EnqueueMany(ctx, []workq.EnqueueParams{{Args: EmailArgs{}}, {Args: workq.RawArgs{KindName: "refused"}}}); err == nil {
		t.Error("the refused batch succeeded")
	}
	if _, err := client.EnqueueManyFast(ctx, []workq.EnqueueParams{{Args: workq.RawArgs{KindName: "refused"}}}); err == nil {
		t.Error("the refused fast batch succeeded")
	}
	var n int
	must(pool.QueryRow(ctx, `select count(*) from workq.job_runs_all`).Scan(&n))
	if n != 1 {
		t.Fatalf("job_runs has %d rows after refused enqueues, want 1", n)
	}
	turned, err := client.EnqueueMany(ctx, []workq.EnqueueParams{{Args: EmailArgs{To: "turn"}}})
	must(err)

	must(client.Start(ctx))
	defer client.Stop(ctx)
	sent, err := client.Send(ctx, outbox.Message{Topic: "mw.out", PartitionKey: "k", Payload: OrderPaid{1}})
	must(err)
	received, err := client.Receive(ctx, inbox.Message{Source: "psp", MessageID: "m1", Topic: "mw.in", Payload: OrderPaid{2}})
	must(err)
	timer, err := client.ScheduleTimer(ctx, timers.Timer{Topic: "mw.timer", DueTime: time.Now(), Payload: OrderPaid{3}})
	must(err)
	infos := map[string]workq.WorkInfo{}
	for range 5 {
		select {
		case info := <-seen:
			infos[itemKey(info.Table, info.ID)] = info
		case <-time.After(10 * time.Second):
			t.Fatalf("not every handler ran: %v", rec.log)
		}
	}
	select {
	case r := <-results:
		if !strings.Contains(r.Error, errTurn.Error()) || r.Work.Table != "job_runs" || r.Work.ID != turned[0].ID {
			t.Errorf("%s %d failed with %q", r.Work.Table, r.Work.ID, r.Error)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the middleware did not turn the retry into a failure")
	}
	full := []string{"outer>", "inner>", "handler", "<inner", "<outer"}
	for _, c := range []struct {
		table, kind, topic, source string
		id                         int64
		want                       []string
	}{
		{"job_runs", "email.send", "", "", e.ID, full},
		{"job_runs", "email.send", "", "", turned[0].ID, []string{"outer>", "inner>", "<inner", "<outer"}},
		{"outbox", "", "mw.out", "", sent.ID, full},
		{"inbox", "", "mw.in", "psp", received.ID, full},
		{"timers", "", "mw.timer", "", timer.ID, full},
	} {
		key := itemKey(c.table, c.id)
		if got := rec.get(key); !slices.Equal(got, c.want) {
			t.Errorf("%s: ran %q, want %q", key, got, c.want)
		}
		info := infos[key]
		if info.Kind != c.kind || info.Topic != c.topic || info.Source != c.source || info.Attempt != 1 || info.Queue != "default" {
			t.Errorf("%s: work info %+v", key, info)
		}
	}
}

var errTurn = errors.New("turn me permanent")
