// Package worker runs handlers for claimed job runs: one claim loop per queue,
// a bounded number of handler goroutines, batched heartbeats and batched
// completions, LISTEN/NOTIFY wake-ups with polling as the fallback, and a
// graceful drain on shutdown. Embed it in a service or run `workq worker`.
package worker

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/config"
	"github.com/workq/workq/lease"
)

// Options are the worker's collaborators; all are optional.
type Options struct {
	Logger   *slog.Logger // default: discard
	OnResult func(Result) // called once per finished attempt after its flush
}

// Worker works the job_runs queues named in its config.
type Worker struct {
	pool      *pgxpool.Pool
	cfg       config.Config
	log       *slog.Logger
	onResult  func(Result)
	handlers  map[string]HandlerFunc
	stats     counters
	runs      *runArchive
	completer *completer

	mu      sync.Mutex
	running bool
}

// New validates cfg and returns a worker. Register handlers, then Run.
func New(pool *pgxpool.Pool, cfg config.Config, o Options) (*Worker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("worker config: %w", err)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &Worker{pool: pool, cfg: cfg, log: log, onResult: o.OnResult, handlers: map[string]HandlerFunc{}}
	if cfg.RunsDir != "" {
		w.runs = &runArchive{dir: cfg.RunsDir}
	}
	return w, nil
}

// Register sets the handler of a job kind. Call it before Run.
func (w *Worker) Register(kind string, h HandlerFunc) error {
	if !config.ValidName(kind) {
		return fmt.Errorf("register handler: kind %q is not a valid name", kind)
	}
	if h == nil {
		return fmt.Errorf("register handler %q: nil handler", kind)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.running {
		return fmt.Errorf("register handler %q: worker already running", kind)
	}
	if _, dup := w.handlers[kind]; dup {
		return fmt.Errorf("register handler %q: already registered", kind)
	}
	w.handlers[kind] = h
	return nil
}

// Stats returns the worker's counters.
func (w *Worker) Stats() Stats { return w.stats.snapshot() }

// Run works jobs until ctx is cancelled, then stops claiming, lets in-flight
// handlers finish within the drain timeout, releases the rest, flushes every
// completion and returns.
func (w *Worker) Run(ctx context.Context) error {
	w.mu.Lock()
	if w.running {
		w.mu.Unlock()
		return fmt.Errorf("worker already running")
	}
	w.running = true
	w.mu.Unlock()

	w.completer = newCompleter(lease.New(w.pool, lease.JobRuns), w.log, w.cfg.FlushInterval, w.cfg.FlushBatch, &w.stats, w.onResult)
	w.completer.start()

	producers := map[string]*producer{}
	for _, q := range w.cfg.Queues {
		producers[q] = newProducer(w, q)
	}
	// Heartbeats and the listener outlive ctx: in-flight jobs keep their
	// leases while they drain.
	bgCtx, stopBackground := context.WithCancel(context.Background())
	var bg sync.WaitGroup
	if !w.cfg.PollOnly {
		bg.Add(1)
		go func() { defer bg.Done(); w.listen(bgCtx, producers) }()
	}
	var loops sync.WaitGroup
	for _, p := range producers {
		p.startHandlers()
		bg.Add(1)
		go func() { defer bg.Done(); p.heartbeat(bgCtx) }()
		loops.Add(1)
		go func() { defer loops.Done(); p.run(ctx) }()
	}
	w.log.Info("worker started", "worker_id", w.cfg.WorkerID, "queues", w.cfg.Queues,
		"concurrency", w.cfg.Concurrency, "batch", w.cfg.Batch, "lease", w.cfg.Lease, "poll_only", w.cfg.PollOnly)

	<-ctx.Done()
	loops.Wait()
	w.log.Info("worker stopping: draining in-flight jobs", "in_flight", w.stats.inFlight.Load(), "drain_timeout", w.cfg.DrainTimeout)
	var drains sync.WaitGroup
	for _, p := range producers {
		drains.Add(1)
		go func() { defer drains.Done(); p.drain(w.cfg.DrainTimeout); p.stopHandlers() }()
	}
	drains.Wait()
	w.completer.stop()
	stopBackground()
	bg.Wait()
	w.log.Info("worker stopped", "stats", w.Stats())
	return nil
}

// listen holds one connection with LISTEN on the job_runs channel and wakes
// the producer of the queue each notification names. On any error it
// reconnects with backoff and wakes every producer, in case a notification
// was missed meanwhile; polling covers the gap.
func (w *Worker) listen(ctx context.Context, producers map[string]*producer) {
	channel := workq.NotifyChannel(string(lease.JobRuns))
	for attempt := int32(0); ctx.Err() == nil; attempt++ {
		listened, err := w.listenOnce(ctx, channel, producers)
		if ctx.Err() != nil {
			return
		}
		if listened {
			attempt = 0 // a fresh loss after a good connection backs off from the start
		}
		w.log.Warn("listener lost its connection; polling until it is back", "err", err)
		for _, p := range producers {
			p.signal()
		}
		if !sleepCtx(ctx, Backoff(min(attempt, 6), 100*time.Millisecond, 5*time.Second)+50*time.Millisecond) {
			return
		}
	}
}

// listenOnce listens until the connection fails; listened reports whether it
// got as far as LISTEN.
func (w *Worker) listenOnce(ctx context.Context, channel string, producers map[string]*producer) (listened bool, err error) {
	conn, err := w.pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	// A connection that has LISTENed must not go back to the pool.
	defer func() {
		_ = conn.Conn().Close(context.Background())
		conn.Release()
	}()
	if _, err := conn.Exec(ctx, "listen "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return false, err
	}
	for _, p := range producers {
		p.signal()
	}
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		if p, ok := producers[n.Payload]; ok {
			p.signal()
		}
	}
}
