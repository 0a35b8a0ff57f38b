package workq_test

import (
	"context"
	"fmt"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
)

// SetFlowLimit puts a rule in the database that every process obeys from
// its next claim: here at most 200 starts in any second of the queue, one
// export at a time, and one job at a time per tenant (EnqueueOpts.LimitKey).
// FlowStatus lists the rules with their use now.
func ExampleClient_SetFlowLimit() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	client, err := workq.NewClient(pool, workq.Config{})
	if err != nil {
		panic(err)
	}
	for _, l := range []workq.FlowLimit{
		{Table: workq.TableJobRuns, Queue: "api", Rate: 200, Period: time.Second},
		{Table: workq.TableJobRuns, Queue: "api", Kind: "export.csv", Concurrency: 1},
		{Table: workq.TableJobRuns, Queue: "api", PerKey: true, Concurrency: 1},
	} {
		if err := client.SetFlowLimit(ctx, l); err != nil {
			panic(err)
		}
	}
	// Stop one kind of the queue for an incident; the others go on.
	if _, err := client.PauseKind(ctx, workq.KindRef{Table: workq.TableJobRuns, Queue: "api", Kind: "report.pdf"},
		&workq.ActionOpts{Actor: "ops:ann", Reason: "renderer down"}); err != nil {
		panic(err)
	}
	st, err := client.FlowStatus(ctx)
	if err != nil {
		panic(err)
	}
	for _, l := range st.Limits {
		fmt.Println(l.FlowLimit, "rate", l.Rate, "per", l.Period, "concurrency", l.Concurrency)
	}
	for _, p := range st.PausedKinds {
		fmt.Println("paused", p.KindRef, "by", p.PausedBy)
	}
	// Unordered output:
	// default:job_runs/api rate 200 per 1s concurrency 0
	// default:job_runs/api[export.csv] rate 0 per 0s concurrency 1
	// default:job_runs/api[per key] rate 0 per 0s concurrency 1
	// paused default:job_runs/api[report.pdf] by ops:ann
}

type chargeArgs struct {
	Customer string `json:"customer"`
}

func (chargeArgs) Kind() string { return "example.charge" }

// LimitKey makes every charge of a customer share that customer's limits
// and throttles.
func (a chargeArgs) LimitKey() string { return a.Customer }

// Throttle is a handler's answer to an overloaded service (a 429 with
// Retry-After): the attempt uses none of the job's attempts, and no worker
// of any process starts another job of the same limit key until then;
// after that the key starts at an adapted rate.
func ExampleThrottle() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	calls := 0
	done := make(chan struct{})
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[chargeArgs]) error {
		calls++
		if calls == 1 {
			return workq.Throttle(200 * time.Millisecond) // the payment API said 429, Retry-After 0.2
		}
		fmt.Println("charged", job.Args.Customer, "on attempt", job.Attempt, "of", job.MaxAttempts)
		close(done)
		return nil
	}))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers, MaxWorkers: 1,
		Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		panic(err)
	}
	if _, err := client.Enqueue(ctx, chargeArgs{Customer: "acme"}, &workq.EnqueueOpts{MaxAttempts: 1}); err != nil {
		panic(err)
	}
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		fmt.Println("not charged")
	}
	// Output:
	// charged acme on attempt 1 of 1
}
