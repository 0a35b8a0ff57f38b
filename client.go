// Package workq is the front door of workq, durable background work in
// PostgreSQL: one Client enqueues the four kinds of work (job runs, outbox
// messages, inbox messages and timers; on the pool or in the caller's
// pgx.Tx), runs the workers registered for them, and runs leader-elected
// maintenance and the observers, with one Start and one bounded Stop.
//
//	workers := workq.NewWorkers()
//	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[EmailArgs]) error {
//		return send(ctx, job.Args.To)
//	}))
//	client, err := workq.NewClient(pool, workq.Config{Workers: workers})
//	...
//	client.Start(ctx)
//	client.Enqueue(ctx, EmailArgs{To: "ann@example.com"}, nil)
//	...
//	client.Stop(ctx)
//
// The Client is the whole Go API, operators' reads and actions included
// (Get, List, Retry, Cancel, Delete, PauseQueue...). Packages outbox, inbox
// and timers hold the types of their kind of work; workqtype the types every
// package shares (this package re-exports those a Client's user needs); publish the outbox's
// publishers (webhook, NATS JetStream); migrate the schema's migrations;
// workqtest the helpers of tests; api the HTTP API, a user of the Client.
package workq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/workq/workq/internal/clienthook"
	"github.com/workq/workq/internal/db"
	"github.com/workq/workq/internal/dbschema"
	"github.com/workq/workq/internal/ha"
	"github.com/workq/workq/internal/inboxrt"
	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/maintain"
	"github.com/workq/workq/internal/outboxrt"
	"github.com/workq/workq/internal/schedule"
	"github.com/workq/workq/internal/timersrt"
	"github.com/workq/workq/internal/tracing"
	"github.com/workq/workq/internal/worker"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/workqtype"
)

// ErrInvalid is matched (errors.Is) by every error that rejects a request
// as invalid, from any workq package: the request changed nothing.
var ErrInvalid = workqtype.ErrInvalid

// ValidationError is the error of an invalid request; see
// workqtype.ValidationError.
type ValidationError = workqtype.ValidationError

// DB is what a statement runs on: a *pgxpool.Pool, a *pgx.Conn or a
// pgx.Tx.
type DB = workqtype.DB

// Permanent marks a handler's error as final: the item fails at once,
// whatever attempts it has left.
func Permanent(err error) error { return worker.Permanent(err) }

// Snooze makes a handler's item run again after d without using an
// attempt.
func Snooze(d time.Duration) error { return worker.Snooze(d) }

// ErrLeaseLost is the cause (context.Cause) of a handler context cancelled
// because this worker no longer holds the item's lease; the handler's
// result is then discarded.
var ErrLeaseLost = workqtype.ErrLeaseLost

// ErrShutdown is the cause (context.Cause) of a handler context cancelled
// because the Client is stopping and its drain timeout passed: the item is
// released, not failed.
var ErrShutdown = workqtype.ErrShutdown

// StopBound is how long Stop may take beyond DrainTimeout for the worker
// (then up to 10 s for the maintenance and 10 s for a global-limits
// leader): see Stop.
const StopBound = workqtype.StopBound

