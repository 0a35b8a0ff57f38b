// Command quickstart is the README's example, a complete service: it brings
// the schema up to date, runs a workq.Client with a typed job worker and
// handlers for the outbox, the inbox and timers, writes one of each (the
// job and the outbox message in one transaction), creates a schedule, and
// stops on Ctrl-C or SIGTERM.
//
//	DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres go run ./examples/quickstart
package main

import (
	"context"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/inbox"
	"github.com/workq/workq/migrate"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/timers"
)

// EmailArgs are an email.send job's arguments; their JSON is its payload.
type EmailArgs struct {
	To string `json:"to"`
}

func (EmailArgs) Kind() string { return "email.send" }

// Order is the payload of the outbox message, the inbox message and the timer.
type Order struct {
	ID int `json:"id"`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := must(pgxpool.ParseConfig(os.Getenv("DATABASE_URL")))
	workq.ConfigurePool(cfg) // synchronous commits; no connection left on a demoted primary
	pool := must(pgxpool.NewWithConfig(ctx, cfg))
	must(must(migrate.New(pool, migrate.Options{})).Up(ctx)) // or: workq migrate up

	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[EmailArgs]) error {
		log.Printf("job %d attempt %d: sending to %s", job.ID, job.Attempt, job.Args.To)
		return nil // done; an error retries with backoff, workq.Permanent(err) fails now
	}))
	handle := func(ctx context.Context, m *workq.Message[Order]) error {
		log.Printf("%s: order %d", m.Topic, m.Payload.ID)
		return nil
	}
	check(workq.HandleOutbox(workers, "order.placed", handle)) // or relay it to a webhook or NATS
	check(workq.HandleInbox(workers, "payment.settled", handle))
	check(workq.HandleTimer(workers, "order.expired", handle))
	client := must(workq.NewClient(pool, workq.Config{Workers: workers, // maintenance included
		// Declared in code: Start makes the stored schedule what this says.
		PeriodicJobs: []*workq.PeriodicJob{workq.NewPeriodicJob("digest", "@every 1m", EmailArgs{To: "ops@example.com"}, nil)},
	}))
	check(client.Start(ctx))

	// Your business write, the job and the outbox message commit together, or not at all.
	check(pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := client.EnqueueTx(ctx, tx, EmailArgs{To: "ann@example.com"}, nil); err != nil {
			return err
		}
		_, err := client.SendTx(ctx, tx, outbox.Message{Topic: "order.placed", PartitionKey: "order-1", Payload: Order{1}})
		return err
	}))
	// Recorded once per (source, message id): a redelivery is a no-op.
	must(client.Receive(ctx, inbox.Message{Source: "psp", MessageID: "evt-1", Topic: "payment.settled", Payload: Order{1}}))
	must(client.ScheduleTimer(ctx, timers.Timer{Topic: "order.expired", Delay: time.Second, Payload: Order{1}}))

	<-ctx.Done() // Ctrl-C. ctx is over: Stop(ctx) would cancel the handlers at once (and still release their jobs)
	stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	check(client.Stop(stopCtx)) // stop claiming, let running work finish (bounded), release the rest, flush the results
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

func must[T any](v T, err error) T {
	check(err)
	return v
}
