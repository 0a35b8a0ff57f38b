package schedule_test

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/schedule"
	"github.com/workq/workq/internal/testdb"
)

// A schedule makes a job run of kind "report.nightly" at 03:00 Berlin time.
// The clock is fixed here so the output is stable; leave Clock nil in
// production to use the database clock, and run the scheduler with
// Start/Stop (or Run) instead of calling Tick.
func Example() {
	ctx := context.Background()
	url, drop, err := testdb.NewDatabase()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer drop()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()

	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	store := schedule.NewStore(schedule.StoreOptions{Clock: clock})
	sc, err := store.Create(ctx, pool, schedule.Spec{
		Name:     "nightly-report",
		Cron:     "0 3 * * *",
		Timezone: "Europe/Berlin",
		Kind:     "report.nightly",
		Payload:  map[string]string{"format": "pdf"},
		Overlap:  schedule.OverlapSkip,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("next run:", sc.NextRunAt.In(time.UTC))

	sched, err := schedule.NewScheduler(pool, schedule.SchedulerOptions{Clock: clock})
	if err != nil {
		fmt.Println(err)
		return
	}
	now = now.Add(15 * time.Hour) // 03:00 Berlin has passed
	n, err := sched.Tick(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	sc, _ = store.Get(ctx, pool, "nightly-report")
	fmt.Println("runs made:", n, "last outcome:", sc.LastOutcome)
	fmt.Println("next run:", sc.NextRunAt.In(time.UTC))
	// Output:
	// next run: 2030-01-02 02:00:00 +0000 UTC
	// runs made: 1 last outcome: ready
	// next run: 2030-01-03 02:00:00 +0000 UTC
}
