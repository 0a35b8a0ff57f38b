package workq_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
)

// An embedded Client with the default configuration runs every built-in
// maintenance task: none is left to a process the user must remember.
func TestClientDefaultRunsEveryMaintenanceTask(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	client, err := workq.NewClient(pool, workq.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := client.Stop(ctx); err != nil {
			t.Error(err)
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var ran []string
		for _, s := range workq.MaintenanceOf(client).Stats() {
			if s.Rounds > 0 && s.Errors == 0 {
				ran = append(ran, s.Name)
			}
		}
		missing := slices.DeleteFunc(slices.Clone(workq.MaintenanceTasks), func(n string) bool { return slices.Contains(ran, n) })
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s these maintenance tasks have not run without error: %v (stats %+v)", missing, workq.MaintenanceOf(client).Stats())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A job enqueued in a transaction that rolls back never runs; one in a
// committed transaction runs with its args decoded.
func TestClientTypedJobInTransaction(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	got := make(chan EmailArgs, 4)
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(_ context.Context, job *workq.Job[EmailArgs]) error {
		if job.Kind != "email.send" || job.Attempt != 1 || job.ID == 0 {
			t.Errorf("job view: %+v", job)
		}
		got <- job.Args
		return nil
	}))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers, Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	for _, commit := range []bool{false, true} {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.EnqueueTx(ctx, tx, EmailArgs{To: map[bool]string{false: "rolled@back", true: "ada@example.com"}[commit]}, nil); err != nil {
			t.Fatal(err)
		}
		if commit {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-got:
		if a.To != "ada@example.com" {
			t.Fatalf("ran %+v", a)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the committed job did not run")
	}
	if err := client.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Fatalf("the rolled-back job ran: %+v", <-got)
	}
	if err := client.Stop(ctx); !errors.Is(err, workq.ErrNotRunning) {
		t.Fatalf("second Stop: %v, want ErrNotRunning", err)
	}
}

type slowArgs struct{}

func (slowArgs) Kind() string { return "slow" }

type slowWorker struct{ timedOut atomic.Bool }

func (w *slowWorker) Work(ctx context.Context, _ *workq.Job[slowArgs]) error {
	<-ctx.Done()
	w.timedOut.Store(errors.Is(ctx.Err(), context.DeadlineExceeded))
	return workq.Permanent(ctx.Err())
}

func (*slowWorker) Timeout(*workq.Job[slowArgs]) time.Duration { return 100 * time.Millisecond }

// A worker's Timeout bounds its kind's attempts, whatever the Client's
// default.
func TestClientPerKindTimeout(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	w := &slowWorker{}
	workers := workq.NewWorkers()
	workq.AddWorker[slowArgs](workers, w)
	client, err := workq.NewClient(pool, workq.Config{Workers: workers, Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	done, _ := client.Subscribe(outcomeKinds...)
	if _, err := client.Enqueue(ctx, slowArgs{}, nil); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer client.Stop(ctx)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the attempt did not end")
	}
	if !w.timedOut.Load() {
		t.Fatal("the handler's context did not end by its deadline")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the attempt took %s; its timeout is 100ms", took)
	}
}

// Bad configuration and bad args are refused with ErrInvalid and nothing
// is written.
func TestClientRefusesBadInput(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	if _, err := workq.NewClient(pool, workq.Config{MaxWorkers: -1}); !errors.Is(err, workq.ErrInvalid) {
		t.Fatalf("Concurrency -1: %v, want ErrInvalid", err)
	}
	var ve *workq.ValidationError
	if _, err := workq.NewClient(pool, workq.Config{Maintenance: workq.MaintenanceConfig{InboxWindow: time.Second}}); !errors.As(err, &ve) || ve.Field != "InboxWindow" {
		t.Fatalf("InboxWindow 1s: %v, want a ValidationError on InboxWindow", err)
	}
	client, err := workq.NewClient(pool, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args workq.Args
		opts *workq.EnqueueOpts
	}{
		{"nil args", nil, nil},
		{"bad kind", workq.RawArgs{KindName: "no spaces"}, nil},
		{"array payload", workq.RawArgs{KindName: "k", Payload: []byte(`[1]`)}, nil},
		{"bad queue", EmailArgs{}, &workq.EnqueueOpts{Queue: "a b"}},
		{"run at and delay", EmailArgs{}, &workq.EnqueueOpts{RunAt: time.Now(), Delay: time.Second}},
	} {
		if _, err := client.Enqueue(ctx, c.args, c.opts); !errors.Is(err, workq.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", c.name, err)
		}
		if err := client.ValidateArgs(c.args, c.opts); !errors.Is(err, workq.ErrInvalid) {
			t.Errorf("%s: ValidateArgs %v, want ErrInvalid", c.name, err)
		}
	}
	var n int
	if err := pool.QueryRow(ctx, `select count(*) from workq.job_runs_all`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("job_runs has %d rows (err %v) after refused enqueues", n, err)
	}
}