// Config configures a Client. The zero Config is a working one: it
// enqueues, and runs maintenance; add Workers to work.
type Config struct {
	Logger *slog.Logger // default: discard
	// Schema is the PostgreSQL schema of workq's tables (default "workq";
	// migrate it with migrate.Options.Schema or `workq migrate up
	// --schema`): every statement of the Client runs there, and its
	// wake-ups use that schema's NOTIFY channels, so Clients on two
	// schemas of one database never see each other's work. 1 to 54 of
	// a-z, 0-9 and _, not starting with a digit or pg_, and not
	// information_schema or public.
	Schema  string
	Workers *Workers // what this Client works; nil or empty: it only enqueues
	// Queues are the job-run queues this Client works, each with its
	// settings (River's Config.Queues); default: the queue "default". A
	// queue's MaxWorkers limits its handlers on every table it is worked
	// on (the outbox, inbox and timer queues of the same name too).
	Queues map[string]QueueConfig

	// The worker runtime's settings. A zero field takes its default; the
	// durations documented with "negative: none" turn the bound off.
	// Invalid values fail NewClient with an error matching ErrInvalid and
	// naming the field.

	// ID is recorded on claimed rows, in the run archive and as the
	// maintenance leader; default "<hostname>-<pid>".
	ID string
	// MaxWorkers is how many handlers of one queue run at once in this
	// Client, per table, for the queues whose QueueConfig sets none: 1 to
	// 10000, default 100.
	MaxWorkers int
	// FetchBatch is the most items one claim takes (beyond the free
	// handler slots, only what fast handlers start within 20ms): 1 to
	// 10000, default 1000.
	FetchBatch int
	// FetchPollInterval is how often an idle queue is polled when no
	// notification arrives: at least 10ms, default 1s.
	FetchPollInterval time.Duration
	// PollOnly never LISTENs (PgBouncer transaction pooling): idle queues
	// are only polled.
	PollOnly bool
	// NoReclaim turns off the claim loops' own reaping of their queue's
	// expired leases before a claim (the maintenance's reap task does it
	// too).
	NoReclaim bool
	// LeaseTTL is how long a claim holds an item without a heartbeat
	// (heartbeats run every LeaseTTL/3): at least 1s, default 30s.
	LeaseTTL time.Duration
	// JobTimeout is the hard deadline of one handler run, of every kind of
	// work (River's JobTimeout; a Worker's Timeout overrides it per kind):
	// default 5m, negative: none.
	JobTimeout time.Duration
	// DrainTimeout is how long in-flight handlers may finish on Stop:
	// default 10s, negative: none (they are cancelled at once).
	DrainTimeout time.Duration
	// BackoffBase and BackoffCap are the default retry delay of a failed
	// attempt, random(0, min(BackoffBase*2^attempt, BackoffCap)): base
	// positive, default 500ms; cap at least the base, default 30s.
	BackoffBase, BackoffCap time.Duration
	// CompletionFlushInterval and CompletionFlushBatch: finished
	// attempts are completed in batches, at least this often (0 to 1s,
	// default 5ms) or as soon as this many wait (default 1000).
	CompletionFlushInterval time.Duration
	CompletionFlushBatch    int
	// RunsDir, when set, gets each attempt's meta.json and attempt.log
	// (RunsDir/TABLE/ID/RUN_ID); its attempt directories are deleted
	// RunsDirRetention after they ended (default 7 days, negative: kept),
	// checked every RunsDirPruneInterval (at least 1s, default 1m).
	RunsDir              string
	RunsDirRetention     time.Duration
	RunsDirPruneInterval time.Duration

	// OutboxQueues, InboxQueues and TimerQueues are the queues whose
	// outbox messages, inbox messages and timers this Client's handlers
	// work; default ["default"].
	OutboxQueues, InboxQueues, TimerQueues []string
	Relay                                  outbox.RelayOptions // the outbox relay's options
	// MaxAttempts is the default max attempts of enqueued items that set
	// none (4); MaxPayloadBytes limits every payload (1 MiB, at most
	// 256 MiB); NotifyDebounce sends at most one NOTIFY per queue per this
	// (5ms; negative: none).
	MaxAttempts     int
	MaxPayloadBytes int
	NotifyDebounce  time.Duration
	// TimerNotifyWithin: a timer scheduled due within this of now
	// (database clock) wakes its queue's workers with a NOTIFY; one due
	// later takes no NOTIFY and is found by the workers themselves, at
	// their poll or when they wait for their queue's next due timer. Set
	// it to the FetchPollInterval of the workers of the timers when they
	// poll less often than this Client, or a timer due before their next
	// poll may start up to that poll late. Default: this Client's
	// FetchPollInterval (1s); at most 24h; negative: only timers due now
	// notify.
	TimerNotifyWithin time.Duration
	Maintenance       MaintenanceConfig
	// MetricsRegisterer, when set, gets workq's Prometheus collectors
	// (workq_worker_*, workq_reaped_total, workq_maintenance_*, ...;
	// docs/operations.md): the worker's and the maintenance's of this
	// Client, a sharded Client's with its shards'. Serve its registry
	// yourself (promhttp). Register one Client per registerer: a second
	// one's collectors are refused as duplicates (NewClient fails). Nil:
	// no metrics.
	MetricsRegisterer prometheus.Registerer
	// TracerProvider, when set, traces enqueues and handler runs (spans
	// workq.enqueue and workq.process, linked through the item). Nil: the
	// global provider for enqueue spans, and no handler spans.
	TracerProvider trace.TracerProvider
	// SkipUnknownKindCheck lets a Client with job workers enqueue job
	// kinds it has no worker for (ErrUnknownKind otherwise).
	SkipUnknownKindCheck bool
	// RetryPolicy is the retry delay of every failed attempt (every kind
	// of work) whose handler did not choose one (a Worker's NextRetry,
	// RetryAt); nil: the full-jitter backoff of BackoffBase and
	// BackoffCap.
	RetryPolicy RetryPolicy
	// EnqueueMiddleware runs around every job enqueue, WorkMiddleware
	// around every handler run; the first of each is the outermost.
	EnqueueMiddleware []EnqueueMiddleware
	WorkMiddleware    []WorkMiddleware
	// Sharding is how a Client of NewShardedClient drains its shards.
	Sharding ShardingConfig
	// PeriodicJobs are the cron schedules this code declares (River's
	// Config.PeriodicJobs). At Start the Client makes the stored schedules
	// what they declare: it creates the missing, updates the changed,
	// disables (does not delete) the declared ones no longer listed and
	// enables the re-listed; schedules created through CreateSchedule, the
	// API or the CLI are never touched. While two deploys run side by
	// side, the declarations of the newer one win (docs/schedules.md,
	// "Periodic jobs declared in code"). Nil: this Client declares none
	// and takes no part; a non-nil empty slice declares that there are
	// none (every declared schedule is disabled).
	PeriodicJobs []*PeriodicJob

	// FlowLimits are flow-control rules declared in code (FlowLimit; with
	// the rules of each worker that implements WorkerWithFlowLimits):
	// Start sets them on every shard (SetFlowLimit), so a deploy carries
	// its limits. An operator's change to one of them lasts until the
	// next Start; a rule no longer declared stays until it is removed
	// (RemoveFlowLimit, workq flow remove). Invalid rules fail NewClient.
	FlowLimits []FlowLimit
}

