// Command orders is a small order service that uses all four kinds of
// durable work of workq together, on one embedded workq.Client:
//
//   - POST /orders writes the order, an outbox message (order.placed, keyed
//     by customer) and a payment-reminder timer in ONE transaction;
//   - POST /payments is a payment provider's webhook: the event is recorded
//     once in the inbox (source "psp", the provider's event id as message
//     id); its inbox handler marks the order paid and cancels the reminder;
//   - the reminder timer sends order.reminder, only if the order is unpaid;
//   - a schedule (@every, created idempotently at start) makes orders.expire
//     job runs that expire stale unpaid orders;
//   - the outbox relay delivers every message by signed webhook, or logs it.
//
// The Client also runs the maintenance in-process, with every built-in task
// (reaper, schedules, join deadlines, retention, the inbox window, stuck
// items); one replica leads it at a time.
//
//	DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres go run ./examples/orders
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/migrate"
	"github.com/workq/workq/publish"
)

// Names of the service's work. Everything runs on one queue of its own so
// that the service can share a database with other workq users.
const (
	queue         = "orders"
	topicPlaced   = "order.placed"   // outbox
	topicPaid     = "order.paid"     // outbox
	topicReminder = "order.reminder" // outbox
	topicExpired  = "order.expired"  // outbox
	timerReminder = "order.payment-reminder"
	pspSource     = "psp"               // inbox source
	pspSucceeded  = "payment.succeeded" // inbox topic (the provider's event type)
	scheduleName  = "orders.expire"     // makes ExpireArgs jobs
)

// ExpireArgs are the arguments of the orders.expire job, which the
// schedule makes (with an empty payload).
type ExpireArgs struct{}

func (ExpireArgs) Kind() string { return "orders.expire" }

// settings is the service's configuration (flags, with environment
// defaults for what differs per deployment).
type settings struct {
	DatabaseURL   string
	Addr          string
	WebhookURL    string // "" logs outbox messages instead of POSTing them
	WebhookSecret string
	ReminderAfter time.Duration // payment reminder timer delay
	ExpireAfter   time.Duration // unpaid orders older than this expire
	ExpireEvery   time.Duration // the schedule's @every interval
	Poll          time.Duration // worker poll interval
}

func parseSettings(args []string, getenv func(string) string) (settings, error) {
	var s settings
	fs := flag.NewFlagSet("orders", flag.ContinueOnError)
	fs.StringVar(&s.DatabaseURL, "database-url", getenv("DATABASE_URL"), "PostgreSQL URL (env DATABASE_URL)")
	fs.StringVar(&s.Addr, "addr", envOr(getenv, "ORDERS_ADDR", "127.0.0.1:8080"), "HTTP listen address (env ORDERS_ADDR)")
	fs.StringVar(&s.WebhookURL, "webhook-url", getenv("ORDERS_WEBHOOK_URL"), "POST outbox messages to this URL, signed (env ORDERS_WEBHOOK_URL; default: log them)")
	fs.StringVar(&s.WebhookSecret, "webhook-secret", getenv("ORDERS_WEBHOOK_SECRET"), "HMAC-SHA256 key of the webhook (env ORDERS_WEBHOOK_SECRET)")
	fs.DurationVar(&s.ReminderAfter, "reminder-after", 30*time.Second, "send a payment reminder this long after an order is placed")
	fs.DurationVar(&s.ExpireAfter, "expire-after", 2*time.Minute, "expire orders still unpaid this long after they were placed")
	fs.DurationVar(&s.ExpireEvery, "expire-every", 10*time.Second, "how often the expiry schedule runs (whole seconds)")
	fs.DurationVar(&s.Poll, "poll", 500*time.Millisecond, "worker poll interval")
	if err := fs.Parse(args); err != nil {
		return s, err
	}
	switch {
	case fs.NArg() > 0:
		return s, fmt.Errorf("unexpected arguments %q", fs.Args())
	case s.DatabaseURL == "":
		return s, errors.New("DATABASE_URL (or -database-url) is not set")
	case s.WebhookURL != "" && s.WebhookSecret == "":
		return s, errors.New("-webhook-url needs -webhook-secret (or ORDERS_WEBHOOK_SECRET)")
	case s.ReminderAfter <= 0 || s.ExpireAfter <= 0 || s.Poll <= 0:
		return s, errors.New("-reminder-after, -expire-after and -poll must be positive")
	case s.ExpireEvery < time.Second || s.ExpireEvery%time.Second != 0:
		return s, fmt.Errorf("-expire-every must be whole seconds, at least 1s; got %s", s.ExpireEvery)
	}
	return s, nil
}

func envOr(getenv func(string) string, key, def string) string {
	if v := getenv(key); v != "" {
		return v
	}
	return def
}

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	s, err := parseSettings(os.Args[1:], os.Getenv)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		log.Error("bad configuration", "err", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// A second signal kills the process instead of waiting for the drain.
	go func() { <-ctx.Done(); stop() }()
	ln, err := net.Listen("tcp", s.Addr)
	if err == nil {
		err = run(ctx, s, log, ln)
	}
	stop()
	if err != nil {
		log.Error("order service failed", "err", err)
		os.Exit(1)
	}
}

