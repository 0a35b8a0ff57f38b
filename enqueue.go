package workq

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/inbox"
	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/timers"
	"github.com/workq/workq/workqtype"
)

// Enqueued is the outcome of enqueuing one job.
type Enqueued struct {
	ID        int64
	Duplicate bool // a run already held the dedup key or the unique key; ID is that run
	// Shard is the database the run is on (DefaultShard for NewClient's);
	// an id names a run of one shard.
	Shard string
}

// EnqueueParams is one job of EnqueueMany.
type EnqueueParams struct {
	Args Args
	Opts *EnqueueOpts // nil: the Args' own, then the defaults
}

// job turns typed args and options into the enqueue request.
func job(args Args, opts *EnqueueOpts) (jobq.Job, error) {
	if args == nil {
		return jobq.Job{}, workqtype.Invalid("args", "args must not be nil")
	}
	var o EnqueueOpts
	if opts != nil {
		o = *opts
	}
	if a, ok := args.(ArgsWithOpts); ok {
		o = o.merge(a.EnqueueOpts())
	}
	if a, ok := args.(ArgsWithLimitKey); ok && o.LimitKey == "" {
		o.LimitKey = a.LimitKey()
	}
	var payload any = args
	if raw, ok := args.(RawArgs); ok {
		payload = raw.Payload
	} else if raw, ok := args.(*RawArgs); ok {
		payload = raw.Payload
	}
	return jobq.Job{Queue: o.Queue, Kind: args.Kind(), Payload: payload, Priority: o.Priority, RunAt: o.RunAt, Delay: o.Delay,
		MaxAttempts: o.MaxAttempts, DedupKey: o.DedupKey, Unique: o.Unique.jobq(), Metadata: o.Metadata, LimitKey: o.LimitKey}, nil
}

// Enqueue adds one job run on the Client's pool.
func (c *Client) Enqueue(ctx context.Context, args Args, opts *EnqueueOpts) (_ Enqueued, err error) {
	defer c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return Enqueued{}, err
	}
	if c.set != nil {
		rs, err := c.aroundEnqueue(ctx, []EnqueueParams{{Args: args, Opts: opts}}, true, c.shardedEnqueue)
		if err != nil {
			return Enqueued{}, err
		}
		if len(rs) != 1 {
			return Enqueued{}, fmt.Errorf("workq: enqueue middleware returned %d results for one job", len(rs))
		}
		return rs[0], nil
	}
	return c.enqueue(ctx, c.db, args, opts)
}

// EnqueueTx adds one job run in the caller's transaction: the job exists
// if and only if tx commits.
func (c *Client) EnqueueTx(ctx context.Context, tx pgx.Tx, args Args, opts *EnqueueOpts) (_ Enqueued, err error) {
	defer c.notMigrated(&err)
	if err := checkTx(ctx, tx); err != nil {
		return Enqueued{}, err
	}
	if c.set != nil {
		return Enqueued{}, c.errShardTx("EnqueueTx")
	}
	return c.enqueue(ctx, tx, args, opts)
}

func (c *Client) enqueue(ctx context.Context, db DB, args Args, opts *EnqueueOpts) (Enqueued, error) {
	rs, err := c.aroundEnqueue(ctx, []EnqueueParams{{Args: args, Opts: opts}}, true,
		func(ctx context.Context, jobs []jobq.Job) ([]Enqueued, error) {
			r, err := c.jobs.Enqueue(ctx, c.in(db), jobs[0])
			if err != nil {
				return nil, err
			}
			return []Enqueued{{ID: r.ID, Duplicate: r.Duplicate, Shard: c.name}}, nil
		})
	if err != nil {
		return Enqueued{}, err
	}
	if len(rs) != 1 {
		return Enqueued{}, fmt.Errorf("workq: enqueue middleware returned %d results for one job", len(rs))
	}
	return rs[0], nil
}

