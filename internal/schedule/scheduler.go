package schedule

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/outage"
	"github.com/workq/workq/internal/startstop"
	"github.com/workq/workq/workqtype"
)

// SchedulerOptions configure a Scheduler; zero values take the defaults.
type SchedulerOptions struct {
	Interval time.Duration // between ticks of Start's loop (1s)
	Batch    int           // schedules per transaction (100)
	// MisfireGrace is how late a slot may be found and still count as on
	// time (1 minute, and never less than two intervals). Older slots are
	// missed: the schedule's misfire policy decides what becomes of them.
	MisfireGrace time.Duration
	Logger       *slog.Logger // nil discards
	// Clock is "now"; nil uses the database clock (now() of each tick's
	// transaction), the clock every lease decision is made on. Tests inject
	// a clock to jump over days without sleeping.
	Clock func() time.Time
}

// Scheduler materialises due slots of enabled schedules into job runs.
// Several may run at once, in one process or many: each takes due
// schedules with FOR UPDATE SKIP LOCKED, and the unique index
// job_runs_schedule_slot makes each (schedule, scheduled time) one run
// whatever happens.
type Scheduler struct {
	db       workqtype.TxDB
	interval time.Duration
	batch    int
	grace    time.Duration
	log      *slog.Logger
	outage   *outage.Log // its ticks\' database failures, as one outage
	clock    func() time.Time

	startstop.Lifecycle // Start once; Stop, Started, Stopped
}

// NewScheduler returns a scheduler on db.
func NewScheduler(db workqtype.TxDB, o SchedulerOptions) (*Scheduler, error) {
	if o.Interval == 0 {
		o.Interval = time.Second
	}
	if o.Interval < 0 {
		return nil, fmt.Errorf("scheduler: interval must be positive, got %s", o.Interval)
	}
	if o.Batch == 0 {
		o.Batch = 100
	}
	if o.Batch < 1 || o.Batch > 10000 {
		return nil, fmt.Errorf("scheduler: batch must be between 1 and 10000, got %d", o.Batch)
	}
	if o.MisfireGrace == 0 {
		o.MisfireGrace = time.Minute
	}
	if o.MisfireGrace < 0 {
		return nil, fmt.Errorf("scheduler: misfire grace must not be negative, got %s", o.MisfireGrace)
	}
	o.MisfireGrace = max(o.MisfireGrace, 2*o.Interval)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Scheduler{db: db, interval: o.Interval, batch: o.Batch, grace: o.MisfireGrace, log: o.Logger, outage: outage.New(o.Logger, "scheduler"), clock: o.Clock}, nil
}