// Client is workq's front door. It is safe for concurrent use; share one
// per process so NOTIFY debouncing works across goroutines.
type Client struct {
	pool   *pgxpool.Pool
	rw     dbschema.Rewriter // the schema's
	db     workqtype.TxDB    // pool in the schema
	log    *slog.Logger
	jobs   *jobq.Client
	outbox *outboxrt.Client
	inbox  *inboxrt.Client
	timers *timersrt.Client
	sched  *schedule.Store
	worker *worker.Worker    // nil: nothing to work
	maint  *maintain.Service // nil: Maintenance.Disabled
	// periodic reconciles Config.PeriodicJobs (periodic.go); nil: none.
	periodic *periodicJobs

	mu   sync.Mutex // held by Start
	life clientLife

	// enqueueMW is Config.EnqueueMiddleware (copied at NewClient).
	enqueueMW []EnqueueMiddleware
	run       handlerRuntime // for workqtest (handler_hook.go)

	// name is the Client's shard (DefaultShard for NewClient); a sharded
	// Client's front has set, its shards' Clients view (they are not
	// started on their own).
	name  string
	set   *shardSet
	view  bool
	ev    *clientEvents // Subscribe's (events.go)
	kinds kindSet       // the job kinds it accepts (nil: any; unknown_kind.go)
	// limits is the leader of Sharding.GlobalLimits the Client runs (a
	// sharded Client's front, or a Client of NewShardedClient's one
	// shard); nil: none.
	limits *globalLimits
	// flow are the flow limits declared in code (Config.FlowLimits and
	// the workers'), set at Start.
	flow []FlowLimit
}

// NewClient validates cfg and returns a Client on pool: a Client of one
// shard, named DefaultShard.
func NewClient(pool *pgxpool.Pool, cfg Config) (*Client, error) {
	if pool == nil {
		return nil, errors.New("workq: NewClient needs a pool")
	}
	return newClient(pool, cfg, DefaultShard, nil, 0)
}

