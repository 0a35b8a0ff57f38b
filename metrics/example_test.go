package metrics_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/workq/workq/internal/jobq"

	"github.com/workq/workq/config"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/metrics"
	"github.com/workq/workq/worker"
)

// One Metrics per process: its Worker() observer goes into the worker's
// options, Watch adds the worker's gauges, and Handler (here on a server of
// its own, Listen) serves /metrics. Depth reads the queue depth at most
// once per DepthInterval (15s by default), however often it is scraped.
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

	cfg := config.Default()
	cfg.Queues = []string{"email"}
	w, err := worker.New(pool, cfg.Worker(), worker.Options{Observer: m.Worker()})
	if err != nil {
		panic(err)
	}
	m.Watch(w)
	sent := make(chan struct{}, 1)
	if err := w.Register("welcome", func(context.Context, *worker.Job) error { sent <- struct{}{}; return nil }); err != nil {
		panic(err)
	}
	if err := w.Start(ctx); err != nil {
		panic(err)
	}
	if _, err := jobq.New(jobq.Options{}).Enqueue(ctx, pool, jobq.Job{Queue: "email", Kind: "welcome"}); err != nil {
		panic(err)
	}
	<-sent
	if err := w.Stop(ctx); err != nil { // flushes the completion
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
