package workq_test

import (
	"context"
	"fmt"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
)

// Periodic jobs declared in Config.PeriodicJobs are the source of truth
// for themselves: each Start makes the stored schedules what the code
// says. The next deploy changes a cron, adds a job and drops one: the
// dropped one is disabled (its runs and history stay), and a schedule an
// operator created is left alone.
func ExampleConfig_periodicJobs() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	deploy := func(jobs ...*workq.PeriodicJob) *workq.Client {
		client, err := workq.NewClient(pool, workq.Config{PeriodicJobs: jobs}) // the maintenance leader makes their runs
		must(err)
		must(client.Start(ctx))
		return client
	}
	v1 := deploy(
		workq.NewPeriodicJob("nightly-invoices", "0 3 * * *", SendInvoiceArgs{}, &workq.PeriodicJobOpts{Queue: "billing"}),
		workq.NewPeriodicJob("weekly-report", "0 8 * * MON", EmailArgs{To: "boss@example.com"}, nil),
	)
	_, err := v1.CreateSchedule(ctx, workq.ScheduleSpec{Name: "adhoc-export", Cron: "@daily", Kind: "export"})
	must(err)
	must(v1.Stop(ctx))

	v2 := deploy(
		workq.NewPeriodicJob("nightly-invoices", "30 2 * * *", SendInvoiceArgs{}, &workq.PeriodicJobOpts{Queue: "billing"}),
		workq.NewPeriodicJob("hourly-digest", "@hourly", EmailArgs{To: "ops@example.com"}, nil),
	)
	defer v2.Stop(ctx)
	schedules, err := v2.ListSchedules(ctx)
	must(err)
	for _, s := range schedules {
		fmt.Printf("%-16s %-10s declared=%-5v enabled=%v\n", s.Name, s.Cron, s.Declared, s.Enabled)
	}
	// Output:
	// adhoc-export     @daily     declared=false enabled=true
	// hourly-digest    @hourly    declared=true  enabled=true
	// nightly-invoices 30 2 * * * declared=true  enabled=true
	// weekly-report    0 8 * * MON declared=true  enabled=false
}

// PeriodicJob.Spec makes a schedule of typed jobs that an operator's code
// creates at run time; the reconcile of Config.PeriodicJobs never changes
// it.
func ExamplePeriodicJob_Spec() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	client, err := workq.NewClient(pool, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	must(err)
	spec, err := workq.NewPeriodicJob("nightly-invoices", "0 3 * * *", SendInvoiceArgs{Invoice: 0},
		&workq.PeriodicJobOpts{Queue: "billing", Overlap: workq.OverlapSkip}).Spec()
	must(err)
	s, err := client.CreateSchedule(ctx, spec)
	must(err)
	fmt.Println(s.Name, s.Kind, s.Queue, s.Overlap, string(s.Payload), s.Declared)
	// Output: nightly-invoices invoice.mail billing skip {"invoice": 0} false
}
