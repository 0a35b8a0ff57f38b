package tracing_test

import (
	"context"
	"fmt"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
)

// WelcomeArgs are the example's job.
type WelcomeArgs struct{}

func (WelcomeArgs) Kind() string { return "welcome" }

// A job enqueued under a span carries that span's trace context; the
// Client's tracing starts the handler's span as its child, so the
// producer's request and the handler are one trace. The Client's
// TracerProvider makes both the enqueue and the handler spans (without
// one, enqueues use the global provider and handlers have no spans).
func Example() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	exp := tracetest.NewInMemoryExporter() // your OTLP exporter in a service
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(ctx)

	handled := make(chan trace.SpanContext, 1)
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, _ *workq.Job[WelcomeArgs]) error {
		handled <- trace.SpanContextFromContext(ctx) // the handler's span, for its own child spans
		return nil
	}))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers, TracerProvider: tp})
	if err != nil {
		panic(err)
	}
	if err := client.Start(ctx); err != nil {
		panic(err)
	}

	// The producer: a request span, and the enqueue under it.
	reqCtx, req := tp.Tracer("shop").Start(ctx, "POST /signup")
	if _, err := client.Enqueue(reqCtx, WelcomeArgs{}, nil); err != nil {
		panic(err)
	}
	req.End()

	sc := <-handled
	if err := client.Stop(ctx); err != nil {
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
