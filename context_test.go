package workq_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq"
	"github.com/workq/workq/inbox"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/timers"
)

// sawClient records, per handler, the Client ClientFromContext returned
// in it.
type sawClient struct {
	mu  sync.Mutex
	got map[string]*workq.Client
	ran chan string
}

func newSawClient() *sawClient {
	return &sawClient{got: map[string]*workq.Client{}, ran: make(chan string, 16)}
}

func (s *sawClient) saw(ctx context.Context, who string) *workq.Client {
	c, err := workq.ClientFromContextSafely(ctx)
	if err != nil {
		c = nil
	}
	s.mu.Lock()
	s.got[who] = c
	s.mu.Unlock()
	s.ran <- who
	return c
}

// wait returns what each of the handlers named saw, once all of them ran
// (the test fails after 30s).
func (s *sawClient) wait(t *testing.T, who ...string) map[string]*workq.Client {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for range who {
		select {
		case <-s.ran:
		case <-deadline:
			s.mu.Lock()
			defer s.mu.Unlock()
			t.Fatalf("after 30s only %d handlers ran: %v", len(s.got), s.got)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range who {
		if _, ok := s.got[w]; !ok {
			t.Fatalf("handler %s did not run (ran: %v)", w, s.got)
		}
	}
	return s.got
}

// chainWorkers is a job worker of ChargeArgs (example_events_test.go) that
// enqueues its ReceiptArgs in its own transaction through
// ClientFromContext, beside CompleteTx, and handlers of the other kinds of
// work that record their Client.
func chainWorkers(t *testing.T, saw *sawClient) *workq.Workers {
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[ChargeArgs]) error {
		client := saw.saw(ctx, "job")
		if client == nil {
			return workq.Permanent(errors.New("no Client in the handler's context"))
		}
		shard, err := client.Shard(job.Shard) // the job's database: itself for NewClient
		if err != nil {
			return err
		}
		return pgx.BeginFunc(ctx, shard.Pool(), func(tx pgx.Tx) error {
			if _, err := shard.EnqueueTx(ctx, tx, ReceiptArgs{Order: job.Args.Order}, nil); err != nil {
				return err
			}
			return job.CompleteTx(ctx, tx)
		})
	}))
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[ReceiptArgs]) error {
		saw.saw(ctx, "next")
		return nil
	}))
	for _, err := range []error{
		workq.HandleOutbox(workers, "ctx.out", func(ctx context.Context, _ *workq.Message[map[string]any]) error {
			saw.saw(ctx, "outbox")
			return nil
		}),
		workq.HandleInbox(workers, "ctx.in", func(ctx context.Context, _ *workq.Message[map[string]any]) error {
			saw.saw(ctx, "inbox")
			return nil
		}),
		workq.HandleTimer(workers, "ctx.timer", func(ctx context.Context, _ *workq.Message[map[string]any]) error {
			saw.saw(ctx, "timer")
			return nil
		}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return workers
}

// Every handler a Client runs (job workers, outbox, inbox and timer
// handlers, and their work middleware) finds that Client in its context,
// and can enqueue with it in its own transaction beside CompleteTx.
func TestClientFromContextInEveryHandler(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	saw := newSawClient()
	client, err := workq.NewClient(pool, workq.Config{Workers: chainWorkers(t, saw), Maintenance: workq.MaintenanceConfig{Disabled: true},
		WorkMiddleware: []workq.WorkMiddleware{func(ctx context.Context, info workq.WorkInfo, next func(context.Context) error) error {
			if info.Table == "job_runs" && info.Kind == "order.charge" {
				saw.saw(ctx, "middleware")
			}
			return next(ctx)
		}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Enqueue(ctx, ChargeArgs{Order: 1}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Send(ctx, outbox.Message{Topic: "ctx.out", PartitionKey: "k", Payload: map[string]int{}}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Receive(ctx, inbox.Message{Source: "s", MessageID: "1", Topic: "ctx.in", Payload: map[string]int{}}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.ScheduleTimer(ctx, timers.Timer{Topic: "ctx.timer", DueTime: time.Now(), Payload: map[string]int{}}); err != nil {
		t.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer client.Stop(ctx)
	for who, c := range saw.wait(t, "middleware", "job", "next", "outbox", "inbox", "timer") {
		if c != client {
			t.Errorf("%s: ClientFromContext returned %p, want the Client that runs it (%p)", who, c, client)
		}
	}
	var n int
	if err := pool.QueryRow(ctx, `select count(*) from workq.job_runs_all where kind = 'receipt.send'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d follow-up jobs (err %v), want 1", n, err)
	}
}

// On a sharded Client a handler finds the sharded Client (which routes
// what it enqueues), and opens its transaction on its job's shard.
func TestClientFromContextSharded(t *testing.T) {
	ctx := context.Background()
	saw := newSawClient()
	pools := []workq.Shard{{Name: "a", Pool: testdb.Pool(t)}, {Name: "b", Pool: testdb.Pool(t)}}
	client, err := workq.NewShardedClient(pools, workq.Config{Workers: chainWorkers(t, saw), Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := client.Shard("b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Enqueue(ctx, ChargeArgs{Order: 2}, nil); err != nil {
		t.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer client.Stop(ctx)
	for who, c := range saw.wait(t, "job", "next") {
		if c != client {
			t.Errorf("%s: ClientFromContext returned %p, want the sharded Client (%p)", who, c, client)
		}
	}
	var n int
	if err := pools[1].Pool.QueryRow(ctx, `select count(*) from workq.job_runs_all where kind = 'receipt.send'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("shard b has %d follow-up jobs (err %v), want 1: the handler's transaction is on its job's shard", n, err)
	}
}

// Outside a handler there is no Client: ClientFromContextSafely says so
// with ErrNoClient, and ClientFromContext panics.
func TestClientFromContextOutsideAHandler(t *testing.T) {
	for _, ctx := range []context.Context{context.Background(), nil} {
		if c, err := workq.ClientFromContextSafely(ctx); c != nil || !errors.Is(err, workq.ErrNoClient) {
			t.Errorf("ClientFromContextSafely: %v, %v; want nil, ErrNoClient", c, err)
		}
	}
	defer func() {
		if r := recover(); r == nil {
			t.Fatal("ClientFromContext outside a handler did not panic")
		}
	}()
	workq.ClientFromContext(context.Background())
}
