package workq_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
)

// PingArgs are the args of a job that does nothing.
type PingArgs struct{}

func (PingArgs) Kind() string { return "example.ping" }

// The worker runtime's settings are Config's own fields, River's names
// where River has them: queues and their concurrency in Queues, the
// claim's poll, lease, timeout and drain beside them, and metrics into
// your Prometheus registry. A zero field takes its default; an invalid one
// fails NewClient with a ValidationError naming the field.
func ExampleConfig() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()

	done := make(chan struct{}, 1)
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(context.Context, *workq.Job[PingArgs]) error {
		done <- struct{}{}
		return nil
	}))
	reg := prometheus.NewRegistry() // serve it with promhttp.HandlerFor(reg, ...)
	client, err := workq.NewClient(pool, workq.Config{
		Workers:           workers,
		Queues:            map[string]workq.QueueConfig{"default": {}, "reports": {MaxWorkers: 2}},
		MaxWorkers:        20,                     // the queues that set none
		FetchPollInterval: 500 * time.Millisecond, // when no NOTIFY arrives
		LeaseTTL:          time.Minute,
		JobTimeout:        -1, // negative: none (0 would be the default, 5m)
		DrainTimeout:      30 * time.Second,
		MetricsRegisterer: reg,
	})
	must(err)
	_, err = client.Enqueue(ctx, PingArgs{}, nil)
	must(err)
	must(client.Start(ctx))
	<-done
	must(client.Stop(ctx))
	fmt.Println("claimed", client.Stats().Claimed)

	_, err = workq.NewClient(pool, workq.Config{FetchPollInterval: time.Millisecond})
	var ve *workq.ValidationError
	fmt.Println(errors.Is(err, workq.ErrInvalid), errors.As(err, &ve) && ve.Field == "FetchPollInterval")
	// Output:
	// claimed 1
	// true true
}
