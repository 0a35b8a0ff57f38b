// Package worker is workq's one runtime: for every (work table, queue) it
// serves it runs one claim loop, a bounded pool of handler goroutines,
// batched heartbeats with a local lease deadline, batched completions,
// LISTEN/NOTIFY wake-ups with polling as the fallback, and a bounded,
// graceful stop. Each kind of work is a thin Source on it: job runs (handlers
// registered by kind with Register) are built in; other tables plug in with
// AddSource. Embed it in a service or run `workq worker`.
package worker

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/dbschema"
	"github.com/workq/workq/internal/ha"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/outage"
	"github.com/workq/workq/internal/startstop"
	"github.com/workq/workq/workqtype"
)

// Options are the worker's collaborators; all are optional.
type Options struct {
	Logger   *slog.Logger // default: discard
	OnResult func(Result) // called once per finished attempt after its flush
	// Observer is told about claims, handler runs, completions and lost
	// leases (metrics, tracing); nil costs nothing. See Observer.
	Observer Observer
	// Schema is the workq schema the worker works in (default "workq"):
	// its claims, completions and wake-ups (the channels
	// <schema>_<table>) are that schema's.
	Schema string
	// Shared, when set, is the handler slots this worker shares with
	// other workers (the shards of a sharded workq.Client): see Shared.
	// Rank orders the workers for SharedOptions.DrainFirst (lowest
	// first).
	Shared *Shared
	Rank   int
	// Shard is the name of the database the worker works, set on every
	// Job it hands to a handler (Job.Shard): a workq.Client sets its shard
	// ("default" for NewClient's). "" when unset.
	Shard string
}

// Source is one kind of work on the runtime: a work table, the queues of it
// to claim from, and how a claimed item finds the function that works it.
// Everything else (claiming, leases, completions, retries, the run archive,
// wake-ups, shutdown) is the runtime's and the same for every table.
type Source struct {
	Table  lease.Table
	Queues []string
	// Route returns the handler of a claimed item. An error is the attempt's
	// result (retried with backoff; Permanent fails it at once).
	Route func(*Job) (HandlerFunc, error)
	// NextDue, when set, tells how long until the queue's earliest ready
	// row falls due, on the database clock (ok false: the queue has none).
	// The runtime asks it after a claim that found no more due rows and
	// wakes then, instead of at the next poll, when that is sooner: rows
	// made due by time (timers, retries after a backoff) start within
	// milliseconds of their due time rather than up to one poll interval
	// late. It must be one cheap indexed read (timers: TimersNextDue).
	NextDue func(ctx context.Context, db workqtype.DB, queue string) (wait time.Duration, ok bool, err error)
	// ClaimOptions, when set, gives the table-specific options of the next
	// claim of a queue (lease.ClaimOptions), from what the claim loop knows
	// (ClaimContext). It is called by the queue's one claim loop, never
	// concurrently for a queue.
	ClaimOptions func(ClaimContext) lease.ClaimOptions
	// ClaimAfterCompletion: a completed item can make other items claimable
	// (the next message of an outbox partition key), so the claim loop of
	// its queue claims again after each applied completion instead of
	// waiting for a notification or the poll.
	ClaimAfterCompletion bool
}

// ClaimContext is what a queue's claim loop tells Source.ClaimOptions about
// the claim it is about to make.
type ClaimContext struct {
	Queue string
	// Prev is what the previous claim of the queue returned (nil at first,
	// or when it found nothing).
	Prev []lease.Item
	// Completed are the items of the queue whose completion was applied
	// since the previous claim (with ClaimAfterCompletion only; nil
	// otherwise), with the outcome applied.
	Completed []Result
	// Woken: a notification, the poll, a due time or the start led to this
	// claim. False when only this worker's own completions
	// (ClaimAfterCompletion) or a full previous claim did: other workers of
	// the queue have not been woken since the previous claim.
	Woken bool
}

