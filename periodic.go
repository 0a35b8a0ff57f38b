package workq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/workq/workq/internal/schedule"
	"github.com/workq/workq/workqtype"
)

// PeriodicJob is a cron schedule of typed jobs declared in code (River's
// PeriodicJob): give it to Config.PeriodicJobs and the Client makes the
// stored schedule what the code says at Start. Make one with
// NewPeriodicJob.
type PeriodicJob struct {
	name, cron string
	args       Args
	opts       PeriodicJobOpts
}

// PeriodicJobOpts are a PeriodicJob's options. Queue, Priority and
// MaxAttempts are merged with the Args' own EnqueueOpts as an enqueue
// does; the others are the schedule's policies (docs/schedules.md). Zero
// values take the defaults of ScheduleSpec.
type PeriodicJobOpts struct {
	Queue       string
	Priority    int16
	MaxAttempts int
	Timezone    string        // IANA zone of the cron expression; "" is UTC
	Overlap     OverlapPolicy // "" is OverlapAllow
	Misfire     MisfirePolicy // "" is MisfireRunOnce
	MisfireCap  int           // MisfireRunAll's cap; 0 is 100
}

// NewPeriodicJob returns the periodic job name: every slot of cron (five
// fields, or a macro such as @hourly or @every 10m) becomes a job run of
// args. Name is the schedule's name, which identifies the declaration from
// one deploy to the next: keep it when the cron or the args change. Errors
// (an invalid cron, args that do not encode) are reported by NewClient, or
// by Spec.
func NewPeriodicJob(name, cron string, args Args, opts *PeriodicJobOpts) *PeriodicJob {
	p := &PeriodicJob{name: name, cron: cron, args: args}
	if opts != nil {
		p.opts = *opts
	}
	return p
}

// Spec returns the ScheduleSpec of the periodic job: its kind and payload
// from the args, and the queue, priority and max attempts of its options
// merged with the args' own EnqueueOpts. Pass it to CreateSchedule to make
// an operator's schedule of typed jobs at run time; a typed spec cannot
// name a kind without a worker's args type, or carry a payload its worker
// cannot decode.
func (p *PeriodicJob) Spec() (ScheduleSpec, error) {
	if p == nil {
		return ScheduleSpec{}, workqtype.Invalid("PeriodicJobs", "a periodic job must not be nil")
	}
	j, err := job(p.args, &EnqueueOpts{Queue: p.opts.Queue, Priority: p.opts.Priority, MaxAttempts: p.opts.MaxAttempts})
	if err != nil {
		return ScheduleSpec{}, fmt.Errorf("periodic job %q: %w", p.name, err)
	}
	return ScheduleSpec{Name: p.name, Cron: p.cron, Timezone: p.opts.Timezone, Queue: j.Queue, Kind: j.Kind, Payload: j.Payload,
		Priority: j.Priority, MaxAttempts: j.MaxAttempts, Overlap: p.opts.Overlap, Misfire: p.opts.Misfire,
		MisfireCap: p.opts.MisfireCap}, nil
}

// periodicJobs reconciles a Client's Config.PeriodicJobs on every shard:
// at Start, and then every LeaderTTL/3 until Stop, so that the set of the
// newest deploy wins while two deploys run side by side (docs/schedules.md,
// "Periodic jobs declared in code"). A Client whose Config.PeriodicJobs is
// nil has none and takes no part.
type periodicJobs struct {
	specs []ScheduleSpec
	alive time.Duration // how long one reconcile keeps the set alive
	every time.Duration // between reconciles
	log   *slog.Logger

	mu      sync.Mutex
	cancel  context.CancelFunc
	done    chan struct{}
	lastErr map[string]string // per shard, so a lasting error is logged once
}

