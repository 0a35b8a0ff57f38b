// Command embedded is a small "user service" that embeds workq instead of
// running `workq worker` beside it: it brings the schema up to date at start,
// writes each order and the job that emails its confirmation in one
// transaction, and runs a workq.Client (the worker and the maintenance) in
// its own process until SIGINT or SIGTERM.
//
//	DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres go run ./examples/embedded
//
// EXAMPLE_RUN_FOR=5s makes it stop by itself after that long (its test uses
// this).
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/mail"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/migrate"
)

const emailQueue = "emails"

// EmailArgs are the arguments of an email.send job: their JSON is its
// payload, and the worker gets them decoded (job.Args).
type EmailArgs struct {
	OrderID  int64  `json:"order_id"`
	To       string `json:"to"`
	Template string `json:"template"`
}

// Kind names the job kind, which picks its worker.
func (EmailArgs) Kind() string { return "email.send" }

// EnqueueOpts are the kind's defaults: every email job goes to its own
// queue, whoever enqueues it.
func (EmailArgs) EnqueueOpts() workq.EnqueueOpts { return workq.EnqueueOpts{Queue: emailQueue} }

// The service's own table. workq's tables live in the same database, which
// is what lets an order and its email job commit or roll back together.
const schema = `
create table if not exists example_orders (
    id                   bigint generated always as identity primary key,
    email                text not null,
    total_cents          bigint not null check (total_cents > 0),
    confirmation_sent_at timestamptz,
    created_at           timestamptz not null default now()
)`

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal, restore the default behaviour so that a second
	// Ctrl-C kills the process instead of waiting for the drain.
	go func() { <-ctx.Done(); stop() }()
	err := run(ctx, log, os.Getenv("DATABASE_URL"), os.Getenv("EXAMPLE_RUN_FOR"))
	stop()
	if err != nil {
		log.Error("user service failed", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, log *slog.Logger, dsn, runFor string) error {
	if dsn == "" {
		return errors.New("DATABASE_URL is not set")
	}
	if runFor != "" {
		d, err := time.ParseDuration(runFor)
		if err != nil || d <= 0 {
			return fmt.Errorf("EXAMPLE_RUN_FOR=%q is not a positive duration", runFor)
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}

	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return fmt.Errorf("DATABASE_URL: %w", err)
	}
	pcfg.MaxConns = 10 // the worker's claims, completions and listener, the handlers' updates, the orders
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
		return fmt.Errorf("create example_orders: %w", err)
	}

	workers := workq.NewWorkers()
	workq.AddWorker(workers, &emailSender{pool: pool, provider: &fakeProvider{perSecond: 3}})
	// One Client per process (it debounces NOTIFY across goroutines): it
	// enqueues, works the email queue and runs the maintenance (the reaper
	// of leases whose worker died, retention...; one leader among every
	// replica).
	client, err := workq.NewClient(pool, workq.Config{
		Logger:     log,
		Workers:    workers,
		Queues:     map[string]workq.QueueConfig{emailQueue: {}},
		MaxWorkers: 8,
		// A snoozed job becomes claimable again when its delay passes, and
		// no NOTIFY marks that moment: the poll interval bounds how late it
		// starts.
		FetchPollInterval: 250 * time.Millisecond,
		DrainTimeout:      5 * time.Second,
	})
	if err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return err
	}

	placed := placeDemoOrders(ctx, log, pool, client)
	if placed == nil || ctx.Err() != nil {
		placed = nil // interrupted while placing them is a normal stop
		<-ctx.Done()
	}
	log.Info("shutting down: draining in-flight jobs")
	// ctx is over; stopping and the summary get a context of their own.
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer scancel()
	stopped := client.Stop(sctx)
	if err := errors.Join(placed, stopped); err != nil {
		return err
	}
	logSummary(sctx, log, pool)
	log.Info("user service stopped", "worker", client.Stats())
	return nil
}

// errDeclined is the payment check saying no.
var errDeclined = errors.New("payment declined")

// placeOrder writes an order and enqueues its confirmation email in one
// transaction: the job exists if and only if the order commits, so there is
// never an order without its email, nor an email about an order that was
// rolled back.
func placeOrder(ctx context.Context, pool *pgxpool.Pool, client *workq.Client, email string, cents int64) (int64, error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(ctx) // after Commit this is a no-op

	var id int64
	if err := tx.QueryRow(ctx, "insert into example_orders (email, total_cents) values ($1, $2) returning id", email, cents).Scan(&id); err != nil {
		return 0, fmt.Errorf("insert order: %w", err)
	}
	_, err = client.EnqueueTx(ctx, tx, EmailArgs{OrderID: id, To: email, Template: "order-confirmation"}, nil)
	if err != nil {
		return 0, err
	}
	// The payment check needs the order id, so it runs after the job is
	// already enqueued; when it declines, the rollback takes the job with it.
	if err := chargePayment(id, cents); err != nil {
		return 0, err
	}
	return id, tx.Commit(ctx)
}

