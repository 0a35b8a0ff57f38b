package tracing_test

import (
	"context"
	"fmt"

	"github.com/workq/workq/internal/jobq"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/workq/workq/config"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/tracing"
	"github.com/workq/workq/worker"
)

// A job enqueued under a span carries that span's trace context; the
// worker's tracing observer starts the handler's span as its child, so the
// producer's request and the handler are one trace. A service usually sets
// its provider globally (otel.SetTracerProvider) and passes none here.
func Example() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	exp := tracetest.NewInMemoryExporter() // your OTLP exporter in a service
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(ctx)

	cfg := config.Default()
	cfg.Queues = []string{"email"}
	w, err := worker.New(pool, cfg.Worker(), worker.Options{Observer: tracing.NewObserver(tracing.Options{TracerProvider: tp})})
	if err != nil {
		panic(err)
	}
	handled := make(chan trace.SpanContext, 1)
	if err := w.Register("welcome", func(ctx context.Context, _ *worker.Job) error {
		handled <- trace.SpanContextFromContext(ctx) // the handler's span, for its own child spans
		return nil
	}); err != nil {
		panic(err)
	}
	if err := w.Start(ctx); err != nil {
		panic(err)
	}

	// The producer: a request span, and the enqueue under it.
	reqCtx, req := tp.Tracer("shop").Start(ctx, "POST /signup")
	client := jobq.New(jobq.Options{TracerProvider: tp})
	if _, err := client.Enqueue(reqCtx, pool, jobq.Job{Queue: "email", Kind: "welcome"}); err != nil {
		panic(err)
	}
	req.End()

	sc := <-handled
	if err := w.Stop(ctx); err != nil {
		panic(err)
	}
	fmt.Println("handler in the request's trace:", sc.TraceID() == req.SpanContext().TraceID())
	for _, s := range exp.GetSpans() {
		if s.Name == "workq.handle" {
			for _, p := range exp.GetSpans() {
				if p.SpanContext.SpanID() == s.Parent.SpanID() {
					fmt.Println("handler span's parent:", p.Name)
				}
			}
		}
	}
	// Output:
	// handler in the request's trace: true
	// handler span's parent: workq.enqueue
}