// newPeriodicJobs validates cfg.PeriodicJobs (nil: nil, no periodic jobs).
func newPeriodicJobs(cfg Config, store *schedule.Store, log *slog.Logger) (*periodicJobs, error) {
	if cfg.PeriodicJobs == nil {
		return nil, nil
	}
	specs := make([]ScheduleSpec, 0, len(cfg.PeriodicJobs))
	var errs []error
	for i, pj := range cfg.PeriodicJobs {
		sp, err := pj.Spec()
		if err != nil {
			errs = append(errs, fmt.Errorf("PeriodicJobs[%d]: %w", i, err))
			continue
		}
		specs = append(specs, sp)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if _, err := store.Fingerprint(specs); err != nil { // every spec valid, no name twice
		return nil, err
	}
	ttl := cfg.Maintenance.withDefaults().LeaderTTL
	return &periodicJobs{specs: specs, alive: 2 * ttl, every: ttl / 3, log: log, lastErr: map[string]string{}}, nil
}

// targets returns the shards' Clients with the specs of each (every shard,
// also those declaring none: the set of a shard may have become empty).
func (c *Client) periodicTargets() ([]*Client, [][]ScheduleSpec) {
	if c.set == nil {
		return []*Client{c}, [][]ScheduleSpec{c.periodic.specs}
	}
	idx := map[*Client]int{}
	specs := make([][]ScheduleSpec, len(c.set.shards))
	for i, sc := range c.set.shards {
		idx[sc] = i
	}
	for _, sp := range c.periodic.specs {
		i := idx[c.set.pick(routeSchedule(sp.Name))]
		specs[i] = append(specs[i], sp)
	}
	return c.set.shards, specs
}

// reconcilePeriodic reconciles every shard once. It returns the first
// error that a retry cannot fix (a declaration colliding with an
// operator's schedule); other errors are logged and retried by the loop.
func (c *Client) reconcilePeriodic(ctx context.Context, atStart bool) error {
	p := c.periodic
	shards, specs := c.periodicTargets()
	var fatal []error
	for i, sc := range shards {
		res, err := sc.sched.Reconcile(ctx, sc.db, specs[i], p.alive)
		p.mu.Lock()
		last := p.lastErr[sc.name]
		p.lastErr[sc.name] = ""
		if err != nil {
			p.lastErr[sc.name] = err.Error()
		}
		p.mu.Unlock()
		switch {
		case err != nil && (errors.Is(err, ErrScheduleExists) || errors.Is(err, ErrInvalid)):
			if atStart {
				fatal = append(fatal, fmt.Errorf("workq: shard %s: %w", sc.name, err))
			} else if err.Error() != last {
				p.log.Error("workq: periodic jobs not applied", "shard", sc.name, "err", err)
			}
		case err != nil:
			if ctx.Err() == nil && err.Error() != last {
				p.log.Warn("workq: periodic jobs not reconciled; retrying", "shard", sc.name, "err", workqtype.NotMigrated(err, sc.Schema()))
			}
		case res.Applied && res.Changed():
			p.log.Info("workq: periodic jobs applied", "shard", sc.name, "created", res.Created, "updated", res.Updated,
				"disabled", res.Disabled, "enabled", res.Enabled)
		case res.Superseded && atStart:
			p.log.Info("workq: periodic jobs of a newer deploy are running; this process's declarations are not applied", "shard", sc.name)
		}
	}
	return errors.Join(fatal...)
}

// startPeriodic reconciles at Start and starts the loop; a Client without
// PeriodicJobs does nothing.
func (c *Client) startPeriodic(ctx context.Context) error {
	p := c.periodic
	if p == nil {
		return nil
	}
	if err := c.reconcilePeriodic(ctx, true); err != nil {
		return err
	}
	loopCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	p.mu.Lock()
	p.cancel, p.done = cancel, done
	p.mu.Unlock()
	go func() {
		defer close(done)
		t := time.NewTicker(p.every)
		defer t.Stop()
		for {
			select {
			case <-loopCtx.Done():
				return
			case <-t.C:
				_ = c.reconcilePeriodic(loopCtx, false)
			}
		}
	}()
	return nil
}

// stopPeriodic ends the loop and waits for it: a reconcile in flight is
// cancelled (its transaction rolls back).
func (c *Client) stopPeriodic() {
	p := c.periodic
	if p == nil {
		return
	}
	p.mu.Lock()
	cancel, done := p.cancel, p.done
	p.cancel, p.done = nil, nil
	p.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}
