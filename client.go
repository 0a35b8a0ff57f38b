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
// Feature packages (outbox, inbox, timers, schedule) hold each kind's
// message types and its operator functions; workqtype holds the types every
// package shares; admin, api and metrics serve operators.
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
	"go.opentelemetry.io/otel/trace"

	"github.com/workq/workq/inbox"
	"github.com/workq/workq/internal/clienthook"
	"github.com/workq/workq/internal/db"
	"github.com/workq/workq/internal/dbschema"
	"github.com/workq/workq/internal/ha"
	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/maintain"
	"github.com/workq/workq/internal/metrics"
	"github.com/workq/workq/internal/schedule"
	"github.com/workq/workq/internal/tracing"
	"github.com/workq/workq/internal/worker"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/timers"
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
var ErrLeaseLost = worker.ErrLeaseLost

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
	// Worker is the runtime's settings (concurrency, batch, lease, poll,
	// drain...); Worker.Queues are the job-run queues worked. Zero fields
	// take worker.DefaultConfig's values.
	Worker worker.Config
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
	Maintenance     MaintenanceConfig
	// Metrics, when set, is told about the worker and maintenance (and
	// serves them through its Handler). Nil: no metrics.
	Metrics *metrics.Metrics
	// TracerProvider, when set, traces enqueues and handler runs (spans
	// workq.enqueue and workq.process, linked through the item). Nil: the
	// global provider for enqueue spans, and no handler spans.
	TracerProvider trace.TracerProvider
	// Observer is told what the worker runtime does, in addition to
	// Metrics and tracing; OnResult is called once per finished attempt.
	Observer worker.Observer
	OnResult func(worker.Result)
	// Queues, when set, are the job-run queues this Client works (instead
	// of Worker.Queues), each with its settings, as River's Config.Queues:
	// a queue's MaxWorkers limits its handlers on every table it is worked
	// on (Worker.QueueConcurrency).
	Queues map[string]QueueConfig
	// RetryPolicy is the retry delay of every failed attempt (every kind
	// of work) whose handler did not choose one (a Worker's NextRetry,
	// RetryAt); nil: the full-jitter backoff of Worker.BackoffBase and
	// Worker.BackoffCap.
	RetryPolicy RetryPolicy
	// EnqueueMiddleware runs around every job enqueue, WorkMiddleware
	// around every handler run; the first of each is the outermost.
	EnqueueMiddleware []EnqueueMiddleware
	WorkMiddleware    []WorkMiddleware
	// Sharding is how a Client of NewShardedClient drains its shards.
	Sharding ShardingConfig
}

