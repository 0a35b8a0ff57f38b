// Package tracing traces workq's worker runtime with OpenTelemetry: one
// span per claim statement (workq.claim), per handler run (workq.handle)
// and per completion flush (workq.complete). A handler's span is a child
// of the span that enqueued its item, whose trace context the item carries
// (job runs: job_runs.metadata; outbox messages: the traceparent and
// tracestate headers), so one trace shows producer, queue and handler.
//
// The enqueue side needs nothing from this package: jobq.Client and
// outboxrt.Client make their enqueue spans with the global TracerProvider
// (or the one in their options) and store the trace context while the
// span is recording. On the worker, set NewObserver's result as
// worker.Options.Observer (with worker.Observers to combine it with
// metrics). Without it the runtime makes no spans and pays nothing.
package tracing

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/workq/workq/internal/kinds"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/otelx"
	"github.com/workq/workq/internal/worker"
)

// Options configure the observer; zero values take the defaults.
type Options struct {
	// TracerProvider makes the spans. Nil: the global provider
	// (otel.SetTracerProvider).
	TracerProvider trace.TracerProvider
	// Propagator reads the items' trace context. Nil: the global
	// propagator if one is set, else W3C trace context.
	Propagator propagation.TextMapPropagator
}

// NewObserver returns a worker.Observer that makes the runtime's spans.
func NewObserver(o Options) worker.Observer {
	return &observer{tracer: otelx.Tracer(o.TracerProvider), prop: otelx.Propagator(o.Propagator)}
}

type observer struct {
	worker.NopObserver
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

// Claimed makes the claim span after the fact, with the claim's own start
// and end times (a root span: a claim serves many traces).
func (o *observer) Claimed(e worker.ClaimEvent) {
	_, span := o.tracer.Start(context.Background(), otelx.SpanClaim,
		trace.WithTimestamp(e.Started), trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(otelx.AttrSystem.String(otelx.System), otelx.AttrOperation.String("receive"),
			otelx.AttrTable.String(string(e.Table)), otelx.AttrQueue.String(e.Queue), otelx.AttrDestination.String(e.Queue),
			otelx.AttrItems.Int(len(e.Items)))
		if e.Err != nil {
			otelx.Fail(span, e.Err)
		}
	}
	span.End(trace.WithTimestamp(e.Started.Add(e.Took)))
}

// HandlerStart starts the handler's span as a child of the span that
// enqueued the item, when the item carries its trace context.
func (o *observer) HandlerStart(ctx context.Context, job *worker.Job) context.Context {
	parent := ctx
	if c := carrier(&job.Item); c != nil {
		parent = o.prop.Extract(ctx, c)
	}
	ctx, span := o.tracer.Start(parent, otelx.SpanHandle, trace.WithSpanKind(trace.SpanKindConsumer))
	if span.IsRecording() {
		span.SetAttributes(otelx.AttrSystem.String(otelx.System), otelx.AttrOperation.String("process"),
			otelx.AttrTable.String(string(job.Table)), otelx.AttrQueue.String(job.Queue), otelx.AttrDestination.String(job.Queue),
			otelx.AttrKind.String(job.Kind), otelx.AttrID.Int64(job.ID), otelx.AttrAttempt.Int(int(job.Attempt)))
	}
	return ctx
}

// carrier is the trace context an item carries, or nil.
func carrier(it *lease.Item) propagation.MapCarrier {
	if k, ok := kinds.Of(it.Table); ok && k.TraceContext != nil {
		return otelx.Carrier(k.TraceContext(it))
	}
	return nil
}

// HandlerEnd ends the handler's span; an error (a snooze is none) marks it
// failed.
func (o *observer) HandlerEnd(ctx context.Context, _ *worker.Job, err error, _ time.Duration) {
	span := trace.SpanFromContext(ctx)
	if err != nil && !worker.IsSnoozed(err) {
		otelx.Fail(span, err)
	}
	span.End()
}

// Flushed makes the completion span after the fact, like Claimed.
func (o *observer) Flushed(e worker.FlushEvent) {
	_, span := o.tracer.Start(context.Background(), otelx.SpanComplete,
		trace.WithTimestamp(e.Started), trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(otelx.AttrSystem.String(otelx.System), otelx.AttrOperation.String("settle"),
			otelx.AttrTable.String(string(e.Table)), otelx.AttrQueues.StringSlice(e.Queues),
			otelx.AttrItems.Int(e.Size), otelx.AttrLost.Int(e.Lost), otelx.AttrTries.Int(e.Tries))
		if len(e.Queues) == 1 {
			span.SetAttributes(otelx.AttrQueue.String(e.Queues[0]), otelx.AttrDestination.String(e.Queues[0]))
		}
		if e.Err != nil {
			otelx.Fail(span, e.Err)
		}
	}
	span.End(trace.WithTimestamp(e.Started.Add(e.Took)))
}