// chargePayment stands in for a payment step that can refuse an order.
func chargePayment(_ int64, cents int64) error {
	if cents > 100_000 {
		return errDeclined
	}
	return nil
}

func placeDemoOrders(ctx context.Context, log *slog.Logger, pool *pgxpool.Pool, client *workq.Client) error {
	orders := []struct {
		email string
		cents int64
	}{
		{"ada@example.com", 4200},
		{"grace@example.com", 1999},
		{"linus@example.com", 500},
		{"margaret@example.com", 12000},
		{"barbara@example.com", 750},
		{"not-an-address", 300},          // its email job fails permanently
		{"mallory@example.com", 999_999}, // declined: neither order nor job is kept
	}
	for _, o := range orders {
		id, err := placeOrder(ctx, pool, client, o.email, o.cents)
		switch {
		case errors.Is(err, errDeclined):
			log.Info("order declined; its email job was rolled back with it", "email", o.email)
		case err != nil:
			return fmt.Errorf("place order for %s: %w", o.email, err)
		default:
			log.Info("order placed", "order_id", id, "email", o.email)
		}
	}
	return nil
}

// emailSender is the worker of email.send jobs (a workq.Worker[EmailArgs]).
type emailSender struct {
	pool     *pgxpool.Pool
	provider *fakeProvider
}

// Work's error decides the job's fate: nil acks, workq.Permanent fails at
// once, workq.Snooze comes back later without using an attempt, and any
// other error retries with backoff. (Args that do not decode fail at once,
// before Work.)
func (s *emailSender) Work(ctx context.Context, job *workq.Job[EmailArgs]) error {
	p := job.Args
	log := job.Logger().With("order_id", p.OrderID, "to", p.To)
	addr, err := mail.ParseAddress(p.To)
	if err != nil {
		// Retrying cannot fix an address: fail now rather than use up the
		// attempts and delay the failure by the whole backoff.
		return workq.Permanent(fmt.Errorf("order %d: bad address %q: %w", p.OrderID, p.To, err))
	}
	err = s.provider.Send(ctx, message{
		To: addr.Address, Template: p.Template,
		// Delivery is at least once: the same key on every attempt lets the
		// provider drop a second send after a lost acknowledgement. The
		// creation time keeps it unique even if a failover to a standby
		// that missed the last commits reuses the id (docs/design.md §26).
		IdempotencyKey: fmt.Sprintf("job_runs-%d-%d", job.ID, job.CreatedAt.UnixMicro()),
	})
	var limited *rateLimitedError
	if errors.As(err, &limited) {
		// Being throttled says nothing about this email; do not count it
		// against its attempts.
		log.Info("email provider rate limit; snoozing", "retry_after", limited.RetryAfter)
		return workq.Snooze(limited.RetryAfter)
	}
	if err != nil {
		return err
	}
	// The handler can run twice for one job (a lost ack), so record the send
	// idempotently.
	if _, err := s.pool.Exec(ctx, "update example_orders set confirmation_sent_at = now() where id = $1 and confirmation_sent_at is null", p.OrderID); err != nil {
		return err
	}
	log.Info("order confirmation sent")
	return nil
}

type message struct {
	To, Template, IdempotencyKey string
}

type rateLimitedError struct{ RetryAfter time.Duration }

func (e *rateLimitedError) Error() string {
	return fmt.Sprintf("rate limited, retry after %s", e.RetryAfter)
}

// fakeProvider stands in for an email API that accepts perSecond messages
// per second and answers the rest like an HTTP 429 with Retry-After.
type fakeProvider struct {
	perSecond int

	mu          sync.Mutex
	windowStart time.Time
	sent        int
}

func (p *fakeProvider) Send(ctx context.Context, _ message) error {
	p.mu.Lock()
	now := time.Now()
	if now.Sub(p.windowStart) >= time.Second {
		p.windowStart, p.sent = now, 0
	}
	if p.sent >= p.perSecond {
		wait := p.windowStart.Add(time.Second).Sub(now)
		p.mu.Unlock()
		return &rateLimitedError{RetryAfter: wait}
	}
	p.sent++
	p.mu.Unlock()
	select {
	case <-time.After(20 * time.Millisecond): // the API call
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func logSummary(ctx context.Context, log *slog.Logger, pool *pgxpool.Pool) {
	var ready, running, done, failed int64
	err := pool.QueryRow(ctx, `
		select count(*) filter (where status = 0), count(*) filter (where status = 1),
		       count(*) filter (where status = 2), count(*) filter (where status = 3)
		from workq.job_runs_all where queue = $1`, emailQueue).Scan(&ready, &running, &done, &failed)
	if err != nil {
		log.Warn("summary", "err", err)
		return
	}
	log.Info("email jobs", "ready", ready, "in_progress", running, "done", done, "failed", failed)
}
