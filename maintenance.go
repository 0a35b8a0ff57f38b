package workq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/workq/workq/internal/inboxrt"
	"github.com/workq/workq/internal/maintain"
	"github.com/workq/workq/internal/outboxrt"
	"github.com/workq/workq/internal/schedule"
	"github.com/workq/workq/workqtype"
)

// MaintenanceConfig configures the maintenance a Client runs: one leader
// among every Client and `workq maintain` process on the database (a
// fenced lock) runs every built-in task. A zero field takes its default;
// every task is on unless Disabled.
type MaintenanceConfig struct {
	// Disabled runs no maintenance in this Client (another process, such
	// as `workq maintain`, must then run it).
	Disabled     bool
	LeaderTTL    time.Duration // a dead leader is replaced within it; default 15s
	ReapInterval time.Duration // expired leases are requeued this often; default 5s
	ReapBatch    int           // rows per reap statement; default 200
	// RetainFinished and RetainRuns: done, failed and cancelled items, and archived
	// attempts, are deleted this long after they ended; default 7 days,
	// negative keeps them. The run archive is partitioned by UTC day and
	// goes a whole day at a time (its partition is dropped once the day is
	// older than RetainRuns), so an attempt stays up to a day longer.
	// Either way the retention task makes the archive's partitions ahead.
	RetainFinished    time.Duration
	RetainRuns        time.Duration
	RetentionInterval time.Duration // how often retention, stuck-item flagging and the inbox window run; default 1m
	// InboxWindow is how long processed inbox messages are remembered for
	// de-duplication; default 7 days.
	InboxWindow time.Duration
	// ScheduleInterval is how often due schedule slots become job runs and
	// overdue joins fail; default 1s.
	ScheduleInterval time.Duration
	// VacuumInterval is how often the work tables' dead tuples are
	// checked, and a table with many (at least 10,000 and a fifth of its
	// live rows) is vacuumed: a queue's table changes too fast for
	// autovacuum's once-a-minute visit; each round also summarizes the
	// block ranges new done rows filled in the done tables' BRIN indexes,
	// which the dashboard's counts read; default 10s; negative: never
	// (left to autovacuum). docs/operations.md, "Vacuum".
	VacuumInterval time.Duration

	// observer is told about leadership and task rounds: the Client's
	// metrics, if any (per shard on a sharded Client).
	observer maintain.Observer
}

// DefaultMaintenance returns the defaults that a zero MaintenanceConfig
// field takes.
func DefaultMaintenance() MaintenanceConfig {
	return MaintenanceConfig{
		LeaderTTL:         maintain.DefaultLeaderTTL,
		ReapInterval:      maintain.DefaultReapInterval,
		ReapBatch:         maintain.DefaultReapBatch,
		RetainFinished:    maintain.DefaultRetainFinished,
		RetainRuns:        maintain.DefaultRetainRuns,
		RetentionInterval: maintain.DefaultRetentionInterval,
		InboxWindow:       maintain.DefaultInboxWindow,
		ScheduleInterval:  maintain.DefaultScheduleInterval,
		VacuumInterval:    maintain.DefaultVacuumInterval,
	}
}

func (m MaintenanceConfig) withDefaults() MaintenanceConfig {
	d := DefaultMaintenance()
	dur := func(v *time.Duration, def time.Duration, negativeIsZero bool) {
		switch {
		case *v == 0:
			*v = def
		case *v < 0 && negativeIsZero:
			*v = 0
		}
	}
	dur(&m.LeaderTTL, d.LeaderTTL, false)
	dur(&m.ReapInterval, d.ReapInterval, false)
	if m.ReapBatch == 0 {
		m.ReapBatch = d.ReapBatch
	}
	dur(&m.RetainFinished, d.RetainFinished, true)
	dur(&m.RetainRuns, d.RetainRuns, true)
	dur(&m.RetentionInterval, d.RetentionInterval, false)
	dur(&m.InboxWindow, d.InboxWindow, false)
	dur(&m.ScheduleInterval, d.ScheduleInterval, false)
	dur(&m.VacuumInterval, d.VacuumInterval, true)
	return m
}

