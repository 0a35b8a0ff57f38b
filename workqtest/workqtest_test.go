package workqtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/migrate"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/timers"
	"github.com/workq/workq/workqtest"
)

type resultArgs struct {
	Err string `json:"err"`
}

func (resultArgs) Kind() string { return "result" }

// TestWorkOutcomes: each handler result is reported as the runtime records
// it, in the test's transaction.
func TestWorkOutcomes(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	client, err := workq.NewClient(pool, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name        string
		result      error
		maxAttempts int
		outcome     workqtest.Outcome
		status      workq.JobState
		snooze      time.Duration
	}{
		{"nil is done", nil, 0, workqtest.Done, workq.JobStateDone, 0},
		{"an error retries", errors.New("flaky"), 3, workqtest.Retry, workq.JobStateReady, 0},
		{"an error on the last attempt fails", errors.New("flaky"), 1, workqtest.Failed, workq.JobStateFailed, 0},
		{"permanent fails", workq.Permanent(errors.New("bad input")), 3, workqtest.Failed, workq.JobStateFailed, 0},
		{"snooze keeps its duration", workq.Snooze(90 * time.Second), 3, workqtest.Snoozed, workq.JobStateReady, 90 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			w := workq.WorkFunc(func(context.Context, *workq.Job[resultArgs]) error { return c.result })
			res := workqtest.Work(ctx, t, client, tx, w, resultArgs{}, &workq.EnqueueOpts{MaxAttempts: c.maxAttempts})
			if res.Outcome != c.outcome || res.Status != c.status || res.Snooze != c.snooze || !errors.Is(res.Err, c.result) {
				t.Fatalf("outcome %s, status %s, snooze %s, err %v; want %s, %s, %s, %v",
					res.Outcome, res.Status, res.Snooze, res.Err, c.outcome, c.status, c.snooze, c.result)
			}
			if res.Job.Attempt != 1 || res.Job.ID == 0 {
				t.Fatalf("job view %+v", res.Job)
			}
		})
	}
}

// fatalTB records the first Fatalf and stops the calling goroutine's
// function by panicking, as testing.T stops a test.
type fatalTB struct {
	testing.TB
	msg string
}

type stopped struct{}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, a ...any) {
	f.msg = fmt.Sprintf(format, a...)
	panic(stopped{})
}

func failure(f func(tb testing.TB)) (msg string) {
	tb := &fatalTB{}
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(stopped); !ok {
				panic(r)
			}
			msg = tb.msg
		}
	}()
	f(tb)
	return ""
}