// Client is workq's front door. It is safe for concurrent use; share one
// per process so NOTIFY debouncing works across goroutines.
type Client struct {
	pool   *pgxpool.Pool
	rw     dbschema.Rewriter // the schema's
	db     workqtype.TxDB    // pool in the schema
	log    *slog.Logger
	jobs   *jobq.Client
	outbox *outbox.Client
	inbox  *inbox.Client
	timers *timers.Client
	sched  *schedule.Store
	worker *worker.Worker    // nil: nothing to work
	maint  *maintain.Service // nil: Maintenance.Disabled

	mu   sync.Mutex // held by Start
	life clientLife

	// enqueueMW is Config.EnqueueMiddleware (copied at NewClient).
	enqueueMW []EnqueueMiddleware
	run       handlerRuntime // for workqtest (handler_hook.go)

	// name is the Client's shard (DefaultShard for NewClient); a sharded
	// Client's front has set, its shards' Clients view (they are not
	// started on their own).
	name string
	set  *shardSet
	view bool
	// limits is the leader of Sharding.GlobalLimits the Client runs (a
	// sharded Client's front, or a Client of NewShardedClient's one
	// shard); nil: none.
	limits *globalLimits
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
	wc, err := cfg.workerConfig()
	if err != nil {
		return nil, fmt.Errorf("workq config: %w", err)
	}
	cfg.Worker = wc
	rw, schemaErr := dbschema.NewRewriter(cfg.Schema)
	if schemaErr != nil {
		schemaErr = workqtype.InvalidErr("Schema", schemaErr)
	}
	if err := errors.Join(schemaErr, cfg.Worker.Validate(), cfg.Maintenance.Validate()); err != nil {
		return nil, fmt.Errorf("workq config: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Client{pool: pool, rw: rw, db: rw.WrapTx(pool), log: log, enqueueMW: slices.Clone(cfg.EnqueueMiddleware),
		run: newHandlerRuntime(cfg), name: name}
	clienthook.Register(clientJob)
	c.jobs = jobq.New(jobq.Options{MaxAttempts: cfg.MaxAttempts, NotifyDebounce: cfg.NotifyDebounce,
		MaxPayloadBytes: cfg.MaxPayloadBytes, TracerProvider: cfg.TracerProvider})
	c.outbox = outbox.NewClient(outbox.ClientOptions{MaxAttempts: cfg.MaxAttempts, NotifyDebounce: cfg.NotifyDebounce,
		MaxPayloadBytes: cfg.MaxPayloadBytes, TracerProvider: cfg.TracerProvider})
	c.inbox = inbox.NewClient(inbox.ClientOptions{MaxAttempts: cfg.MaxAttempts, NotifyDebounce: cfg.NotifyDebounce,
		MaxPayloadBytes: cfg.MaxPayloadBytes})
	c.timers = timers.NewClient(timers.ClientOptions{MaxAttempts: cfg.MaxAttempts, NotifyDebounce: cfg.NotifyDebounce,
		MaxPayloadBytes: cfg.MaxPayloadBytes})
	c.sched = schedule.NewStore(schedule.StoreOptions{MaxPayloadBytes: cfg.MaxPayloadBytes, Schema: cfg.Schema})

	var observers []worker.Observer
	if cfg.Metrics != nil {
		observers = append(observers, cfg.Metrics.Worker())
		if cfg.Maintenance.Observer == nil {
			cfg.Maintenance.Observer = cfg.Metrics.Maintenance()
		}
	}
	if cfg.TracerProvider != nil {
		observers = append(observers, tracing.NewObserver(tracing.Options{TracerProvider: cfg.TracerProvider}))
	}
	observers = append(observers, cfg.Observer)
	wcfg := cfg.Worker
	if cfg.Workers != nil {
		cfg.Workers.inUse = true
	}
	if cfg.Workers != nil && !cfg.Workers.empty() {
		w, err := newWorker(pool, cfg, worker.Options{Logger: log, Observer: worker.Observers(observers...), OnResult: cfg.OnResult,
			Schema: rw.Schema(), Shared: shared, Rank: rank, Shard: name})
		if err != nil {
			return nil, err
		}
		c.worker = w
		if cfg.Metrics != nil {
			cfg.Metrics.Watch(w)
		}
	}
	if !cfg.Maintenance.Disabled {
		lease := wcfg.Lease
		if lease == 0 {
			lease = worker.DefaultConfig().Lease
		}
		owner := wcfg.ID
		if owner == "" {
			owner = workqtype.DefaultOwner()
		}
		m, err := newMaintenance(c.db, cfg.Maintenance.withDefaults(), owner, lease, log)
		if err != nil {
			return nil, err
		}
		c.maint = m
	}
	return c, nil
}

// newWorker returns the runtime with a source for each kind of work that
// has handlers.
func newWorker(pool *pgxpool.Pool, cfg Config, o worker.Options) (*worker.Worker, error) {
	ws := cfg.Workers
	w, err := worker.New(pool, cfg.Worker, o)
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
		relay := outbox.NewRelay(cfg.Relay)
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
		p := inbox.NewProcessor()
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
		p := timers.NewProcessor()
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
var ErrSchemaBehind = db.ErrSchemaBehind

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
	if c.set != nil {
		return c.startSharded(ctx)
	}
	if err := c.checkSchema(ctx); err != nil {
		return err
	}
	c.checkSyncCommit(ctx)
	if c.limits != nil {
		c.limits.zeroUnset(ctx, []*Client{c}, []bool{true}, c.log)
	}
	if err := c.startParts(ctx); err != nil {
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
// plus the stop bound, whatever the database does: worker.StopBound plus
// 1 s for the worker, then 10 s for the maintenance, and on a sharded
// Client with GlobalLimits up to 10 s more for its leader (about 16 s, or
// 26 s, at worst).
//
// A ctx that has ended (even before Stop is called, as the context of
// signal.NotifyContext after Ctrl-C) only cuts the drain short: handlers
// are cancelled at once (worker.ErrShutdown), and every lease the Client
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

// Stats returns the worker's counters (zero without handlers); a sharded
// Client's are the sum over its shards (each shard's: Shard(name).Stats).
func (c *Client) Stats() worker.Stats {
	if c.set != nil {
		var sum worker.Stats
		for _, sc := range c.set.shards {
			sum = sum.Add(sc.Stats())
		}
		return sum
	}
	if c.worker == nil {
		return worker.Stats{}
	}
	return c.worker.Stats()
}

// Worker returns the runtime under the Client (nil when it has no
// handlers), for metrics and tests.
//
// On a sharded Client it is the FIRST SHARD'S ONLY: each shard has its own
// runtime (its own claims, counters and Stop), so use Shard(name).Worker()
// for each, and Stats for the sum.
func (c *Client) Worker() *worker.Worker {
	if c.set != nil {
		return c.set.shards[0].worker
	}
	return c.worker
}

// Maintenance returns the maintenance service (nil when disabled).
//
// On a sharded Client it is the FIRST SHARD'S ONLY: each shard has its own
// service and leader, so use Shard(name).Maintenance() for each.
func (c *Client) Maintenance() *maintain.Service {
	if c.set != nil {
		return c.set.shards[0].maint
	}
	return c.maint
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
// workq statement sent through it put into the Client's schema, for the
// operator functions that take a DB (admin, inbox, outbox, timers,
// lock...). In the default schema it is db itself; a pgx.Tx stays one.
func (c *Client) InSchema(db workqtype.TxDB) workqtype.TxDB { return c.rw.WrapTx(db) }

// in returns db in the Client's schema (db itself in the default one).
func (c *Client) in(db DB) DB { return c.rw.Wrap(db) }

var _ DB = pgx.Tx(nil)
