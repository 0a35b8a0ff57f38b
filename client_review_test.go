package workq_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/worker"
)

// Start refuses a schema that was never migrated, naming the command that
// fixes it, instead of failing at the first enqueue or claim.
func TestClientStartRefusesAnUnmigratedSchema(t *testing.T) {
	pool := testdb.Pool(t)
	client, err := workq.NewClient(pool, workq.Config{Schema: "never_migrated"})
	if err != nil {
		t.Fatal(err)
	}
	err = client.Start(context.Background())
	if !errors.Is(err, workq.ErrSchemaBehind) || !strings.Contains(err.Error(), "workq migrate up --schema never_migrated") {
		t.Fatalf("Start: %v, want ErrSchemaBehind naming `workq migrate up --schema never_migrated`", err)
	}
	if err := client.Stop(context.Background()); !errors.Is(err, workq.ErrNotRunning) {
		t.Fatalf("Stop after a refused Start: %v, want ErrNotRunning", err)
	}
}

// A registration after NewClient would never run: it is refused.
func TestWorkersRefuseLateRegistration(t *testing.T) {
	pool := testdb.Pool(t)
	workers := workq.NewWorkers()
	if _, err := workq.NewClient(pool, workq.Config{Workers: workers, Maintenance: workq.MaintenanceConfig{Disabled: true}}); err != nil {
		t.Fatal(err)
	}
	late := func(context.Context, *workq.Message[struct{}]) error { return nil }
	for name, err := range map[string]error{
		"worker": workq.AddWorkerSafely(workers, workq.WorkFunc(func(context.Context, *workq.Job[EmailArgs]) error { return nil })),
		"timer":  workq.HandleTimer(workers, "late", late),
		"inbox":  workq.HandleInbox(workers, "late", late),
		"outbox": workq.HandleOutbox(workers, "late", late),
	} {
		if err == nil || !strings.Contains(err.Error(), "before NewClient") {
			t.Errorf("%s registered after NewClient: %v, want a refusal", name, err)
		}
	}
}

type ctxKey struct{}

// The values of Start's context reach the handlers; its cancellation does
// not stop the Client.
func TestClientStartContextValuesReachHandlers(t *testing.T) {
	pool := testdb.Pool(t)
	seen := make(chan any, 1)
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, _ *workq.Job[EmailArgs]) error {
		seen <- ctx.Value(ctxKey{})
		return nil
	}))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers, Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	startCtx, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "from start"))
	if err := client.Start(startCtx); err != nil {
		t.Fatal(err)
	}
	cancel()
	defer client.Stop(context.Background())
	if _, err := client.Enqueue(context.Background(), EmailArgs{To: "a@example.com"}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case v := <-seen:
		if v != "from start" {
			t.Fatalf("the handler saw %v", v)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the job did not run after Start's context was cancelled")
	}
}

// A handler that completed its job in a committed transaction and then
// returned an error is reported done, not as a retry, and a second
// CompleteTx says the attempt already ended.
func TestCompleteTxThenAnErrorIsReportedDone(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	second := make(chan error, 1)
	_, results := startPayClient(t, pool, func(ctx context.Context, job *workq.Job[payArgs]) error {
		if err := markPaid(ctx, pool, job, true); err != nil {
			return err
		}
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		second <- job.CompleteTx(ctx, tx)
		return errors.New("a late error after the commit")
	})
	c, err := workq.NewClient(pool, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, payArgs{Order: 11}, nil); err != nil {
		t.Fatal(err)
	}
	if err := <-second; !errors.Is(err, worker.ErrCompletedInTx) {
		t.Fatalf("second CompleteTx: %v, want ErrCompletedInTx", err)
	}
	r := nextResult(t, results)
	if r.Kind != workq.EventCompleted || r.Error != "" {
		t.Fatalf("result %+v, want completed, no error", r)
	}
}

// PeriodicJob builds a schedule of typed jobs: kind, payload and options
// come from the args.
func TestPeriodicJob(t *testing.T) {
	sp, err := workq.PeriodicJob("digest", "@every 1m", EmailArgs{To: "ops@example.com"}, &workq.EnqueueOpts{Queue: "mail", Priority: 3})
	if err != nil {
		t.Fatal(err)
	}
	if sp.Name != "digest" || sp.Kind != "email.send" || sp.Queue != "mail" || sp.Priority != 3 {
		t.Fatalf("spec %+v", sp)
	}
	pool := testdb.Pool(t)
	client, err := workq.NewClient(pool, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := client.CreateSchedule(context.Background(), sp)
	if err != nil {
		t.Fatal(err)
	}
	if s.Kind != "email.send" || !strings.Contains(string(s.Payload), "ops@example.com") {
		t.Fatalf("schedule %+v", s)
	}
}