// A failed assertion names what is there instead.
func TestRequireFailuresAreReadable(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	client, err := workq.NewClient(pool, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	msg := failure(func(tb testing.TB) { workqtest.RequireEnqueued[resultArgs](ctx, tb, client, pool, nil) })
	if !strings.Contains(msg, `no job "result": none at all was written`) {
		t.Fatalf("empty database: %q", msg)
	}
	if _, err := client.Enqueue(ctx, workq.RawArgs{KindName: "other"}, nil); err != nil {
		t.Fatal(err)
	}
	msg = failure(func(tb testing.TB) { workqtest.RequireEnqueued[resultArgs](ctx, tb, client, pool, nil) })
	if !strings.Contains(msg, `there are: "other"`) {
		t.Fatalf("another kind: %q", msg)
	}
	if _, err := client.Enqueue(ctx, resultArgs{}, &workq.EnqueueOpts{Queue: "q1"}); err != nil {
		t.Fatal(err)
	}
	msg = failure(func(tb testing.TB) {
		workqtest.RequireEnqueued[resultArgs](ctx, tb, client, pool, &workqtest.Opts{Queue: "q2"})
	})
	if !strings.Contains(msg, `queue "q1", want "q2"`) {
		t.Fatalf("another queue: %q", msg)
	}
	if msg := failure(func(tb testing.TB) {
		workqtest.RequireEnqueued[resultArgs](ctx, tb, client, pool, &workqtest.Opts{Queue: "q1"})
	}); msg != "" {
		t.Fatalf("a match failed: %q", msg)
	}
	msg = failure(func(tb testing.TB) { workqtest.RequireNotEnqueued[resultArgs](ctx, tb, client, pool, nil) })
	if !strings.Contains(msg, `of kind "result" was enqueued; want none`) {
		t.Fatalf("RequireNotEnqueued: %q", msg)
	}
}

// Work and the Require functions use the Client's schema, and so does a
// handler's CompleteTx: given the plain transaction, a Require function
// neither fails for want of workq.job_runs nor reads the default schema,
// which here also exists and holds a job of the same kind.
func TestWorkOnAnotherSchema(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	m, err := migrate.New(pool, migrate.Options{Schema: "wqt_two"})
	if err == nil {
		_, err = m.Up(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	client, err := workq.NewClient(pool, workq.Config{Schema: "wqt_two", Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	other, err := workq.NewClient(pool, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := other.EnqueueTx(ctx, tx, resultArgs{Err: "default schema"}, &workq.EnqueueOpts{Queue: "elsewhere"}); err != nil {
		t.Fatal(err)
	}
	w := workq.WorkFunc(func(ctx context.Context, job *workq.Job[resultArgs]) error {
		if _, err := client.EnqueueTx(ctx, tx, resultArgs{Err: "follow-up"}, nil); err != nil {
			return err
		}
		return job.CompleteTx(ctx, tx)
	})
	res := workqtest.Work(ctx, t, client, tx, w, resultArgs{}, nil)
	if res.Err != nil || !res.CompletedInTx || res.Status != workq.JobStateDone {
		t.Fatalf("Work on wqt_two: err %v, completed in tx %v, status %s", res.Err, res.CompletedInTx, res.Status)
	}
	if j := workqtest.RequireEnqueued[resultArgs](ctx, t, client, tx, &workqtest.Opts{Status: workq.JobStateReady}); j.Args.Err != "follow-up" {
		t.Fatalf("enqueued %+v", j.Args)
	}
	// Already in the schema: wrapping again changes nothing.
	if j := workqtest.RequireEnqueued[resultArgs](ctx, t, client, client.InSchema(tx), &workqtest.Opts{Status: workq.JobStateReady}); j.Args.Err != "follow-up" {
		t.Fatalf("enqueued through InSchema %+v", j.Args)
	}
	workqtest.RequireNotEnqueued[resultArgs](ctx, t, client, tx, &workqtest.Opts{Queue: "elsewhere"})
	if j := workqtest.RequireEnqueued[resultArgs](ctx, t, other, tx, nil); j.Args.Err != "default schema" {
		t.Fatalf("the default schema's job %+v", j.Args)
	}
	var n int
	if err := tx.QueryRow(ctx, `select count(*) from workq.job_runs_all where queue <> 'elsewhere'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the default schema holds %d of wqt_two's jobs (%v), want none", n, err)
	}
}

// The handler run by Work, and the job RequireEnqueued returns, see the
// metadata the job was enqueued with.
func TestWorkAndRequireSeeMetadata(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	client, err := workq.NewClient(pool, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	opts := &workq.EnqueueOpts{Metadata: map[string]string{"tenant": "acme"}}
	var seen string
	w := workq.WorkFunc(func(_ context.Context, job *workq.Job[resultArgs]) error {
		seen = job.Metadata["tenant"]
		return nil
	})
	workqtest.Work(ctx, t, client, tx, w, resultArgs{}, opts)
	if seen != "acme" {
		t.Fatalf("the handler saw tenant %q", seen)
	}
	if _, err := client.EnqueueTx(ctx, tx, resultArgs{Err: "x"}, opts); err != nil {
		t.Fatal(err)
	}
	if job := workqtest.RequireEnqueued[resultArgs](ctx, t, client, tx, nil); job.Metadata["tenant"] != "acme" {
		t.Fatalf("RequireEnqueued metadata %v", job.Metadata)
	}
}

// Work and RequireEnqueued show the handler and the test the job's limit
// key, as a claim does.
func TestWorkAndRequireSeeLimitKey(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	client, err := workq.NewClient(pool, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	opts := &workq.EnqueueOpts{LimitKey: "tenant-a"}
	var seen string
	w := workq.WorkFunc(func(_ context.Context, job *workq.Job[resultArgs]) error {
		seen = job.LimitKey
		return nil
	})
	workqtest.Work(ctx, t, client, tx, w, resultArgs{}, opts)
	if seen != "tenant-a" {
		t.Fatalf("the handler saw limit key %q", seen)
	}
	if _, err := client.EnqueueTx(ctx, tx, resultArgs{Err: "x"}, opts); err != nil {
		t.Fatal(err)
	}
	if job := workqtest.RequireEnqueued[resultArgs](ctx, t, client, tx, nil); job.LimitKey != "tenant-a" {
		t.Fatalf("RequireEnqueued limit key %q", job.LimitKey)
	}
}

// retryWorker fails every attempt; its NextRetry and Timeout, when set,
// are the Worker's optional methods.
type retryWorker struct {
	next    time.Duration // NextRetry: now + next (0: none chosen)
	timeout time.Duration // Timeout (0: the Client's)
	wait    bool          // wait for the context to end, and return its error
}

func (w retryWorker) Work(ctx context.Context, _ *workq.Job[resultArgs]) error {
	if w.wait {
		<-ctx.Done()
		return ctx.Err()
	}
	return errors.New("flaky")
}
func (w retryWorker) NextRetry(*workq.Job[resultArgs]) time.Time {
	if w.next == 0 {
		return time.Time{}
	}
	return time.Now().Add(w.next)
}
func (w retryWorker) Timeout(*workq.Job[resultArgs]) time.Duration { return w.timeout }

// TestWorkRunsAsTheWorker: Work runs the handler as the Client's worker
// does: the Worker's NextRetry and Timeout, the Client's RetryPolicy, work
// middleware and execution timeout all apply.
func TestWorkRunsAsTheWorker(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	var seen []string
	type mwKey struct{}
	cfg := workq.Config{
		Maintenance: workq.MaintenanceConfig{Disabled: true},
		RetryPolicy: func(int, error) time.Duration { return time.Hour },
		WorkMiddleware: []workq.WorkMiddleware{func(ctx context.Context, info workq.WorkInfo, next func(context.Context) error) error {
			seen = append(seen, info.Kind)
			return next(context.WithValue(ctx, mwKey{}, "outer"))
		}},
		JobTimeout: 100 * time.Millisecond,
	}
	client, err := workq.NewClient(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// within reports whether got is d from now, give or take a second.
	within := func(got time.Time, d time.Duration) bool {
		return got.Sub(time.Now().Add(d)).Abs() < time.Second
	}
	cases := []struct {
		name  string
		w     retryWorker
		check func(res *workqtest.Result[resultArgs]) bool
	}{
		{"NextRetry is honoured", retryWorker{next: 2 * time.Second}, func(res *workqtest.Result[resultArgs]) bool {
			return res.Outcome == workqtest.Retry && within(res.RetryAt, 2*time.Second)
		}},
		{"the RetryPolicy times a retry NextRetry leaves", retryWorker{}, func(res *workqtest.Result[resultArgs]) bool {
			return res.Outcome == workqtest.Retry && within(res.RetryAt, time.Hour)
		}},
		{"the Worker's Timeout bounds the attempt", retryWorker{timeout: 10 * time.Millisecond, wait: true}, func(res *workqtest.Result[resultArgs]) bool {
			return errors.Is(res.Err, context.DeadlineExceeded) && res.Outcome == workqtest.Retry
		}},
		{"so does the worker's ExecTimeout", retryWorker{wait: true}, func(res *workqtest.Result[resultArgs]) bool {
			return errors.Is(res.Err, context.DeadlineExceeded) && res.Outcome == workqtest.Retry
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			seen = nil
			started := time.Now()
			res := workqtest.Work(ctx, t, client, tx, c.w, resultArgs{}, &workq.EnqueueOpts{MaxAttempts: 3})
			if !c.check(res) {
				t.Fatalf("outcome %s, err %v, retry at %s (in %s), status %s", res.Outcome, res.Err, res.RetryAt,
					time.Until(res.RetryAt).Round(time.Millisecond), res.Status)
			}
			if len(seen) != 1 || seen[0] != "result" {
				t.Fatalf("the work middleware saw %v", seen)
			}
			if took := time.Since(started); took > 5*time.Second {
				t.Fatalf("took %s", took)
			}
		})
	}
	t.Run("the middleware's context reaches the handler", func(t *testing.T) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		var got any
		w := workq.WorkFunc(func(ctx context.Context, _ *workq.Job[resultArgs]) error {
			got = ctx.Value(mwKey{})
			return nil
		})
		if res := workqtest.Work(ctx, t, client, tx, w, resultArgs{}, nil); res.Outcome != workqtest.Done || got != "outer" {
			t.Fatalf("outcome %s, the handler saw %v", res.Outcome, got)
		}
	})
}

// flakyWorker fails its first failures attempts and succeeds after; it
// records the attempt it saw.
type flakyWorker struct {
	failures int
	saw      *int
}

func (w flakyWorker) Work(_ context.Context, job *workq.Job[resultArgs]) error {
	*w.saw = job.Attempt
	if job.Attempt <= w.failures {
		return fmt.Errorf("flaky on attempt %d", job.Attempt)
	}
	return nil
}

// TestWorkWithAttempt: WithAttempt(n) runs the job's attempt n, so "fails
// twice, then succeeds" and "fails on its last attempt" are testable; an
// attempt outside 1..MaxAttempts fails the test, naming the limit.
func TestWorkWithAttempt(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	client, err := workq.NewClient(pool, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		opts    []workqtest.WorkOption
		max     int
		outcome workqtest.Outcome
		status  workq.JobState
		attempt int
	}{
		{"no option: attempt 1", nil, 3, workqtest.Retry, workq.JobStateReady, 1},
		{"attempt 2 still fails", []workqtest.WorkOption{workqtest.WithAttempt(2)}, 4, workqtest.Retry, workq.JobStateReady, 2},
		{"attempt 3 succeeds", []workqtest.WorkOption{workqtest.WithAttempt(3)}, 4, workqtest.Done, workq.JobStateDone, 3},
		{"the last option wins", []workqtest.WorkOption{workqtest.WithAttempt(1), workqtest.WithAttempt(3)}, 4, workqtest.Done, workq.JobStateDone, 3},
		{"an error on the last attempt fails the job", []workqtest.WorkOption{workqtest.WithAttempt(2)}, 2, workqtest.Failed, workq.JobStateFailed, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			var saw int
			res := workqtest.Work(ctx, t, client, tx, flakyWorker{failures: 2, saw: &saw}, resultArgs{}, &workq.EnqueueOpts{MaxAttempts: c.max}, c.opts...)
			if res.Outcome != c.outcome || res.Status != c.status || saw != c.attempt || res.Job.Attempt != c.attempt {
				t.Fatalf("outcome %s, status %s, the handler saw attempt %d (Job.Attempt %d); want %s, %s, attempt %d",
					res.Outcome, res.Status, saw, res.Job.Attempt, c.outcome, c.status, c.attempt)
			}
			var attempts int
			if err := tx.QueryRow(ctx, `select attempts from workq.job_runs_all where id = $1`, res.Job.ID).Scan(&attempts); err != nil || attempts != c.attempt {
				t.Fatalf("job_runs.attempts %d (%v), want %d", attempts, err, c.attempt)
			}
		})
	}
	for _, c := range []struct {
		name string
		n    int
		want string
	}{
		{"past the max attempts", 4, "WithAttempt(4): job"},
		{"zero", 0, "WithAttempt(0): the attempt is 1 to"},
		{"negative", -1, "WithAttempt(-1): the attempt is 1 to"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			var saw int
			msg := failure(func(tb testing.TB) {
				workqtest.Work(ctx, tb, client, tx, flakyWorker{saw: &saw}, resultArgs{}, &workq.EnqueueOpts{MaxAttempts: 3}, workqtest.WithAttempt(c.n))
			})
			if !strings.Contains(msg, c.want) || saw != 0 {
				t.Fatalf("failure %q (the handler ran attempt %d); want one containing %q and no run", msg, saw, c.want)
			}
		})
	}
}

// TestRequireSentFields: the message RequireSent returns carries what was
// sent, as the handler would see it: the partition key, the message id,
// the correlation id and the headers, not only the topic and payload; a
// timer from RequireTimer its due time.
func TestRequireSentFields(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	client, err := workq.NewClient(pool, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	sent, err := client.SendTx(ctx, tx, outbox.Message{Topic: "orders.charged", PartitionKey: "order-7", CorrelationID: "req-1",
		Headers: map[string]string{"Content-Type": "application/json"}, Payload: map[string]int{"order": 7}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.SendTx(ctx, tx, outbox.Message{Topic: "orders.plain", Payload: map[string]int{"order": 8}}); err != nil {
		t.Fatal(err)
	}
	due := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	if _, err := client.ScheduleTimerTx(ctx, tx, timers.Timer{Topic: "order.expired", DueTime: due, Payload: map[string]int{"order": 7}}); err != nil {
		t.Fatal(err)
	}

	m := workqtest.RequireSent[map[string]int](ctx, t, client, tx, "orders.charged", nil)
	var headers map[string]string
	if err := json.Unmarshal(m.Headers, &headers); err != nil {
		t.Fatalf("headers %s: %v", m.Headers, err)
	}
	for _, c := range []struct{ field, got, want string }{
		{"ID", fmt.Sprint(m.ID), fmt.Sprint(sent.ID)},
		{"MessageID", m.MessageID, sent.MessageID.String()},
		{"PartitionKey", m.PartitionKey, "order-7"},
		{"CorrelationID", m.CorrelationID, "req-1"},
		{"Headers", headers["Content-Type"], "application/json"},
		{"Payload", fmt.Sprint(m.Payload["order"]), "7"},
	} {
		if c.got != c.want {
			t.Errorf("RequireSent: %s %q, want %q", c.field, c.got, c.want)
		}
	}
	if plain := workqtest.RequireSent[map[string]int](ctx, t, client, tx, "orders.plain", nil); plain.PartitionKey != "" || string(plain.Headers) != "{}" || plain.MessageID == "" {
		t.Errorf("a message without key or headers: key %q, headers %s, message id %q", plain.PartitionKey, plain.Headers, plain.MessageID)
	}
	if timer := workqtest.RequireTimer[map[string]int](ctx, t, client, tx, "order.expired", nil); !timer.DueTime.Equal(due) {
		t.Errorf("RequireTimer: DueTime %s, want %s", timer.DueTime, due)
	}
}