// EnqueueMany adds many job runs in one statement on the pool; the result
// has one entry per job, in order. Jobs with a DedupKey cannot be beside
// unique jobs. A batch where some job has RunAt is written one job at a
// time in one transaction (all or none): slower than one statement, so
// prefer Delay for large batches.
//
// On a sharded Client each keyed job goes to its key's shard and the jobs
// without a key to one shard (round-robin per call): one statement per
// shard, in shard order. If one fails, the batches of the shards before it
// stay written (the error names the shard).
func (c *Client) EnqueueMany(ctx context.Context, params []EnqueueParams) (_ []Enqueued, err error) {
	defer c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	if c.set != nil {
		return c.aroundEnqueue(ctx, params, false, c.shardedEnqueue)
	}
	return c.enqueueMany(ctx, c.db, params)
}

// EnqueueManyTx is EnqueueMany in the caller's transaction.
func (c *Client) EnqueueManyTx(ctx context.Context, tx pgx.Tx, params []EnqueueParams) (_ []Enqueued, err error) {
	defer c.notMigrated(&err)
	if err := checkTx(ctx, tx); err != nil {
		return nil, err
	}
	if c.set != nil {
		return nil, c.errShardTx("EnqueueManyTx")
	}
	return c.enqueueMany(ctx, tx, params)
}

func (c *Client) enqueueMany(ctx context.Context, db DB, params []EnqueueParams) ([]Enqueued, error) {
	return c.aroundEnqueue(ctx, params, false, func(ctx context.Context, jobs []jobq.Job) ([]Enqueued, error) {
		rs, err := c.enqueueBatch(ctx, db, jobs)
		if err != nil {
			return nil, err
		}
		out := make([]Enqueued, len(rs))
		for i, r := range rs {
			out[i] = Enqueued{ID: r.ID, Duplicate: r.Duplicate, Shard: c.name}
		}
		return out, nil
	})
}

// EnqueueManyFast adds many job runs with the COPY protocol on the pool and
// returns how many it added: the fastest bulk path (PostgreSQL writes the
// rows without parsing, planning or unnesting arrays, and returns nothing
// per row). It refuses a DedupKey and Unique (COPY cannot skip a duplicate: use
// EnqueueMany) and, unlike EnqueueMany, accepts RunAt. docs/enqueue-fast.md
// compares the bulk paths.
//
// On a sharded Client the jobs without a LimitKey go to one shard,
// round-robin per call, and each job with one to its key's shard (as
// EnqueueMany): one COPY per shard, in shard order; every job is checked
// before any is written, and if a shard's COPY fails the shards before it
// stay written (the error names the shard).
func (c *Client) EnqueueManyFast(ctx context.Context, params []EnqueueParams) (_ int64, err error) {
	defer c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return 0, err
	}
	if c.set != nil {
		return c.shardedEnqueueManyFast(ctx, params)
	}
	return c.enqueueManyFast(ctx, c.db.(jobq.CopyDB), params)
}

// EnqueueManyFastTx is EnqueueManyFast in the caller's transaction.
func (c *Client) EnqueueManyFastTx(ctx context.Context, tx pgx.Tx, params []EnqueueParams) (_ int64, err error) {
	defer c.notMigrated(&err)
	if err := checkTx(ctx, tx); err != nil {
		return 0, err
	}
	if c.set != nil {
		return 0, c.errShardTx("EnqueueManyFastTx")
	}
	return c.enqueueManyFast(ctx, tx, params)
}

func (c *Client) enqueueManyFast(ctx context.Context, db jobq.CopyDB, params []EnqueueParams) (int64, error) {
	var n int64
	_, err := c.aroundEnqueue(ctx, params, false, func(ctx context.Context, jobs []jobq.Job) ([]Enqueued, error) {
		var err error
		n, err = c.jobs.EnqueueManyFast(ctx, c.in(db).(jobq.CopyDB), jobs)
		return nil, err
	})
	return n, err
}

// jobsOf turns a batch of typed args into enqueue requests (single:
// Enqueue's one job, whose errors name no index).
func jobsOf(params []EnqueueParams, single bool, known kindSet) ([]jobq.Job, error) {
	jobs := make([]jobq.Job, len(params))
	for i, p := range params {
		j, err := job(p.Args, p.Opts)
		if err == nil {
			err = known.check(j.Kind)
		}
		if err != nil {
			return nil, indexed(err, i, single)
		}
		jobs[i] = j
	}
	return jobs, nil
}

