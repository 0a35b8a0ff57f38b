// Command quickstart is the README's example: it brings the schema up to
// date, runs a workq.Client with a worker for one typed job kind, enqueues
// one job, and stops on Ctrl-C or SIGTERM.
//
//	DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres go run ./examples/quickstart
package main

import (
	"context"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/db"
)

// EmailArgs are an email.send job's arguments; their JSON is its payload.
type EmailArgs struct {
	To string `json:"to"`
}

func (EmailArgs) Kind() string { return "email.send" }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	url := os.Getenv("DATABASE_URL")
	if _, err := db.MigrateUp(ctx, url); err != nil { // or: workq migrate up
		log.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	// The Client claims, heartbeats, retries and archives each attempt, and runs the maintenance.
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[EmailArgs]) error {
		log.Printf("job %d attempt %d: sending to %s", job.ID, job.Attempt, job.Args.To)
		return nil // done; an error retries with backoff, workq.Permanent(err) fails now
	}))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers})
	if err != nil {
		log.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		log.Fatal(err)
	}

	// Enqueue on the pool, or with EnqueueTx in your own pgx.Tx: then the job exists only if it commits.
	if _, err := client.Enqueue(ctx, EmailArgs{To: "ann@example.com"}, nil); err != nil {
		log.Fatal(err)
	}

	<-ctx.Done() // Ctrl-C: stop claiming, let running jobs finish (bounded), flush their results
	if err := client.Stop(context.Background()); err != nil {
		log.Fatal(err)
	}
}