// Tick materialises every slot due now, in transactions of up to Batch
// schedules, and returns how many job runs it inserted.
func (s *Scheduler) Tick(ctx context.Context) (int, error) {
	total := 0
	for {
		n, full, err := s.tickBatch(ctx)
		total += n
		if err != nil || !full {
			return total, err
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
	}
}

// tickBatch handles up to one batch of due schedules in one transaction;
// full reports that the batch was full (more may be due).
func (s *Scheduler) tickBatch(ctx context.Context) (inserted int, full bool, err error) {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return 0, false, fmt.Errorf("scheduler tick: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	q := gen.New(tx)
	var clock *time.Time
	if s.clock != nil {
		c := s.clock()
		clock = &c
	}
	now, err := q.SchedulesNow(ctx, clock)
	if err != nil {
		return 0, false, fmt.Errorf("scheduler tick: %w", err)
	}
	due, err := q.SchedulesDue(ctx, now, int32(s.batch))
	if err != nil {
		return 0, false, fmt.Errorf("scheduler tick: due schedules: %w", err)
	}
	if len(due) == 0 {
		return 0, false, nil
	}
	var (
		mat  gen.SchedulesMaterializeParams
		adv  gen.SchedulesAdvanceParams
		slot = map[int64]int{} // schedule id -> index in adv
	)
	for _, d := range due {
		expr, err := ParseCron(d.Cron, d.Timezone)
		if err != nil {
			s.log.Error("schedule has a cron expression that no longer parses; parked until it is updated",
				"schedule", d.Name, "cron", d.Cron, "timezone", d.Timezone, "err", err)
			if err := q.SchedulesPark(ctx, d.ID); err != nil {
				return 0, false, fmt.Errorf("scheduler tick: park %q: %w", d.Name, err)
			}
			continue
		}
		p := expr.duePlan(d.NextRunAt, now, s.grace, MisfirePolicy(d.Misfire), int(d.MisfireCap))
		if p.next.IsZero() {
			s.log.Warn("schedule has no slot left; parked", "schedule", d.Name, "cron", d.Cron)
			if err := q.SchedulesPark(ctx, d.ID); err != nil {
				return 0, false, fmt.Errorf("scheduler tick: park %q: %w", d.Name, err)
			}
			p.next = time.Time{}
		}
		live := d.LastRunLive
		var skipped int64
		var lastSkipped time.Time
		for _, t := range p.slots {
			if OverlapPolicy(d.Overlap) == OverlapSkip && live {
				skipped++
				lastSkipped = t
				continue
			}
			mat.ScheduleIds = append(mat.ScheduleIds, d.ID)
			mat.ScheduledTimes = append(mat.ScheduledTimes, t)
			live = true
		}
		if p.next.IsZero() {
			continue // parked above; its runs (if any) are still made
		}
		slot[d.ID] = len(adv.Ids)
		adv.Ids = append(adv.Ids, d.ID)
		adv.NextRunAts = append(adv.NextRunAts, p.next)
		adv.HasRun = append(adv.HasRun, false)
		adv.LastRunIds = append(adv.LastRunIds, 0)
		adv.LastRunAts = append(adv.LastRunAts, time.Time{})
		adv.Skipped = append(adv.Skipped, skipped)
		adv.LastSkippedAts = append(adv.LastSkippedAts, lastSkipped)
		if skipped > 0 {
			s.log.Info("schedule slots skipped: the previous run is still live (overlap skip)",
				"schedule", d.Name, "skipped", skipped, "latest", lastSkipped)
		}
	}
	if len(mat.ScheduleIds) > 0 {
		mat.Notify = true
		rows, err := q.SchedulesMaterialize(ctx, mat)
		if err != nil {
			return 0, false, fmt.Errorf("scheduler tick: insert job runs: %w", err)
		}
		inserted = len(rows)
		for _, r := range rows {
			i, ok := slot[r.ScheduleID]
			if !ok {
				continue
			}
			if !adv.HasRun[i] || r.ScheduledTime.After(adv.LastRunAts[i]) {
				adv.HasRun[i], adv.LastRunIds[i], adv.LastRunAts[i] = true, r.ID, r.ScheduledTime
			}
		}
	}
	if len(adv.Ids) > 0 {
		if err := q.SchedulesAdvance(ctx, adv); err != nil {
			return 0, false, fmt.Errorf("scheduler tick: advance schedules: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, false, fmt.Errorf("scheduler tick: commit: %w", err)
	}
	if inserted > 0 {
		s.log.Debug("scheduler materialised job runs", "runs", inserted, "schedules", len(due))
	}
	return inserted, len(due) == s.batch, nil
}

// Run ticks every interval until ctx is cancelled. A failed tick is logged
// and the next one tries again.
func (s *Scheduler) Run(ctx context.Context) error {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		switch _, err := s.Tick(ctx); {
		case err == nil:
			s.outage.OK()
		case ctx.Err() != nil, s.outage.Failed(err):
		default:
			s.log.Warn("scheduler tick failed; retrying at the next tick", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// ErrNotRunning is Stop's error for a scheduler that was not started: it
// is startstop.ErrNotStarted, every service's.
var ErrNotRunning = startstop.ErrNotStarted

// Start runs the loop (Run) in a goroutine the scheduler owns until Stop.
// ctx only bounds the start; cancel the loop with Stop. A scheduler starts
// once (startstop.ErrStarted after that).
func (s *Scheduler) Start(ctx context.Context) error {
	run, err := s.Begin(ctx)
	if err != nil {
		return fmt.Errorf("scheduler: start: %w", err)
	}
	go func() {
		defer run.Stopped()
		run.Started()
		_ = s.Run(run.Context())
	}()
	return nil
}

// Stop ends the loop and waits for it: a tick in flight is cancelled (its
// transaction rolls back; the next scheduler redoes it). It returns
// ctx.Err() if ctx ends first, ErrNotRunning if the scheduler was never
// started; calling it again waits for the same stop.
func (s *Scheduler) Stop(ctx context.Context) error {
	if err := s.Lifecycle.Stop(ctx); err != nil {
		return fmt.Errorf("scheduler: stop: %w", err)
	}
	return nil
}