// indexed names the batch index i in err, unless single.
func indexed(err error, i int, single bool) error {
	if single {
		return err
	}
	return fmt.Errorf("job %d: %w", i, err)
}

// ValidateArgs reports what is wrong with a job (an error wrapping
// ErrInvalid), or nil when Enqueue would accept it. It touches no database.
func (c *Client) ValidateArgs(args Args, opts *EnqueueOpts) error {
	j, err := job(args, opts)
	if err != nil {
		return err
	}
	if err := c.kinds.check(j.Kind); err != nil {
		return err
	}
	return c.jobs.Validate(j)
}

// Send writes an outbox message on the pool. The outbox's point is the
// caller's transaction: use SendTx beside the business write.
func (c *Client) Send(ctx context.Context, m outbox.Message) (_ outbox.Sent, err error) {
	defer c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return outbox.Sent{}, err
	}
	if c.set != nil {
		rs, err := c.shardedSend(ctx, []outbox.Message{m})
		if err != nil {
			return outbox.Sent{}, err
		}
		return rs[0], nil
	}
	return c.shardSent(c.outbox.Send(ctx, c.db, m))
}

// shardSent sets the Client's shard on a result.
func (c *Client) shardSent(r outbox.Sent, err error) (outbox.Sent, error) {
	if err == nil {
		r.Shard = c.name
	}
	return r, err
}

// SendTx writes an outbox message in the caller's transaction: it is
// relayed if and only if tx commits.
func (c *Client) SendTx(ctx context.Context, tx pgx.Tx, m outbox.Message) (_ outbox.Sent, err error) {
	defer c.notMigrated(&err)
	if err := checkTx(ctx, tx); err != nil {
		return outbox.Sent{}, err
	}
	if c.set != nil {
		return outbox.Sent{}, c.errShardTx("SendTx")
	}
	return c.shardSent(c.outbox.Send(ctx, c.in(tx), m))
}

// SendMany writes many outbox messages in one statement on the pool; the
// result has one entry per message, in order.
func (c *Client) SendMany(ctx context.Context, msgs []outbox.Message) (_ []outbox.Sent, err error) {
	defer c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	if c.set != nil {
		return c.shardedSend(ctx, msgs)
	}
	rs, err := c.outbox.SendMany(ctx, c.db, msgs)
	for i := range rs {
		rs[i].Shard = c.name
	}
	return rs, err
}

// SendManyTx writes many outbox messages in the caller's transaction.
func (c *Client) SendManyTx(ctx context.Context, tx pgx.Tx, msgs []outbox.Message) (_ []outbox.Sent, err error) {
	defer c.notMigrated(&err)
	if err := checkTx(ctx, tx); err != nil {
		return nil, err
	}
	if c.set != nil {
		return nil, c.errShardTx("SendManyTx")
	}
	rs, err := c.outbox.SendMany(ctx, c.in(tx), msgs)
	for i := range rs {
		rs[i].Shard = c.name
	}
	return rs, err
}

// Receive records an inbox message once per (source, message id): a
// duplicate changes nothing and reports the stored one.
func (c *Client) Receive(ctx context.Context, m inbox.Message) (_ inbox.Received, err error) {
	defer c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return inbox.Received{}, err
	}
	if c.set != nil {
		rs, err := c.shardedReceive(ctx, []inbox.Message{m})
		if len(rs) != 1 {
			return inbox.Received{}, err
		}
		return rs[0], err // a conflict's result is the stored message's, as Receive's
	}
	return c.shardReceived(c.inbox.Receive(ctx, c.db, m))
}

// shardReceived sets the Client's shard on a result.
func (c *Client) shardReceived(r inbox.Received, err error) (inbox.Received, error) {
	r.Shard = c.name // a conflict's result carries it too
	return r, err
}

// ReceiveTx is Receive in the caller's transaction.
func (c *Client) ReceiveTx(ctx context.Context, tx pgx.Tx, m inbox.Message) (_ inbox.Received, err error) {
	defer c.notMigrated(&err)
	if err := checkTx(ctx, tx); err != nil {
		return inbox.Received{}, err
	}
	if c.set != nil {
		return inbox.Received{}, c.errShardTx("ReceiveTx")
	}
	return c.shardReceived(c.inbox.Receive(ctx, c.in(tx), m))
}

