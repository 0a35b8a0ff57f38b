// Command quickstart is the README's example: it brings the schema up to
// date, enqueues one job and runs a worker that handles it, until Ctrl-C or
// SIGTERM.
//
//	DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres go run ./examples/quickstart
package main

import (
	"context"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/workq/workq/internal/jobq"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/config"
	"github.com/workq/workq/db"
	"github.com/workq/workq/worker"
)

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

	// Enqueue on the pool, or in your own pgx.Tx: then the job exists only if it commits.
	client := jobq.New(jobq.Options{})
	job := jobq.Job{Kind: "email.send", Payload: map[string]string{"to": "ann@example.com"}}
	if _, err := client.Enqueue(ctx, pool, job); err != nil {
		log.Fatal(err)
	}

	// The worker claims, heartbeats, retries and archives each attempt.
	w, err := worker.New(pool, config.Default().Worker(), worker.Options{})
	if err != nil {
		log.Fatal(err)
	}
	err = w.Register("email.send", func(ctx context.Context, job *worker.Job) error {
		var args struct{ To string }
		if err := job.Decode(&args); err != nil {
			return err // a payload that does not decode fails at once
		}
		log.Printf("job %d attempt %d: sending to %s", job.ID, job.Attempt, args.To)
		return nil // done; an error retries with backoff, worker.Permanent(err) fails now
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Run(ctx); err != nil { // until Ctrl-C, then a bounded drain
		log.Fatal(err)
	}
}
