// Package otelx holds what workq's packages share for OpenTelemetry
// tracing: the tracer and propagator defaults, span names and attribute
// keys, and the trace context carried by an item (job_runs.metadata,
// outbox headers).
package otelx

import (
	"context"
	"encoding/json"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/workq/workq/workqtype"
)

// Scope is the instrumentation scope of workq's spans.
const Scope = "github.com/workq/workq"

// Span names.
const (
	SpanEnqueue  = "workq.enqueue"  // a producer writes items (producer span)
	SpanClaim    = "workq.claim"    // one claim statement of a worker
	SpanHandle   = "workq.handle"   // one handler run (consumer span, child of the producer's)
	SpanComplete = "workq.complete" // one completion flush of a worker
)

// Attribute keys.
const (
	AttrTable   = attribute.Key("workq.table")
	AttrQueue   = attribute.Key("workq.queue")
	AttrQueues  = attribute.Key("workq.queues")
	AttrKind    = attribute.Key("workq.kind") // job kind or topic
	AttrID      = attribute.Key("workq.id")
	AttrAttempt = attribute.Key("workq.attempt")
	AttrItems   = attribute.Key("workq.items")
	AttrLost    = attribute.Key("workq.lease_lost")
	AttrTries   = attribute.Key("workq.tries")
	// OpenTelemetry's messaging conventions, for backends that group by them.
	AttrSystem      = attribute.Key("messaging.system")
	AttrDestination = attribute.Key("messaging.destination.name")
	AttrOperation   = attribute.Key("messaging.operation.type")
)

// System is the messaging.system value of workq's spans.
const System = "workq"

// Tracer returns the tracer of tp, or of the global provider when tp is
// nil (whose tracers follow a provider set later, otel.SetTracerProvider).
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(Scope)
}

// Propagator returns p, or when p is nil the global propagator if one is
// set, else W3C trace context (decided per use, so a propagator set later
// is used): the global default propagates nothing, and an item must carry
// traceparent for its handler to continue the producer's trace.
func Propagator(p propagation.TextMapPropagator) propagation.TextMapPropagator {
	if p != nil {
		return p
	}
	return defaultPropagator{}
}

type defaultPropagator struct{}

func (defaultPropagator) get() propagation.TextMapPropagator {
	if g := otel.GetTextMapPropagator(); len(g.Fields()) > 0 {
		return g
	}
	return propagation.TraceContext{}
}

func (d defaultPropagator) Inject(ctx context.Context, c propagation.TextMapCarrier) {
	d.get().Inject(ctx, c)
}

func (d defaultPropagator) Extract(ctx context.Context, c propagation.TextMapCarrier) context.Context {
	return d.get().Extract(ctx, c)
}

func (d defaultPropagator) Fields() []string { return d.get().Fields() }

// Inject returns the trace context of ctx's span as carrier fields
// (traceparent, tracestate, ...), or nil when ctx's span is not recording.
func Inject(ctx context.Context, p propagation.TextMapPropagator) map[string]string {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return nil
	}
	c := propagation.MapCarrier{}
	p.Inject(ctx, c)
	if len(c) == 0 {
		return nil
	}
	return c
}

// Metadata returns the job_runs.metadata of an item enqueued under ctx: a
// JSON object of the carrier fields, or nil (SQL null) when ctx's span is
// not recording.
func Metadata(ctx context.Context, p propagation.TextMapPropagator) []byte {
	c := Inject(ctx, p)
	if c == nil {
		return nil
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil
	}
	return b
}

// Carrier reads the carrier fields out of a JSON object (job metadata or
// outbox headers): its string members, with lower-case names (header names
// are case-insensitive; propagators look up lower-case ones). Nil when
// there is none.
func Carrier(obj []byte) propagation.MapCarrier {
	m := workqtype.DecodeMetadata(obj)
	if m == nil {
		return nil
	}
	c := make(propagation.MapCarrier, len(m))
	for k, v := range m {
		c[strings.ToLower(k)] = v
	}
	return c
}

// WithTrace returns fields (an item's metadata or headers) with the trace
// context fields added, unless fields sets traceparent itself (any case:
// the caller's own trace context wins) or the sum would have more than
// maxFields fields (0: no limit). It returns a copy when it adds them; the
// caller's map is left alone.
func WithTrace(fields, trace map[string]string, maxFields int) map[string]string {
	if len(trace) == 0 || (maxFields > 0 && len(fields)+len(trace) > maxFields) {
		return fields
	}
	for name := range fields {
		if strings.EqualFold(name, "traceparent") {
			return fields
		}
	}
	out := make(map[string]string, len(fields)+len(trace))
	for k, v := range fields {
		out[k] = v
	}
	for k, v := range trace {
		out[k] = v
	}
	return out
}

// Fail marks span failed with err.
func Fail(span trace.Span, err error) {
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
}

// StartEnqueue starts the producer span of one enqueue call that writes n
// items of table; queue and kind ("" when the items differ) become
// attributes. Attributes are set only on a recording span, so a call
// without tracing allocates nothing for them.
func StartEnqueue(ctx context.Context, t trace.Tracer, table, queue, kind string, n int) (context.Context, trace.Span) {
	ctx, span := t.Start(ctx, SpanEnqueue, trace.WithSpanKind(trace.SpanKindProducer))
	if !span.IsRecording() {
		return ctx, span
	}
	span.SetAttributes(AttrSystem.String(System), AttrOperation.String("send"), AttrTable.String(table), AttrItems.Int(n))
	if queue != "" {
		span.SetAttributes(AttrQueue.String(queue), AttrDestination.String(queue))
	}
	if kind != "" {
		span.SetAttributes(AttrKind.String(kind))
	}
	return ctx, span
}

// End ends span, marking it failed with err when err is not nil.
func End(span trace.Span, err error) {
	if err != nil {
		Fail(span, err)
	}
	span.End()
}