// ReceiveMany records many inbox messages in one statement on the pool;
// the result has one entry per message, in order (a message given twice
// is recorded once).
//
// On a sharded Client each message goes to the shard of its (source,
// message id) (InboxKey): one statement per shard. As on one database, a
// conflict does not stop the batch: every shard receives its messages,
// every result is returned (in order, each with its Shard), and the error
// joins one *inbox.ConflictError per conflicting message, its Index the
// message's in msgs. Any other error stops at its shard, naming it: the
// shards before it stay written.
func (c *Client) ReceiveMany(ctx context.Context, msgs []inbox.Message) (_ []inbox.Received, err error) {
	defer c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	if c.set != nil {
		return c.shardedReceive(ctx, msgs)
	}
	rs, err := c.inbox.ReceiveMany(ctx, c.db, msgs)
	for i := range rs {
		rs[i].Shard = c.name
	}
	return rs, err
}

// ReceiveManyTx is ReceiveMany in the caller's transaction.
func (c *Client) ReceiveManyTx(ctx context.Context, tx pgx.Tx, msgs []inbox.Message) (_ []inbox.Received, err error) {
	defer c.notMigrated(&err)
	if err := checkTx(ctx, tx); err != nil {
		return nil, err
	}
	if c.set != nil {
		return nil, c.errShardTx("ReceiveManyTx")
	}
	rs, err := c.inbox.ReceiveMany(ctx, c.in(tx), msgs)
	for i := range rs {
		rs[i].Shard = c.name
	}
	return rs, err
}

// ScheduleTimer schedules a one-shot timer on the pool.
func (c *Client) ScheduleTimer(ctx context.Context, t timers.Timer) (_ timers.Scheduled, err error) {
	defer c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return timers.Scheduled{}, err
	}
	if c.set != nil {
		rs, err := c.shardedSchedule(ctx, []timers.Timer{t})
		if err != nil {
			return timers.Scheduled{}, err
		}
		return rs[0], nil
	}
	r, err := c.timers.Schedule(ctx, c.db, t)
	r.Shard = c.name
	return r, err
}

// ScheduleTimerTx schedules a timer in the caller's transaction.
func (c *Client) ScheduleTimerTx(ctx context.Context, tx pgx.Tx, t timers.Timer) (_ timers.Scheduled, err error) {
	defer c.notMigrated(&err)
	if err := checkTx(ctx, tx); err != nil {
		return timers.Scheduled{}, err
	}
	if c.set != nil {
		return timers.Scheduled{}, c.errShardTx("ScheduleTimerTx")
	}
	r, err := c.timers.Schedule(ctx, c.in(tx), t)
	r.Shard = c.name
	return r, err
}

// ScheduleTimers schedules many timers in one statement on the pool; the
// result has one entry per timer, in order.
func (c *Client) ScheduleTimers(ctx context.Context, ts []timers.Timer) (_ []timers.Scheduled, err error) {
	defer c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	if c.set != nil {
		return c.shardedSchedule(ctx, ts)
	}
	rs, err := c.timers.ScheduleMany(ctx, c.db, ts)
	for i := range rs {
		rs[i].Shard = c.name
	}
	return rs, err
}

// ScheduleTimersTx is ScheduleTimers in the caller's transaction.
func (c *Client) ScheduleTimersTx(ctx context.Context, tx pgx.Tx, ts []timers.Timer) (_ []timers.Scheduled, err error) {
	defer c.notMigrated(&err)
	if err := checkTx(ctx, tx); err != nil {
		return nil, err
	}
	if c.set != nil {
		return nil, c.errShardTx("ScheduleTimersTx")
	}
	rs, err := c.timers.ScheduleMany(ctx, c.in(tx), ts)
	for i := range rs {
		rs[i].Shard = c.name
	}
	return rs, err
}

// CancelTimer cancels a timer that has not fired; it is idempotent. It
// fails with timers.ErrNotFound, ErrClaimed or ErrFinished otherwise.
func (c *Client) CancelTimer(ctx context.Context, id int64) (err error) {
	defer c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return err
	}
	if c.set != nil {
		return c.errShardID("CancelTimer")
	}
	return c.timers.Cancel(ctx, c.db, id)
}