// run serves HTTP on ln and works the service's queue until ctx ends, then
// shuts down within bounds: HTTP first (no new orders), then the Client
// (in-flight handlers drain for DrainTimeout, then the maintenance ends).
func run(ctx context.Context, s settings, log *slog.Logger, ln net.Listener) error {
	defer ln.Close()
	pcfg, err := pgxpool.ParseConfig(s.DatabaseURL)
	if err != nil {
		return fmt.Errorf("database url: %w", err)
	}
	pcfg.MaxConns = 20 // the worker's claims and handlers plus HTTP requests
	// Synchronous commits; no connection left on a demoted primary.
	workq.ConfigurePool(pcfg)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	// Migrating at start keeps the example self-contained (package migrate,
	// on the service's own pool); with many replicas run `workq migrate up`
	// once per deploy instead.
	m, err := migrate.New(pool, migrate.Options{})
	if err != nil {
		return err
	}
	if _, err := m.Up(ctx); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, schema); err != nil {
		return fmt.Errorf("create shop_orders: %w", err)
	}

	svc := newService(pool, s, log)
	publisher, err := newPublisher(s, log)
	if err != nil {
		return err
	}
	workers, err := svc.workers(publisher)
	if err != nil {
		return err
	}
	// One Client per process (it debounces NOTIFY across goroutines): every
	// kind of work of the queue, and the maintenance.
	const drain = 5 * time.Second
	svc.client, err = workq.NewClient(pool, workq.Config{
		Logger:            log,
		Workers:           workers,
		Queues:            map[string]workq.QueueConfig{queue: {MaxWorkers: 16}},
		FetchPollInterval: s.Poll, DrainTimeout: drain,
		OutboxQueues: []string{queue}, InboxQueues: []string{queue}, TimerQueues: []string{queue},
		// The expiry schedule is declared here: every replica's Start
		// makes the stored one what this code says (a changed -expire-every
		// updates it), and the newest deploy wins while two run side by side.
		PeriodicJobs: []*workq.PeriodicJob{workq.NewPeriodicJob(scheduleName, "@every "+s.ExpireEvery.String(), ExpireArgs{},
			&workq.PeriodicJobOpts{
				Queue:   queue,
				Overlap: workq.OverlapSkip, // one sweep at a time
				Misfire: workq.MisfireSkip, // after downtime, one on-time sweep is enough
			})},
	})
	if err != nil {
		return err
	}
	if err := svc.client.Start(ctx); err != nil {
		return err
	}
	defer stopWithin(log, "workq client", drain+workq.StopBound+10*time.Second, svc.client.Stop)

	srv := &http.Server{Handler: svc.routes(), ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("order service listening", "addr", ln.Addr().String(), "webhook", s.WebhookURL != "")

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	log.Info("shutting down")
	// Stop taking requests first; the requests in flight finish (bounded).
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("http shutdown", "err", err)
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("http: %w", serveErr)
	}
	return nil // the deferred stop of the Client runs now
}

// stopWithin calls stop with a deadline and logs its failure.
func stopWithin(log *slog.Logger, what string, d time.Duration, stop func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := stop(ctx); err != nil {
		log.Warn("stop "+what, "err", err)
	}
}

// newPublisher is the relay's handler of every topic: a signed webhook
// POST when a URL is configured, else a log line.
func newPublisher(s settings, log *slog.Logger) (func(context.Context, *workq.Message[json.RawMessage]) error, error) {
	if s.WebhookURL == "" {
		return func(_ context.Context, job *workq.Message[json.RawMessage]) error {
			log.Info("outbox message (no -webhook-url: logged only)", "topic", job.Topic,
				"key", job.PartitionKey, "message_id", job.MessageID, "payload", string(job.Payload))
			return nil
		}, nil
	}
	u, err := url.Parse(s.WebhookURL)
	if err != nil {
		return nil, fmt.Errorf("-webhook-url: %w", err)
	}
	wh, err := publish.NewWebhook(publish.WebhookConfig{URL: s.WebhookURL, Secret: s.WebhookSecret, AllowHosts: []string{u.Host}})
	if err != nil {
		return nil, err
	}
	return wh.Handle, nil
}

// workers are the service's handlers, all on its one Client: the relay's
// publisher, the inbox and timer handlers and the expiry job's worker.
func (s *service) workers(publisher func(context.Context, *workq.Message[json.RawMessage]) error) (*workq.Workers, error) {
	ws := workq.NewWorkers()
	// Default OnFinalFailure (Block): a customer's later events wait behind
	// a message that finally failed until an operator retries it
	// (`workq outbox retry`), so a consumer never sees them out of order.
	err := errors.Join(
		workq.HandleOutbox(ws, "", publisher),
		workq.HandleInbox(ws, pspSucceeded, s.markPaid),
		workq.HandleInbox(ws, "", func(_ context.Context, m *workq.Message[json.RawMessage]) error {
			m.Logger().Info("payment event ignored", "type", m.Topic)
			return nil
		}),
		workq.HandleTimer(ws, timerReminder, s.remind),
		workq.AddWorkerSafely(ws, workq.WorkFunc(s.expire)),
	)
	return ws, err
}
