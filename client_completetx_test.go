package workq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/workqtype"
)

type payArgs struct {
	Order int `json:"order"`
}

func (payArgs) Kind() string { return "order.pay" }

// startPayClient runs a Client whose one worker is pay, and returns a
// channel of the attempts' results.
func startPayClient(t *testing.T, pool *pgxpool.Pool, pay func(context.Context, *workq.Job[payArgs]) error) (*workq.Client, <-chan *workq.Event) {
	t.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `create table orders (id int primary key, paid_by_attempt int not null)`); err != nil {
		t.Fatal(err)
	}
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(pay))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers, Maintenance: workq.MaintenanceConfig{Disabled: true},
		BackoffBase: time.Millisecond, BackoffCap: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	results, _ := client.Subscribe(outcomeKinds...)
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Stop(context.Background()) })
	return client, results
}

func nextResult(t *testing.T, results <-chan *workq.Event) *workq.Event {
	t.Helper()
	select {
	case r, ok := <-results:
		if !ok {
			t.Fatal("the events channel closed")
		}
		return r
	case <-time.After(15 * time.Second):
		t.Fatal("no attempt ended within 15s")
		return nil
	}
}

// markPaid writes the business row and completes the job in one
// transaction; commit says whether it commits.
func markPaid(ctx context.Context, pool *pgxpool.Pool, job *workq.Job[payArgs], commit bool) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `insert into orders values ($1, $2)`, job.Args.Order, job.Attempt); err != nil {
		return err
	}
	if err := job.CompleteTx(ctx, tx); err != nil {
		return err
	}
	if !commit {
		return tx.Rollback(ctx)
	}
	return tx.Commit(ctx)
}

// The business write and "job done" commit together: one attempt, done,
// one archived run, and no lease reported lost when the runtime's own
// completion then finds the attempt already ended.
func TestCompleteTxCommitsWithTheBusinessWrite(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	client, results := startPayClient(t, pool, func(ctx context.Context, job *workq.Job[payArgs]) error {
		return markPaid(ctx, pool, job, true)
	})
	e, err := client.Enqueue(ctx, payArgs{Order: 7}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := nextResult(t, results)
	if r.Kind != workq.EventCompleted {
		t.Fatalf("result %+v, want completed", r)
	}
	var status lease.Status
	var runs, attempt int
	if err := pool.QueryRow(ctx, `select status, (select count(*) from workq.runs_all where item_id = $1 and work_table = 'job_runs'),
		(select paid_by_attempt from orders where id = 7) from workq.job_runs_all where id = $1`, e.ID).Scan(&status, &runs, &attempt); err != nil {
		t.Fatal(err)
	}
	if status != lease.StatusDone || runs != 1 || attempt != 1 {
		t.Fatalf("status %s, %d archived runs, paid by attempt %d; want done, 1, 1", status, runs, attempt)
	}
	if st := client.Stats(); st.LeaseLost != 0 || st.Done != 1 {
		t.Fatalf("stats %+v: want done 1, lease lost 0", st)
	}
}

// A transaction that rolls back leaves the job to the handler's result:
// here an error, so it runs again and its second attempt commits.
func TestCompleteTxRolledBackLeavesTheHandlersResult(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	_, results := startPayClient(t, pool, func(ctx context.Context, job *workq.Job[payArgs]) error {
		if job.Attempt == 1 {
			if err := markPaid(ctx, pool, job, false); err != nil {
				return err
			}
			return errors.New("the payment provider timed out; rolled back")
		}
		return markPaid(ctx, pool, job, true)
	})
	c, err := workq.NewClient(pool, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, payArgs{Order: 8}, nil); err != nil {
		t.Fatal(err)
	}
	if r := nextResult(t, results); r.Kind != workq.EventRetried || r.Work.Attempt != 1 {
		t.Fatalf("first attempt %+v, want a retry", r)
	}
	if r := nextResult(t, results); r.Kind != workq.EventCompleted || r.Work.Attempt != 2 {
		t.Fatalf("second attempt %+v, want done", r)
	}
	var attempt int
	if err := pool.QueryRow(ctx, `select paid_by_attempt from orders where id = 8`).Scan(&attempt); err != nil || attempt != 2 {
		t.Fatalf("paid by attempt %d (err %v), want 2: the rolled-back write must not be there", attempt, err)
	}
}

// When the lease is lost mid-transaction (another worker holds the job
// now), CompleteTx refuses with ErrLeaseLost and writes nothing, so the
// business write rolls back with it.
func TestCompleteTxRefusesALostLease(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	got := make(chan error, 1)
	_, results := startPayClient(t, pool, func(ctx context.Context, job *workq.Job[payArgs]) error {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, `insert into orders values ($1, $2)`, job.Args.Order, job.Attempt); err != nil {
			return err
		}
		// Another worker claims the job under a new token (as after this
		// worker's lease expired and the reaper requeued it).
		if _, err := pool.Exec(ctx, `update workq.job_runs set owner_token = gen_random_uuid(), lease_version = lease_version + 1 where id = $1`,
			job.ID); err != nil {
			return err
		}
		err = job.CompleteTx(ctx, tx)
		got <- err
		if err != nil {
			return err
		}
		return tx.Commit(ctx)
	})
	c, err := workq.NewClient(pool, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, payArgs{Order: 9}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if !errors.Is(err, workq.ErrLeaseLost) {
			t.Fatalf("CompleteTx: %v, want ErrLeaseLost", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the handler did not run")
	}
	if r := nextResult(t, results); r.Kind != workq.EventLeaseLost {
		t.Fatalf("result %+v: the completion of a lost lease must not apply", r)
	}
	var n int
	if err := pool.QueryRow(ctx, `select count(*) from orders`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d orders (err %v): the business write must have rolled back", n, err)
	}
	var status lease.Status
	if err := pool.QueryRow(ctx, `select status from workq.job_runs_all`).Scan(&status); err != nil || status != lease.StatusInProgress {
		t.Fatalf("status %q (err %v): the other holder's attempt must be untouched", status, err)
	}
}

// Issue 28, item 4: CompleteTx with a nil transaction or a nil context
// returns ErrInvalid naming it instead of panicking in the handler; the
// attempt then goes on to its own result (done here).
func TestClientCompleteTxRefusesNilArguments(t *testing.T) {
	pool := testdb.Pool(t)
	errs := make(chan [2]error, 1)
	client, results := startPayClient(t, pool, func(ctx context.Context, job *workq.Job[payArgs]) error {
		var nilCtx context.Context
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		errs <- [2]error{job.CompleteTx(ctx, nil), job.CompleteTx(nilCtx, tx)}
		return nil
	})
	if _, err := client.Enqueue(context.Background(), payArgs{Order: 1}, nil); err != nil {
		t.Fatal(err)
	}
	if r := nextResult(t, results); r.Kind != workq.EventCompleted {
		t.Errorf("result %+v, want completed", r)
	}
	var got [2]error
	select {
	case got = <-errs:
	default:
		t.Fatal("the handler did not get past CompleteTx (it panicked?)")
	}
	for i, field := range []string{"tx", "ctx"} {
		if !errors.Is(got[i], workq.ErrInvalid) || workqtype.FieldOf(got[i]) != field {
			t.Errorf("CompleteTx with a nil %s: %v, want ErrInvalid naming %s", field, got[i], field)
		}
	}
}