// CancelTimerTx is CancelTimer in the caller's transaction.
func (c *Client) CancelTimerTx(ctx context.Context, tx pgx.Tx, id int64) (err error) {
	defer c.notMigrated(&err)
	if err := checkTx(ctx, tx); err != nil {
		return err
	}
	if c.set != nil {
		return c.errShardTx("CancelTimerTx")
	}
	return c.timers.Cancel(ctx, c.in(tx), id)
}

// CreateSchedule creates a cron schedule whose slots become job runs (the
// maintenance leader materialises them): an operator's schedule, which the
// reconcile of Config.PeriodicJobs never changes. A name taken is
// ErrScheduleExists.
//
// On a sharded Client a schedule lives on the shard of its name
// (ScheduleKey), whose maintenance leader makes its runs there.
func (c *Client) CreateSchedule(ctx context.Context, sp ScheduleSpec) (_ Schedule, err error) {
	defer c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return Schedule{}, err
	}
	if c.set != nil {
		return c.set.pick(routeSchedule(sp.Name)).CreateSchedule(ctx, sp)
	}
	return c.sched.Create(ctx, c.db, sp)
}

// DeleteSchedule deletes a schedule (ErrNotFound when there is none of
// that name).
func (c *Client) DeleteSchedule(ctx context.Context, name string) (err error) {
	defer c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return err
	}
	if c.set != nil {
		return c.set.pick(routeSchedule(name)).DeleteSchedule(ctx, name)
	}
	return c.sched.Delete(ctx, c.db, name)
}

// scheduleShard returns the Client of the shard of schedule name (c itself
// when not sharded).
func (c *Client) scheduleShard(name string) *Client {
	if c.set == nil {
		return c
	}
	return c.set.pick(routeSchedule(name))
}

// GetSchedule reads the schedule called name on its shard
// (ErrNotFound when there is none).
func (c *Client) GetSchedule(ctx context.Context, name string) (_ Schedule, err error) {
	defer c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return Schedule{}, err
	}
	sc := c.scheduleShard(name)
	return sc.sched.Get(ctx, sc.db, name)
}

// ListSchedules lists the schedules of every shard, by name.
func (c *Client) ListSchedules(ctx context.Context) (_ []Schedule, err error) {
	defer c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	if c.set == nil {
		return c.sched.List(ctx, c.db)
	}
	var out []Schedule
	for _, sc := range c.set.shards {
		ss, err := sc.sched.List(ctx, sc.db)
		if err != nil {
			return nil, fmt.Errorf("shard %s: %w", sc.name, workqtype.NotMigrated(err, sc.Schema()))
		}
		out = append(out, ss...)
	}
	slices.SortFunc(out, func(a, b Schedule) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// UpdateSchedule changes the schedule called name on its shard.
func (c *Client) UpdateSchedule(ctx context.Context, name string, ch ScheduleChanges) (_ Schedule, err error) {
	defer c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return Schedule{}, err
	}
	sc := c.scheduleShard(name)
	return sc.sched.Update(ctx, sc.db, name, ch)
}

// EnableSchedule enables the schedule called name on its shard.
func (c *Client) EnableSchedule(ctx context.Context, name string) (_ Schedule, err error) {
	defer c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return Schedule{}, err
	}
	sc := c.scheduleShard(name)
	return sc.sched.Enable(ctx, sc.db, name)
}

// DisableSchedule disables the schedule called name on its shard.
func (c *Client) DisableSchedule(ctx context.Context, name string) (_ Schedule, err error) {
	defer c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return Schedule{}, err
	}
	sc := c.scheduleShard(name)
	return sc.sched.Disable(ctx, sc.db, name)
}

// TriggerSchedule makes a run of the schedule called name now, on its
// shard, outside its slots: it does not move the next run, and works on
// a disabled schedule too. With overlap policy skip and the previous run
// still live it returns ErrScheduleOverlap and enqueues nothing, unless
// force is set.
func (c *Client) TriggerSchedule(ctx context.Context, name string, force bool) (_ TriggeredRun, err error) {
	defer c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return TriggeredRun{}, err
	}
	sc := c.scheduleShard(name)
	return sc.sched.TriggerNow(ctx, sc.db, name, force)
}