// newClient returns the Client of one shard; shared and rank are the
// handler slots it shares with the other shards' (nil: its own).
func newClient(pool *pgxpool.Pool, cfg Config, name string, shared *worker.Shared, rank int) (*Client, error) {
	wc := cfg.workerConfig()
	rw, schemaErr := dbschema.NewRewriter(cfg.Schema)
	if schemaErr != nil {
		schemaErr = workqtype.InvalidErr("Schema", schemaErr)
	}
	if err := errors.Join(schemaErr, validateWorker(wc), cfg.Maintenance.Validate(), validateTimers(cfg.timerOptions()), validateFlowLimits(cfg.FlowLimits)); err != nil {
		return nil, fmt.Errorf("workq config: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Client{pool: pool, rw: rw, db: rw.WrapTx(pool), log: log, enqueueMW: slices.Clone(cfg.EnqueueMiddleware),
		run: newHandlerRuntime(cfg, wc), name: name, ev: newClientEvents(log), kinds: newKindSet(cfg), flow: declaredFlowLimits(cfg)}
	clienthook.Register(clientJob)
	clienthook.RegisterAPI(clientAPI)
	registerSurface()
	c.jobs = jobq.New(jobq.Options{MaxAttempts: cfg.MaxAttempts, NotifyDebounce: cfg.NotifyDebounce,
		MaxPayloadBytes: cfg.MaxPayloadBytes, TracerProvider: cfg.TracerProvider})
	c.outbox = outboxrt.NewClient(outboxrt.ClientOptions{MaxAttempts: cfg.MaxAttempts, NotifyDebounce: cfg.NotifyDebounce,
		MaxPayloadBytes: cfg.MaxPayloadBytes, TracerProvider: cfg.TracerProvider})
	c.inbox = inboxrt.NewClient(inboxrt.ClientOptions{MaxAttempts: cfg.MaxAttempts, NotifyDebounce: cfg.NotifyDebounce,
		MaxPayloadBytes: cfg.MaxPayloadBytes})
	c.timers = timersrt.NewClient(cfg.timerOptions())
	c.sched = schedule.NewStore(schedule.StoreOptions{MaxPayloadBytes: cfg.MaxPayloadBytes, Schema: cfg.Schema})
	periodic, err := newPeriodicJobs(cfg, c.sched, log)
	if err != nil {
		return nil, fmt.Errorf("workq config: %w", err)
	}
	c.periodic = periodic

	m, err := clientMetrics(cfg)
	if err != nil {
		return nil, fmt.Errorf("workq config: MetricsRegisterer: %w", err)
	}
	var observers []worker.Observer
	if m != nil {
		observers = append(observers, m.Worker())
		if cfg.Maintenance.observer == nil {
			cfg.Maintenance.observer = m.Maintenance()
		}
	}
	if cfg.TracerProvider != nil {
		observers = append(observers, tracing.NewObserver(tracing.Options{TracerProvider: cfg.TracerProvider}))
	}
	observers = append(observers, c.ev.observer(name))
	if cfg.Workers != nil {
		cfg.Workers.inUse = true
	}
	if cfg.Workers != nil && !cfg.Workers.empty() {
		w, err := newWorker(pool, cfg, wc, worker.Options{Logger: log, Observer: worker.Observers(observers...),
			Schema: rw.Schema(), Shared: shared, Rank: rank, Shard: name})
		if err != nil {
			return nil, err
		}
		c.worker = w
		if m != nil {
			m.Watch(w)
		}
	}
	if !cfg.Maintenance.Disabled {
		rt := wc.WithDefaults() // the runtime's lease and owner
		svc, err := newMaintenance(c.db, cfg.Maintenance.withDefaults(), rt.ID, rt.Lease, log)
		if err != nil {
			return nil, err
		}
		c.maint = svc
	}
	return c, nil
}

// newWorker returns the runtime with a source for each kind of work that
// has handlers.
func newWorker(pool *pgxpool.Pool, cfg Config, wc worker.Config, o worker.Options) (*worker.Worker, error) {
	ws := cfg.Workers
	w, err := worker.New(pool, wc, o)
	if err != nil {
		return nil, err
	}
	mws := slices.Clone(cfg.WorkMiddleware)
	wrap := func(h worker.HandlerFunc) worker.HandlerFunc {
		if h == nil {
			return nil
		}
		return wrapHandler(h, mws, cfg.RetryPolicy)
	}
	for kind, h := range ws.jobs {
		if err := w.Register(kind, wrap(h)); err != nil {
			return nil, err
		}
	}
	queues := func(q []string) []string {
		if len(q) == 0 {
			return []string{"default"}
		}
		return q
	}
	if ws.hasOutbox() {
		relay := outboxrt.NewRelay(cfg.Relay)
		for topic, h := range ws.outbox {
			if err := relay.Handle(topic, wrap(h.h), h.opts...); err != nil {
				return nil, err
			}
		}
		if ws.outboxDefault != nil {
			relay.HandleDefault(wrap(ws.outboxDefault))
		}
		if err := w.AddSource(relay.Source(queues(cfg.OutboxQueues)...)); err != nil {
			return nil, err
		}
	}
	if ws.hasInbox() {
		p := inboxrt.NewProcessor()
		for topic, h := range ws.inbox {
			if err := p.Handle(topic, wrap(h)); err != nil {
				return nil, err
			}
		}
		if ws.inboxDefault != nil {
			p.HandleDefault(wrap(ws.inboxDefault))
		}
		if err := w.AddSource(p.Source(queues(cfg.InboxQueues)...)); err != nil {
			return nil, err
		}
	}
	if ws.hasTimers() {
		p := timersrt.NewProcessor()
		for topic, h := range ws.timers {
			if err := p.Handle(topic, wrap(h)); err != nil {
				return nil, err
			}
		}
		if ws.timersDefault != nil {
			p.HandleDefault(wrap(ws.timersDefault))
		}
		if err := w.AddSource(p.Source(queues(cfg.TimerQueues)...)); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// ErrSchemaBehind is returned by Start when the Client's schema is not
// migrated to the version this code needs (never migrated: version 0).
var ErrSchemaBehind = workqtype.ErrSchemaBehind

// ErrNotMigrated is matched by the error of Start, and of every enqueue,
// send, receive, timer and schedule call, on a schema that was never
// migrated (or whose tables are gone): one message, naming the command
// that migrates it. Start's error also matches ErrSchemaBehind.
var ErrNotMigrated = workqtype.ErrNotMigrated

// checkSchema fails when the schema is older than this code's migrations,
// naming the command that fixes it (never migrated: ErrNotMigrated, with the
// message every other call gives then). A newer schema is fine (a rolling
// deploy runs the new migrations before the last old process stops).
func (c *Client) checkSchema(ctx context.Context) error {
	v, err := db.SchemaVersion(ctx, c.db)
	if err != nil {
		return fmt.Errorf("workq: read the schema version: %w", err)
	}
	latest := db.LatestVersion()
	if v == 0 {
		return workqtype.NotMigratedErr(c.Schema(), fmt.Errorf("%w: schema %q is at version 0, this workq needs %d", ErrSchemaBehind, c.Schema(), latest))
	}
	if v < latest {
		return fmt.Errorf("%w: schema %q is at version %d, this workq needs %d: run `%s` "+
			"(or Up of package migrate with Options{Schema: %q})", ErrSchemaBehind, c.Schema(), v, latest,
			worker.MigrateCommand(c.Schema()), c.Schema())
	}
	return nil
}

// notMigrated turns *err into ErrNotMigrated, with Start's message, when
// it is the database saying that the Client's schema or one of its tables
// does not exist (workqtype.NotMigrated): the enqueue, send, receive, timer
// and schedule calls defer it.
func (c *Client) notMigrated(err *error) { *err = workqtype.NotMigrated(*err, c.Schema()) }

// ErrNotRunning is returned by Stop when the Client was never started or
// has already stopped.
var ErrNotRunning = errors.New("workq: client not running")

// Start checks that the schema is migrated (ErrSchemaBehind otherwise, and
// ErrNotMigrated too when it never was),
// starts the worker (when there are handlers) and the maintenance (unless
// disabled), and returns at once. Cancelling ctx does not stop the Client
// (Stop does), but its values reach every handler's context.
func (c *Client) Start(ctx context.Context) error {
	if err := checkCtx(ctx); err != nil {
		return err
	}
	ctx = withClient(ctx, c) // for ClientFromContext in handlers
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.view {
		return fmt.Errorf("workq: shard %s is part of a sharded Client: start that one", c.name)
	}
	run, err := c.life.Begin(ctx)
	if err != nil {
		return fmt.Errorf("workq: client: %w", err) // a Client starts once
	}
	if err := c.startAll(ctx); err != nil {
		run.Abort() // not started: Start may be tried again
		return err
	}
	c.life.serve(run, c.stopAll)
	return nil
}

// startAll starts what the Client runs: each shard's parts on a sharded
// Client.
func (c *Client) startAll(ctx context.Context) error {
	if err := c.applyFlowLimits(ctx); err != nil {
		return err
	}
	if c.set != nil {
		if err := c.startPeriodic(ctx); err != nil {
			return err
		}
		if err := c.startSharded(ctx); err != nil {
			c.stopPeriodic()
			return err
		}
		return nil
	}
	if err := c.checkSchema(ctx); err != nil {
		return err
	}
	c.checkSyncCommit(ctx)
	if c.limits != nil {
		c.limits.zeroUnset(ctx, []*Client{c}, []bool{true}, c.log)
	}
	if err := c.startPeriodic(ctx); err != nil {
		return err
	}
	if err := c.startParts(ctx); err != nil {
		c.stopPeriodic()
		return err
	}
	if c.limits != nil {
		c.limits.start(ctx)
	}
	return nil
}

// startParts starts the worker and the maintenance.
func (c *Client) startParts(ctx context.Context) error {
	if c.worker != nil {
		if err := c.worker.Start(ctx); err != nil {
			return err
		}
	}
	if c.maint != nil {
		if err := c.maint.Start(ctx); err != nil {
			if c.worker != nil {
				_ = c.worker.Stop(context.WithoutCancel(ctx))
			}
			return err
		}
	}
	return nil
}

// checkSyncCommit logs a warning when the pool's sessions do not wait for
// synchronous standbys (synchronous_commit neither on nor remote_apply),
// and when standbys stream and none is synchronous: an enqueue or
// completion acknowledged then may be lost by a failover (design §26).
// ConfigurePool pins it; the Client cannot change a pool it was given. A
// failed check is logged and ignored: the schema check just succeeded,
// and a Start does not fail for want of a warning.
func (c *Client) checkSyncCommit(ctx context.Context) {
	v, err := ha.SessionSyncCommit(ctx, c.pool)
	switch {
	case err != nil:
		c.log.Warn("workq: could not read the session's synchronous_commit", "err", err)
	case !ha.SyncCommitSafe(v):
		c.log.Warn("workq: the pool's sessions run with synchronous_commit="+v+": a failover may lose acknowledged enqueues and completions; "+
			"configure the pool with workq.ConfigurePool (docs/operations.md, High availability)", "synchronous_commit", v)
	}
	// The maintenance task "replication" checks the standbys again every
	// minute on the leader; this is the process's own warning at start.
	if r, err := ha.CheckReplication(ctx, c.pool); err == nil && r.State() == ha.Unsafe {
		c.log.Warn("workq: standbys stream from the database and none is synchronous: a failover may lose acknowledged enqueues and completions "+
			"(docs/operations.md, High availability)", "standbys", r.Standbys, "synchronous_standby_names", r.SynchronousStandbyNames)
	}
}

// maintenanceStopBound bounds the end of the maintenance in Stop (as
// `workq maintain` always did): a task round in flight is cancelled and
// the leadership released within it, whatever becomes of Stop's ctx.
const maintenanceStopBound = 10 * time.Second

// Stop stops claiming, lets in-flight handlers finish for the worker's
// drain timeout (or until ctx ends), releases the rest, flushes every
// completion and ends the maintenance. It returns within the drain timeout
// plus the stop bound, whatever the database does: StopBound plus
// 1 s for the worker, then 10 s for the maintenance, and on a sharded
// Client with GlobalLimits up to 10 s more for its leader (about 16 s, or
// 26 s, at worst).
//
// A ctx that has ended (even before Stop is called, as the context of
// signal.NotifyContext after Ctrl-C) only cuts the drain short: handlers
// are cancelled at once (ErrShutdown), and every lease the Client
// holds (items, the maintenance leadership) is still released or completed
// before Stop returns, within the stop bound. Stop returns nil
// then, unless a lease could not be released in that bound (the database
// unreachable): the error wraps ctx.Err(), and those leases expire.
//
// Stop may be called from any goroutine: calls made during the stop wait
// for it and return its result; a call after it returns ErrNotRunning. A
// Client starts once.
func (c *Client) Stop(ctx context.Context) error {
	if err := checkCtx(ctx); err != nil {
		return err
	}
	return c.stopLife(ctx)
}

// stopAll stops what startAll started, the drain cut short when ctx ends.
func (c *Client) stopAll(ctx context.Context) error {
	c.stopPeriodic()
	defer c.closeEvents() // after the last completion is published
	if c.set != nil {
		return c.stopSharded(ctx)
	}
	defer c.limits.stopAndWait()() // beside the worker and the maintenance
	return c.stopParts(ctx)
}

// stopParts stops the worker and the maintenance.
func (c *Client) stopParts(ctx context.Context) error {
	var errs []error
	if c.worker != nil {
		if err := c.worker.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop worker: %w", err))
		}
	}
	if c.maint != nil {
		// Not ctx: its end cancels the tasks anyway, and the leadership is
		// released within the bound.
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), maintenanceStopBound)
		if err := c.maint.Stop(mctx); err != nil {
			errs = append(errs, fmt.Errorf("stop maintenance: %w", err))
		}
		cancel()
	}
	return errors.Join(errs...)
}

