package workq_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
)

// TenantReportArgs are a tenant's report: its LimitKey method makes the
// tenant the job's limit key.
type TenantReportArgs struct {
	Tenant string `json:"tenant"`
	N      int    `json:"n"`
}

func (TenantReportArgs) Kind() string { return "report.tenant" }

// LimitKey is the key per-key flow limits count the job by.
func (a TenantReportArgs) LimitKey() string { return a.Tenant }

// Limit keys: with a per-key concurrency of 1 on the queue, each tenant's
// reports run one at a time, while the two tenants run side by side. The
// key comes from the args (ArgsWithLimitKey) or from
// EnqueueOpts.LimitKey, and the handler sees it (Job.LimitKey).
func ExampleEnqueueOpts_limitKey() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()

	var mu sync.Mutex
	running, most, done := map[string]int{}, map[string]int{}, map[string]int{}
	finished := make(chan struct{}, 6)
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(_ context.Context, job *workq.Job[TenantReportArgs]) error {
		mu.Lock()
		running[job.LimitKey]++
		most[job.LimitKey] = max(most[job.LimitKey], running[job.LimitKey])
		mu.Unlock()
		time.Sleep(20 * time.Millisecond) // the report's work
		mu.Lock()
		running[job.LimitKey]--
		done[job.LimitKey]++
		mu.Unlock()
		finished <- struct{}{}
		return nil
	}))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers, MaxWorkers: 4})
	if err != nil {
		panic(err)
	}
	if err := client.SetFlowLimit(ctx, workq.FlowLimit{Table: workq.TableJobRuns, Queue: "default", PerKey: true, Concurrency: 1}); err != nil {
		panic(err)
	}
	var batch []workq.EnqueueParams
	for n := range 3 {
		batch = append(batch, workq.EnqueueParams{Args: TenantReportArgs{Tenant: "acme", N: n}})
		// EnqueueOpts.LimitKey wins over the args' method.
		batch = append(batch, workq.EnqueueParams{Args: TenantReportArgs{Tenant: "ignored", N: n},
			Opts: &workq.EnqueueOpts{LimitKey: "globex"}})
	}
	if _, err := client.EnqueueMany(ctx, batch); err != nil {
		panic(err)
	}
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx)
	for range len(batch) {
		<-finished
	}
	for _, tenant := range []string{"acme", "globex"} {
		fmt.Printf("%s: %d reports, at most %d at a time\n", tenant, done[tenant], most[tenant])
	}
	// Output:
	// acme: 3 reports, at most 1 at a time
	// globex: 3 reports, at most 1 at a time
}