// Validate returns every problem with m (after defaults), each wrapping
// ErrInvalid.
func (m MaintenanceConfig) Validate() error {
	m = m.withDefaults()
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, workqtype.Invalid(field, fmt.Sprintf(format, args...)))
	}
	if m.LeaderTTL < time.Second {
		bad("LeaderTTL", "leader TTL must be at least 1s, got %s", m.LeaderTTL)
	}
	if m.ReapInterval < 10*time.Millisecond {
		bad("ReapInterval", "reap interval must be at least 10ms, got %s", m.ReapInterval)
	}
	if m.ReapBatch < 1 || m.ReapBatch > 100000 {
		bad("ReapBatch", "reap batch must be between 1 and 100000, got %d", m.ReapBatch)
	}
	if m.RetentionInterval < time.Second {
		bad("RetentionInterval", "retention interval must be at least 1s, got %s", m.RetentionInterval)
	}
	if m.InboxWindow < time.Minute {
		bad("InboxWindow", "inbox window must be at least 1m, got %s", m.InboxWindow)
	}
	if m.ScheduleInterval < 10*time.Millisecond {
		bad("ScheduleInterval", "schedule interval must be at least 10ms, got %s", m.ScheduleInterval)
	}
	if m.VacuumInterval != 0 && m.VacuumInterval < time.Second {
		bad("VacuumInterval", "vacuum interval must be at least 1s, or none (negative) to leave the work tables to autovacuum, got %s", m.VacuumInterval)
	}
	return errors.Join(errs...)
}

// maintenanceBatch bounds the rows of one statement of the join-deadline
// and inbox-window tasks.
const maintenanceBatch = 1000

// MaintenanceTasks are the names of the built-in tasks, in the order they
// are added; every one runs by default.
var MaintenanceTasks = []string{"reap", "retention", "stuck", "inbox-window", "schedules", "join-deadlines", "replication", "vacuum"}

// newMaintenance returns the maintenance service with every built-in task:
// reap, retention (job runs, outbox, timers, the run archive and its
// partitions), stuck items
// (in progress past twice the lease), the inbox de-duplication window,
// schedules, join deadlines, the replication check and the work tables'
// vacuum (unless VacuumInterval is negative). A new built-in task is added
// here (and to MaintenanceTasks).
func newMaintenance(db workqtype.TxDB, m MaintenanceConfig, owner string, leaseTTL time.Duration, log *slog.Logger) (*maintain.Service, error) {
	svc := maintain.New(db, maintain.Options{Logger: log, LockTTL: m.LeaderTTL, Owner: owner, Observer: m.observer})
	reap, err := maintain.ReapTask(db, m.ReapInterval, m.ReapBatch, log)
	if err != nil {
		return nil, err
	}
	retention, err := maintain.RetentionTask(db, m.RetentionInterval, maintain.Retention{
		Finished: m.RetainFinished, Runs: m.RetainRuns,
		Tables: retainedTables(),
	})
	if err != nil {
		return nil, err
	}
	sched, err := schedule.NewScheduler(db, schedule.SchedulerOptions{Interval: m.ScheduleInterval, Logger: log})
	if err != nil {
		return nil, err
	}
	stuck, err := maintain.StuckTask(db, m.RetentionInterval, leaseTTL, log)
	if err != nil {
		return nil, err
	}
	replication, err := maintain.ReplicationTask(db, maintain.DefaultReplicationInterval, log)
	if err != nil {
		return nil, err
	}
	tasks := []maintain.Task{
		reap,
		retention,
		stuck,
		{Name: "inbox-window", Every: m.RetentionInterval, Run: func(ctx context.Context, _ int64) (int64, error) {
			var total int64
			for range 100 {
				n, err := inboxrt.DeleteProcessed(ctx, db, m.InboxWindow, maintenanceBatch)
				total += n
				if err != nil || n < maintenanceBatch {
					return total, err
				}
			}
			return total, nil
		}},
		{Name: "schedules", Every: m.ScheduleInterval, Run: func(ctx context.Context, _ int64) (int64, error) {
			n, err := sched.Tick(ctx)
			return int64(n), err
		}},
		{Name: "join-deadlines", Every: m.ScheduleInterval, Run: func(ctx context.Context, _ int64) (int64, error) {
			n, err := outboxrt.FailExpiredJoins(ctx, db, maintenanceBatch)
			return int64(n), err
		}},
		replication,
	}
	if m.VacuumInterval > 0 {
		vacuum, err := maintain.VacuumTask(db, m.VacuumInterval, log)
		if err != nil {
			return nil, err
		}
		tasks = append(tasks, vacuum)
	}
	for _, t := range tasks {
		if err := svc.Add(t); err != nil {
			return nil, err
		}
	}
	return svc, nil
}
