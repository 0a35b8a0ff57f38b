package metrics_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/metrics"
	"github.com/workq/workq/internal/testdb"
)

// WelcomeArgs are the example's job.
type WelcomeArgs struct{}

func (WelcomeArgs) Kind() string { return "welcome" }

// One Metrics per process: given to the workq.Client (Config.Metrics), it
// counts the worker's claims and completions, watches its gauges and the
// maintenance, and Handler (here on a server of its own, Listen) serves
// /metrics. Depth reads the queue depth at most once per DepthInterval
// (15s by default), however often it is scraped.
func Example() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()

	m, err := metrics.New(metrics.Options{Depth: metrics.DefaultDepth(pool)})
	if err != nil {
		panic(err)
	}
	srv, err := metrics.Listen("127.0.0.1:0", m.Handler(), nil) // or mount m.Handler() at /metrics on your server
	if err != nil {
		panic(err)
	}
	defer srv.Shutdown(ctx)

	sent := make(chan struct{}, 1)
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(context.Context, *workq.Job[WelcomeArgs]) error { sent <- struct{}{}; return nil }))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers, Queues: map[string]workq.QueueConfig{"email": {}}, MetricsRegisterer: m})
	if err != nil {
		panic(err)
	}
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	if _, err := client.Enqueue(ctx, WelcomeArgs{}, &workq.EnqueueOpts{Queue: "email"}); err != nil {
		panic(err)
	}
	<-sent
	if err := client.Stop(ctx); err != nil { // flushes the completion
		panic(err)
	}

	resp, err := http.Get("http://" + srv.Addr().String() + "/metrics")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		if l := lines.Text(); strings.HasPrefix(l, "workq_worker_claimed_total") || strings.HasPrefix(l, `workq_worker_completed_total{outcome="done"`) {
			fmt.Println(l)
		}
	}
	// Output:
	// workq_worker_claimed_total{queue="email",table="job_runs"} 1
	// workq_worker_completed_total{outcome="done",queue="email",table="job_runs"} 1
}