// Worker runs the sources registered on it.
type Worker struct {
	pool     *pgxpool.Pool
	rw       dbschema.Rewriter // the schema's
	db       workqtype.DB      // pool in the schema
	cfg      Config            // with defaults applied
	log      *slog.Logger
	outage   *outage.Log // every loop's database failures, as one outage
	onResult func(Result)
	obs      observing // Options.Observer, skipped while idle
	shared   *Shared   // nil: own slots only
	rank     int
	shard    string // Options.Shard

	// The rate limit of failed-handler warnings per (table, queue)
	// (failureLogBurst per failureLogWindow; tests shorten the window).
	failBurst  int
	failWindow time.Duration
	stats      counters
	schemaGone atomic.Bool // a statement found workq's schema missing; cleared by the next claim that works
	// timeline is the highest database timeline seen in a claimed item's
	// lease_version (its high bits, migration 00021); 0 before the first.
	timeline atomic.Int64
	runs     *runArchive
	clock0   time.Time // base of the worker's monotonic clock (mono)

	// The worker's two statements whose outcome can be unknown to it: a
	// claim or a completion that committed without the answer arriving.
	// Internal tests replace them to inject exactly that fault.
	claimFn    func(*lease.Engine, context.Context, lease.ClaimParams) (lease.Claim, error)
	completeFn func(*lease.Engine, context.Context, []lease.Completion) (lease.Applied, error)
	// reapFn is the claim loops' reap of their queue's expired leases;
	// internal tests replace it to hold a reap up.
	reapFn func(e *lease.Engine, ctx context.Context, queue string, max int) (lease.Reaped, error)

	// base is the parent of every handler context: Start's context without
	// its cancellation, so its values (a logger, request-scoped settings)
	// reach the handlers.
	base context.Context

	startstop.Lifecycle // Start once; Started, Stopped

	mu      sync.Mutex
	kinds   *Router // job runs, by kind
	sources []Source
	run     *lifecycle // set by Start
}

// StopBound is how long Stop may take beyond the drain timeout: cancelled
// handlers get a moment (handlerGrace) to return, then the last completions
// and releases are flushed. When the database cannot be reached within it,
// or a handler ignores its context, Stop returns anyway; the leases left
// behind expire and the items run again.
const StopBound = workqtype.StopBound

// handlerGrace is the part of StopBound that cancelled handlers get to
// return before the final flush.
const handlerGrace = 2 * time.Second

// ErrNotRunning is returned by Stop when the worker was never started. It
// wraps startstop.ErrNotStarted, every service's.
var ErrNotRunning = fmt.Errorf("worker %w", startstop.ErrNotStarted)

// New validates cfg and returns a worker; zero fields of cfg take their
// defaults (DefaultConfig). Register handlers (and sources), then Start or
// Run.
func New(pool *pgxpool.Pool, cfg Config, o Options) (*Worker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("worker config: %w", err)
	}
	rw, err := dbschema.NewRewriter(o.Schema)
	if err != nil {
		return nil, fmt.Errorf("worker options: %w", workqtype.InvalidErr("Schema", err))
	}
	cfg = cfg.WithDefaults()
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &Worker{base: context.Background(), pool: pool, rw: rw, db: rw.Wrap(pool), cfg: cfg, log: log, onResult: o.OnResult, obs: newObserving(o.Observer), shared: o.Shared, rank: o.Rank, shard: o.Shard, kinds: newKindRouter(), clock0: time.Now(),
		claimFn: (*lease.Engine).Claim, completeFn: (*lease.Engine).Complete, reapFn: (*lease.Engine).ReapExpired,
		failBurst: failureLogBurst, failWindow: failureLogWindow}
	olog := log
	if o.Shard != "" {
		olog = log.With("shard", o.Shard)
	}
	w.outage = outage.New(olog, "worker")
	if cfg.RunsDir != "" {
		w.runs = &runArchive{dir: cfg.RunsDir}
	}
	return w, nil
}

// Register sets the handler of a job kind. Call it before Start.
func (w *Worker) Register(kind string, h HandlerFunc) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.Began() {
		return fmt.Errorf("register handler %q: worker already started", kind)
	}
	if err := w.kinds.Handle(kind, h); err != nil {
		return fmt.Errorf("register: %w", err)
	}
	return nil
}

