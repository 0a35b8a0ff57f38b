package tracing_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/outboxrt"
	"github.com/workq/workq/workqtype"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/workq/workq/internal/config"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/tracing"
	"github.com/workq/workq/internal/worker"
	"github.com/workq/workq/outbox"
)

func TestMain(m *testing.M) { testdb.Main(m) }

func newProvider(t *testing.T) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exp
}

func attr(s tracetest.SpanStub, key attribute.Key) (attribute.Value, bool) {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.Value, true
		}
	}
	return attribute.Value{}, false
}

// spansNamed returns the spans of name whose attribute key has value.
func spansNamed(spans tracetest.SpanStubs, name string, key attribute.Key, value string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range spans {
		if v, ok := attr(s, key); s.Name == name && ok && v.String() == value {
			out = append(out, s)
		}
	}
	return out
}

// One trace runs from the producer's request through the queue into the
// handler: for job runs enqueued each of the three ways and for an outbox
// message, the handler's span is a child of the enqueue span, in the
// request's trace; the worker's claims and completion flushes have spans
// with their table and queue.
func TestTraceFromProducerToHandler(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	tp, exp := newProvider(t)

	// The producer: one request span, four enqueue calls under it.
	reqCtx, req := tp.Tracer("test").Start(ctx, "request")
	client := jobq.New(jobq.Options{TracerProvider: tp})
	// User metadata travels beside the trace context.
	meta := map[string]string{"tenant": "acme"}
	if _, err := client.Enqueue(reqCtx, pool, jobq.Job{Queue: "tq", Kind: "one", Metadata: meta}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.EnqueueMany(reqCtx, pool, []jobq.Job{{Queue: "tq", Kind: "many", Metadata: meta}, {Queue: "tq", Kind: "many"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.EnqueueManyFast(reqCtx, pool, []jobq.Job{{Queue: "tq", Kind: "fast", Metadata: meta}}); err != nil {
		t.Fatal(err)
	}
	ob := outboxrt.NewClient(outboxrt.ClientOptions{TracerProvider: tp})
	if _, err := ob.Send(reqCtx, pool, outbox.Message{Queue: "tq", Topic: "order.created", Headers: map[string]string{"X-Other": "kept"}}); err != nil {
		t.Fatal(err)
	}
	req.End()

	// The worker: job runs and the outbox relay on queue tq.
	cfg := config.Default()
	cfg.Queues = []string{"tq"}
	w, err := worker.New(pool, cfg.Worker(), worker.Options{Observer: tracing.NewObserver(tracing.Options{TracerProvider: tp})})
	if err != nil {
		t.Fatal(err)
	}
	type handled struct {
		table, kind string
		sc          trace.SpanContext
		headers     map[string]string
		metadata    map[string]string
	}
	got := make(chan handled, 10)
	h := func(ctx context.Context, j *worker.Job) error {
		var hdr map[string]string
		if len(j.Headers) > 0 {
			if err := json.Unmarshal(j.Headers, &hdr); err != nil {
				return err
			}
		}
		got <- handled{string(j.Table), j.Kind, trace.SpanContextFromContext(ctx), hdr, workqtype.DecodeMetadata(j.Metadata)}
		return nil
	}
	for _, kind := range []string{"one", "many", "fast"} {
		if err := w.Register(kind, h); err != nil {
			t.Fatal(err)
		}
	}
	relay := outboxrt.NewRelay(outbox.RelayOptions{})
	if err := relay.Handle("order.created", h); err != nil {
		t.Fatal(err)
	}
	if err := w.AddSource(relay.Source("tq")); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var runs []handled
	for range 5 {
		select {
		case r := <-got:
			runs = append(runs, r)
		case <-time.After(30 * time.Second):
			t.Fatalf("handlers ran %d times within 30s, want 5", len(runs))
		}
	}
	if err := w.Stop(ctx); err != nil { // flushes the last completions, and their spans end
		t.Fatal(err)
	}

	spans := exp.GetSpans()
	traceID := req.SpanContext().TraceID()
	enqueues := map[string][]tracetest.SpanStub{} // by table
	for _, s := range spans {
		if s.Name == "workq.enqueue" {
			v, _ := attr(s, "workq.table")
			enqueues[v.String()] = append(enqueues[v.String()], s)
			if s.Parent.SpanID() != req.SpanContext().SpanID() || s.SpanKind != trace.SpanKindProducer {
				t.Errorf("enqueue span %v: parent %v kind %v, want the request span as parent and kind producer", s.SpanContext.SpanID(), s.Parent.SpanID(), s.SpanKind)
			}
		}
	}
	if len(enqueues["job_runs"]) != 3 || len(enqueues["outbox"]) != 1 {
		t.Fatalf("enqueue spans: %d of job_runs, %d of outbox; want 3 and 1", len(enqueues["job_runs"]), len(enqueues["outbox"]))
	}
	isEnqueue := func(sc trace.SpanContext, table string) bool {
		for _, e := range enqueues[table] {
			if e.SpanContext.SpanID() == sc.SpanID() {
				return true
			}
		}
		return false
	}
	handles := spansNamed(spans, "workq.handle", "workq.queue", "tq")
	if len(handles) != 5 {
		t.Fatalf("%d handler spans of queue tq, want 5", len(handles))
	}
	parents := map[trace.SpanID]int{}
	for _, s := range handles {
		table, _ := attr(s, "workq.table")
		if s.SpanContext.TraceID() != traceID || !isEnqueue(s.Parent, table.String()) || s.SpanKind != trace.SpanKindConsumer {
			t.Errorf("handler span of %s: trace %v parent %v kind %v; want trace %v, an enqueue span of %s as parent, kind consumer",
				table.String(), s.SpanContext.TraceID(), s.Parent.SpanID(), s.SpanKind, traceID, table.String())
		}
		parents[s.Parent.SpanID()]++
	}
	if len(parents) != 4 { // one per enqueue call: EnqueueMany's two jobs share theirs
		t.Errorf("handler spans have %d distinct parents, want 4 (one per enqueue call)", len(parents))
	}
	// The handler's context carries its span.
	for _, r := range runs {
		found := false
		for _, s := range handles {
			found = found || s.SpanContext.SpanID() == r.sc.SpanID()
		}
		if !found || r.sc.TraceID() != traceID {
			t.Errorf("%s %s: the handler's context has span %v of trace %v, not its handler span in the request's trace", r.table, r.kind, r.sc.SpanID(), r.sc.TraceID())
		}
		if r.table == "job_runs" && (r.metadata["traceparent"] == "" || (r.kind != "many" && r.metadata["tenant"] != "acme")) {
			t.Errorf("%s metadata %v: want traceparent added and tenant kept", r.kind, r.metadata)
		}
		if r.table == "outbox" && (r.headers["traceparent"] == "" || r.headers["X-Other"] != "kept") {
			t.Errorf("outbox headers %v: want traceparent added and X-Other kept", r.headers)
		}
	}
	for _, table := range []string{"job_runs", "outbox"} {
		for _, name := range []string{"workq.claim", "workq.complete"} {
			ss := spansNamed(spans, name, "workq.table", table)
			ok := false
			for _, s := range ss {
				q, _ := attr(s, "workq.queue")
				ok = ok || q.String() == "tq"
			}
			if !ok {
				t.Errorf("no %s span with workq.table=%s and workq.queue=tq among %d", name, table, len(ss))
			}
		}
	}
}

// Without a recording span (tracing off: the global provider is the
// default no-op), an enqueued job stores no metadata and a message gets no
// trace headers; with one, a message that sets traceparent keeps its own.
func TestNoTraceContextWithoutRecordingSpan(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	res, err := jobq.New(jobq.Options{}).Enqueue(ctx, pool, jobq.Job{Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	var isNull bool
	if err := pool.QueryRow(ctx, "select metadata is null from workq.job_runs_all where id = $1", res.ID).Scan(&isNull); err != nil {
		t.Fatal(err)
	}
	if !isNull {
		t.Error("a job enqueued without tracing has metadata, want SQL null")
	}
	sent, err := outboxrt.NewClient(outboxrt.ClientOptions{}).Send(ctx, pool, outbox.Message{Topic: "t"})
	if err != nil {
		t.Fatal(err)
	}
	var headers string
	if err := pool.QueryRow(ctx, "select headers::text from workq.outbox where id = $1", sent.ID).Scan(&headers); err != nil {
		t.Fatal(err)
	}
	if headers != "{}" {
		t.Errorf("a message sent without tracing has headers %s, want {}", headers)
	}

	tp, _ := newProvider(t)
	spanCtx, span := tp.Tracer("test").Start(ctx, "request")
	defer span.End()
	own := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	sent, err = outboxrt.NewClient(outboxrt.ClientOptions{TracerProvider: tp}).Send(spanCtx, pool,
		outbox.Message{Topic: "t", Headers: map[string]string{"Traceparent": own}})
	if err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, "select headers::text from workq.outbox where id = $1", sent.ID).Scan(&headers); err != nil {
		t.Fatal(err)
	}
	if headers != `{"Traceparent": "`+own+`"}` {
		t.Errorf("a message with its own traceparent has headers %s, want only its own", headers)
	}
}