// checkCtx and checkTx are the guard of every Client method that takes a
// context (and a transaction): a nil one is refused with ErrInvalid
// instead of a panic deep in pgx.
var (
	checkCtx = workqtype.CheckCtx
	checkTx  = workqtype.CheckTx
)

// Run starts the Client, runs until ctx ends, then stops it (see Stop).
func (c *Client) Run(ctx context.Context) error {
	if err := checkCtx(ctx); err != nil {
		return err
	}
	if err := c.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	<-ctx.Done()
	return c.Stop(context.Background())
}

// Stats counts what a Client's workers did since it started; see
// workqtype.Stats.
type Stats = workqtype.Stats

// Stats returns the worker's counters (zero without handlers); a sharded
// Client's are the sum over its shards (each shard's: Shard(name).Stats).
func (c *Client) Stats() Stats {
	if c.set != nil {
		var sum Stats
		for _, sc := range c.set.shards {
			sum = sum.Add(sc.Stats())
		}
		return sum
	}
	if c.worker == nil {
		return Stats{}
	}
	return c.worker.Stats()
}

// Pool returns the Client's pool.
//
// On a sharded Client it is the FIRST SHARD'S ONLY: an id, a key or a
// transaction opened on it is that database's, not the queue's. Use
// Shard(name).Pool() with the shard of the item (Enqueued.Shard,
// Job.Shard) or of the key (ShardFor, ShardForArgs) instead.
func (c *Client) Pool() *pgxpool.Pool { return c.pool }

// Schema returns the Client's schema (Config.Schema, or "workq").
func (c *Client) Schema() string { return c.rw.Schema() }

// InSchema returns db (a pool, connection or transaction) with every
// statement sent through it that names workq's tables as `workq.<table>`
// put into the Client's schema: for your own reads of workq's tables
// (docs/schema.md) in a schema other than the default. The Client's own
// methods need no such thing. In the default schema it is db itself; a
// pgx.Tx stays one.
func (c *Client) InSchema(db workqtype.TxDB) workqtype.TxDB { return c.rw.WrapTx(db) }

// in returns db in the Client's schema (db itself in the default one).
func (c *Client) in(db DB) DB { return c.rw.Wrap(db) }

var _ DB = pgx.Tx(nil)
