package main

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/workq/workq/config"
	"github.com/workq/workq/inbox"
	"github.com/workq/workq/lease"
	"github.com/workq/workq/maintain"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/schedule"
)

// maintainFlags are the settings of the maintenance process (also part of
// `workq run`).
var maintainFlags = []string{
	"reap-interval", "reap-batch", "leader-ttl", "retain-finished", "retain-runs", "retention-interval",
	"inbox-window", "schedule-interval",
}

func newMaintainCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use: "maintain",
		Short: "Run the maintenance process: one leader (fenced lock) reaps expired leases, materialises schedules, " +
			"fails overdue joins and applies retention",
		Args: cobra.NoArgs,
	}
	// --lease is the workers' lease, for the stuck-items task.
	cfg := bindConfig(cmd, append(append([]string{"database-url", "max-conns", "worker-id", "log-level", "log-format", "lease"},
		maintainFlags...), config.ObservabilityFlags...)...)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := cfg.Validate(); err != nil {
			return err
		}
		log := newLogger(cfg, cmd.ErrOrStderr())
		ctx := cmd.Context()
		pool, done, err := connect(ctx, cfg, log, needSchema)
		if err != nil {
			return err
		}
		defer done()
		obs, err := startObservability(ctx, *cfg, pool, log)
		if err != nil {
			return err
		}
		defer obs.close()
		m, err := newMaintenance(pool, *cfg, log, obs)
		if err != nil {
			return err
		}
		return m.Run(ctx)
	}
	return cmd
}

// maintenanceBatch bounds the rows of one statement of the join-deadline
// and inbox-window tasks.
const maintenanceBatch = 1000

// newMaintenance returns the maintenance service with every built-in task:
// reap, retention (job runs, outbox, timers, the run archive), stuck items
// (in progress past twice the lease), the inbox de-duplication window,
// schedules and join deadlines. obs (may be nil) observes it.
func newMaintenance(pool *pgxpool.Pool, cfg config.Config, log *slog.Logger, obs *observability) (*maintain.Service, error) {
	m := maintain.New(pool, maintain.Options{Logger: log, LockTTL: cfg.LeaderTTL, Owner: cfg.WorkerID, Observer: obs.maintainObserver()})
	reap, err := maintain.ReapTask(pool, cfg.ReapInterval, cfg.ReapBatch, log)
	if err != nil {
		return nil, err
	}
	retention, err := maintain.RetentionTask(pool, cfg.RetentionInterval, maintain.Retention{
		Finished: cfg.RetainFinished, Runs: cfg.RetainRuns,
		Tables: []lease.Table{lease.JobRuns, lease.Outbox, lease.Timers},
	})
	if err != nil {
		return nil, err
	}
	sched, err := schedule.NewScheduler(pool, schedule.SchedulerOptions{Interval: cfg.ScheduleInterval, Logger: log})
	if err != nil {
		return nil, err
	}
	stuck, err := maintain.StuckTask(pool, cfg.RetentionInterval, cfg.Lease, log)
	if err != nil {
		return nil, err
	}
	tasks := []maintain.Task{
		reap,
		retention,
		stuck,
		{Name: "inbox-window", Every: cfg.RetentionInterval, Run: func(ctx context.Context, _ int64) (int64, error) {
			var total int64
			for range 100 {
				n, err := inbox.DeleteProcessed(ctx, pool, cfg.InboxWindow, maintenanceBatch)
				total += n
				if err != nil || n < maintenanceBatch {
					return total, err
				}
			}
			return total, nil
		}},
		{Name: "schedules", Every: cfg.ScheduleInterval, Run: func(ctx context.Context, _ int64) (int64, error) {
			n, err := sched.Tick(ctx)
			return int64(n), err
		}},
		{Name: "join-deadlines", Every: cfg.ScheduleInterval, Run: func(ctx context.Context, _ int64) (int64, error) {
			n, err := outbox.FailExpiredJoins(ctx, pool, maintenanceBatch)
			return int64(n), err
		}},
	}
	for _, t := range tasks {
		if err := m.Add(t); err != nil {
			return nil, err
		}
	}
	return m, nil
}