// AddSource adds a kind of work. Call it before Start. A (table, queue) may
// be served by one source only.
func (w *Worker) AddSource(s Source) error {
	if _, err := lease.ParseTable(string(s.Table)); err != nil {
		return fmt.Errorf("add source: %w", err)
	}
	if len(s.Queues) == 0 {
		return fmt.Errorf("add source %s: no queues", s.Table)
	}
	for _, q := range s.Queues {
		if !workqtype.ValidName(q) {
			return fmt.Errorf("add source %s: queue %q is not a valid name (1-128 of A-Z a-z 0-9 _ . : -)", s.Table, q)
		}
	}
	if s.Route == nil {
		return fmt.Errorf("add source %s: nil Route", s.Table)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.Began() {
		return fmt.Errorf("add source %s: worker already started", s.Table)
	}
	for _, o := range w.sources {
		for _, q := range s.Queues {
			if o.Table == s.Table && slices.Contains(o.Queues, q) {
				return fmt.Errorf("add source %s: queue %q is already served", s.Table, q)
			}
		}
	}
	s.Queues = slices.Clone(s.Queues)
	w.sources = append(w.sources, s)
	return nil
}

// jobRuns is the built-in source: job runs of the configured queues, routed
// to the handler registered for their kind. An unknown kind is retried, not
// failed: during a rolling deploy a newer worker may know it.
func (w *Worker) jobRuns() Source {
	return Source{Table: lease.JobRuns, Queues: w.cfg.Queues, Route: w.kinds.Route}
}

// Stats returns the worker's counters.
func (w *Worker) Stats() Stats { return w.stats.snapshot() }

// schemaMissing reports whether err says the database lacks workq's schema
// (lease.IsSchemaMissing: never migrated, or dropped or rolled back under
// the running worker). The worker does not exit (it may be embedded in a
// service, and a migration brings it back): it logs one error naming the
// fix, then retries quietly, its claim loops at their slowest backoff, until
// a claim works again (schemaBack). The caller logs other errors itself.
func (w *Worker) schemaMissing(err error) bool {
	if !lease.IsSchemaMissing(err) {
		return false
	}
	if w.schemaGone.CompareAndSwap(false, true) {
		w.log.Error("the database lacks workq's schema (a table or function does not exist): run '"+MigrateCommand(w.rw.Schema())+"'; "+
			"the worker retries quietly until it is there", "schema", w.rw.Schema(), "err", err)
	}
	return true
}

// MigrateCommand is the command that migrates schema: `workq migrate up`,
// with --schema when it is not the default.
func MigrateCommand(schema string) string { return workqtype.MigrateCommand(schema) }

// schemaBack ends what schemaMissing reported, once a claim worked.
func (w *Worker) schemaBack() {
	if w.schemaGone.Load() && w.schemaGone.CompareAndSwap(true, false) {
		w.log.Info("workq's schema is there again; claiming")
	}
}

// mono is the worker's monotonic clock, in nanoseconds since New. Local
// lease deadlines use it: only durations measured here count, never the
// wall clock or its offset from the database's.
func (w *Worker) mono() int64 { return int64(time.Since(w.clock0)) }

// lifecycle is what a started worker owns.
type lifecycle struct {
	claimCtx   context.Context // ends the claim loops and any claim in flight
	stopClaims context.CancelFunc
	bgCtx      context.Context // heartbeats, watchdogs, listener: end last
	stopBg     context.CancelFunc
	hardCtx    context.Context // ends retries that could outlast Stop's bound
	stopHard   context.CancelFunc
	producers  []*producer
	completers map[lease.Table]*completer
	loops, bg  sync.WaitGroup
	// cut ends the drain window early: the ctx of a Stop call ended
	// (cutDrain). The window also ends at the drain timeout, or when
	// every handler is done.
	cut      context.Context
	cutDrain context.CancelFunc
	// left is how many completions and releases the stop could not flush
	// (set before the worker is Stopped).
	left int64
}

// Start begins claiming and returns at once; the worker runs until Stop,
// whatever becomes of ctx, but ctx's values reach every handler's context. With no source added, the worker
// serves job runs of the configured queues; with sources added, it serves
// job runs only when a kind is registered. A worker starts once
// (startstop.ErrStarted after that).
func (w *Worker) Start(ctx context.Context) error {
	w.mu.Lock() // Register and AddSource wait for the start
	defer w.mu.Unlock()
	run, err := w.Begin(ctx)
	if err != nil {
		return fmt.Errorf("worker: start: %w", err)
	}
	// Before any goroutine starts: every handler context derives from it.
	w.base = context.WithoutCancel(ctx)
	sources := slices.Clone(w.sources)
	if len(sources) == 0 || !w.kinds.Empty() {
		sources = append([]Source{w.jobRuns()}, sources...)
	}
	for _, s := range sources[1:] {
		if s.Table == lease.JobRuns && sources[0].Table == lease.JobRuns {
			for _, q := range s.Queues {
				if slices.Contains(sources[0].Queues, q) {
					run.Abort()
					return fmt.Errorf("start: job_runs queue %q is served by an added source and by the registered kinds", q)
				}
			}
		}
	}
	r := &lifecycle{completers: map[lease.Table]*completer{}}
	r.cut, r.cutDrain = context.WithCancel(context.Background())
	r.claimCtx, r.stopClaims = context.WithCancel(context.Background())
	r.bgCtx, r.stopBg = context.WithCancel(context.Background())
	r.hardCtx, r.stopHard = context.WithCancel(context.Background())
	for _, s := range sources {
		c, ok := r.completers[s.Table]
		if !ok {
			c = newCompleter(w, lease.New(w.db, s.Table), r.hardCtx)
			r.completers[s.Table] = c
			c.start()
		}
		for _, q := range s.Queues {
			p := newProducer(w, s, q, c, r)
			if w.shared != nil {
				p.seat = w.shared.join(string(s.Table)+"/"+q, p.conc, w.rank, func() { poke(p.wake) })
			}
			c.producers = append(c.producers, p)
			r.producers = append(r.producers, p)
		}
	}
	if !w.cfg.PollOnly {
		r.bg.Add(1)
		go func() { defer r.bg.Done(); w.listen(r.bgCtx, r.producers) }()
	}
	w.runs.prepare(w.log)
	if w.cfg.RunsDir != "" && w.cfg.RetainRuns > 0 {
		r.bg.Add(1)
		go func() {
			defer r.bg.Done()
			pruneRunsLoop(r.bgCtx, w.cfg.RunsDir, w.cfg.RetainRuns, w.cfg.RetentionInterval, w.log)
		}()
	}
	for _, p := range r.producers {
		p.startHandlers()
		r.bg.Add(2)
		go func() { defer r.bg.Done(); p.heartbeat(r.bgCtx) }()
		go func() { defer r.bg.Done(); p.watchdog(r.bgCtx) }()
		r.loops.Add(1)
		go func() { defer r.loops.Done(); p.run(r.claimCtx) }()
	}
	w.run = r
	go func() { // the stop: when Stop asks for it
		defer run.Stopped()
		run.Started()
		<-run.Context().Done()
		w.stop(r)
	}()
	w.log.Info("worker started", "worker_id", w.cfg.ID, "sources", describe(sources),
		"concurrency", w.cfg.Concurrency, "queue_concurrency", w.cfg.QueueConcurrency, "batch", w.cfg.Batch, "lease", w.cfg.Lease, "poll_only", w.cfg.PollOnly)
	return nil
}

func describe(sources []Source) []string {
	var out []string
	for _, s := range sources {
		for _, q := range s.Queues {
			out = append(out, string(s.Table)+"/"+q)
		}
	}
	return out
}

// Stop stops claiming, lets in-flight handlers finish for the drain timeout
// (or until ctx ends, whichever is first) while their leases are kept,
// cancels the rest with ErrShutdown and releases them (back to ready, the
// attempt given back), flushes every completion and returns. It returns
// within the drain timeout plus StopBound, whatever the database does.
//
// A ctx that ends, even one already cancelled when Stop is called (the
// context of signal.NotifyContext after Ctrl-C), only cuts the drain short:
// the handlers are cancelled at once, and Stop still releases (or
// completes) every lease it holds before it returns, within StopBound of
// ctx ending. It returns nil then when it left no lease behind, and an error
// wrapping ctx.Err() when some could not be released in that bound (the
// database unreachable; Stats.Unflushed counts them): their leases expire
// and the items run again. Calling it again, from any goroutine, waits
// for the first call's stop; the ctx of every call cuts the drain short.
// It returns ErrNotRunning when the worker was never started.
func (w *Worker) Stop(ctx context.Context) error {
	if err := workqtype.CheckCtx(ctx); err != nil {
		return err
	}
	stopped, err := w.RequestStop()
	if err != nil {
		return ErrNotRunning
	}
	w.mu.Lock() // a Start in progress has set run, or failed
	r := w.run
	w.mu.Unlock()
	if r == nil {
		return ErrNotRunning
	}
	defer context.AfterFunc(ctx, r.cutDrain)()
	select {
	case <-stopped:
		return nil
	case <-ctx.Done():
	}
	// The drain is cut short; the releases and the last flushes end within
	// StopBound (stopSlack covers the goroutines noticing it).
	t := time.NewTimer(StopBound + stopSlack)
	defer t.Stop()
	select {
	case <-stopped:
		if r.left > 0 {
			return fmt.Errorf("worker stop: %w, and %d completions or releases could not be flushed: their leases expire and the items run again", ctx.Err(), r.left)
		}
		return nil
	case <-t.C:
		return fmt.Errorf("worker stop: %w, and the stop did not end within %s: the leases still held expire and their items run again", ctx.Err(), StopBound+stopSlack)
	}
}

// stopSlack is what Stop waits beyond StopBound, once its ctx has ended,
// for the stop's goroutines to notice the bound and return.
const stopSlack = time.Second

// stop is the stop of the run r, in the goroutine Start left waiting for
// it: the worker is Stopped when it returns.
func (w *Worker) stop(r *lifecycle) {
	unflushed := w.stats.unflushed.Load()
	drainCtx, endDrain := context.WithTimeout(r.cut, w.cfg.DrainTimeout)
	defer endDrain()
	// StopBound counts from the end of the drain window (its deadline, a
	// Stop's ctx ending, or every handler done): everything after it,
	// cancelled handlers returning and the last releases and flushes, fits
	// in it. It is armed before the claim loops are waited for, so a ctx
	// that has ended bounds the whole stop.
	var hard *time.Timer
	var hardMu sync.Mutex
	stopArming := context.AfterFunc(drainCtx, func() {
		hardMu.Lock()
		hard = time.AfterFunc(StopBound, r.stopHard)
		hardMu.Unlock()
	})
	defer func() {
		stopArming()
		hardMu.Lock()
		if hard != nil {
			hard.Stop()
		}
		hardMu.Unlock()
	}()
	r.stopClaims()
	r.loops.Wait()
	w.log.Info("worker stopping: draining in-flight work", "in_flight", w.stats.inFlight.Load(), "drain_timeout", w.cfg.DrainTimeout,
		"cut_short", drainCtx.Err() != nil)
	var drains sync.WaitGroup
	for _, p := range r.producers {
		drains.Add(1)
		go func() { defer drains.Done(); p.drain(drainCtx) }()
	}
	drains.Wait()
	endDrain()
	for _, p := range r.producers {
		p.stopHandlers()
		p.failures.flush(p, true, time.Now())
	}
	for _, c := range r.completers {
		c.stop()
	}
	r.stopBg()
	r.bg.Wait()
	r.stopHard()
	r.left = w.stats.unflushed.Load() - unflushed
	w.log.Info("worker stopped", "stats", w.Stats())
}

// Run starts the worker, works until ctx is cancelled, then stops it (see
// Stop) and returns.
func (w *Worker) Run(ctx context.Context) error {
	if err := w.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	<-ctx.Done()
	return w.Stop(context.Background())
}

// noteTimeline records the database timeline the lease versions of a claim
// carry (design §26) and logs, at warn level, when it grew since an
// earlier claim: the database was promoted (a failover) in between.
func (w *Worker) noteTimeline(items []lease.Item) {
	var tl int64
	for _, it := range items {
		tl = max(tl, ha.Timeline(it.LeaseVersion))
	}
	for {
		cur := w.timeline.Load()
		if tl <= cur {
			return
		}
		if w.timeline.CompareAndSwap(cur, tl) {
			if cur != 0 {
				w.log.Warn("worker: database timeline changed (failover?)", "old_timeline", cur, "new_timeline", tl)
			}
			return
		}
	}
}
