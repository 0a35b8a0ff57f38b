package workq_test

import (
	"context"
	"fmt"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
)

type SendInvoiceArgs struct {
	Invoice int `json:"invoice"`
}

func (SendInvoiceArgs) Kind() string { return "invoice.mail" }

// CompleteTx ends the job in the handler's own transaction, together with
// its business write: both commit, or neither does.
func ExampleJob_CompleteTx() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `create table invoices (id int primary key, sent bool not null)`); err != nil {
		panic(err)
	}
	done := make(chan struct{})
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[SendInvoiceArgs]) error {
		defer close(done)
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, `insert into invoices values ($1, true)`, job.Args.Invoice); err != nil {
			return err
		}
		if err := job.CompleteTx(ctx, tx); err != nil {
			return err // workq.ErrLeaseLost: another worker holds it now; nothing was written
		}
		return tx.Commit(ctx)
	}))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers, Maintenance: workq.MaintenanceConfig{Disabled: true}})
	must(err)
	must(client.Start(ctx))
	_, err = client.Enqueue(ctx, SendInvoiceArgs{Invoice: 17}, nil)
	must(err)
	<-done
	must(client.Stop(ctx))
	var sent bool
	var status string
	must(pool.QueryRow(ctx, `select i.sent, case j.status when 2 then 'done' else j.status::text end
		from invoices i, workq.job_runs_all j where i.id = 17 and j.kind = 'invoice.mail'`).Scan(&sent, &status))
	fmt.Println("sent:", sent, "job:", status)
	// Output: sent: true job: done
}
