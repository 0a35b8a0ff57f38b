package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/workq/workq/internal/config"
	"github.com/workq/workq/internal/metrics"
	"github.com/workq/workq/internal/redact"
)

// observability is what --metrics-addr and --otel-exporter set up in one
// process; the process's Client is told about it (clientConfig). Its
// methods work on nil (everything off).
type observability struct {
	metrics *metrics.Metrics // nil without --metrics-addr
	server  *metrics.Server
	tp      *sdktrace.TracerProvider // nil with --otel-exporter none
	log     *slog.Logger
}

// observeShutdown bounds the metrics server's shutdown and the last export
// of spans when the process stops.
const observeShutdown = 5 * time.Second

// startObservability serves /metrics on cfg.MetricsAddr and sets up the
// OTLP trace exporter, as configured; with both off it returns nil. Call
// close when the process stops, after its workers.
func startObservability(ctx context.Context, cfg config.Config, pool *pgxpool.Pool, log *slog.Logger) (*observability, error) {
	o := &observability{log: log}
	if cfg.MetricsAddr != "" {
		opts := metrics.Options{Logger: log, DepthInterval: cfg.MetricsDepthInterval}
		if cfg.MetricsDepthInterval > 0 {
			opts.Depth = metrics.DefaultDepth(inSchema(&cfg, pool))
			opts.Flow = metrics.DefaultFlow(inSchema(&cfg, pool))
		}
		m, err := metrics.New(opts)
		if err != nil {
			return nil, err
		}
		srv, err := metrics.Listen(cfg.MetricsAddr, m.Handler(), log)
		if err != nil {
			return nil, err
		}
		o.metrics, o.server = m, srv
	}
	if cfg.OtelExporter == config.OtelOTLPHTTP && !otelDisabled() {
		tp, err := newTracerProvider(ctx, cfg)
		if err != nil {
			o.close()
			return nil, err
		}
		o.tp = tp
		otel.SetTracerProvider(tp)
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
		log.Info("tracing: exporting spans over OTLP/HTTP", "endpoint", cmp(redact.URL(cfg.OtelEndpoint), "(OTEL_EXPORTER_OTLP_* or localhost:4318)"))
	}
	if o.metrics == nil && o.tp == nil {
		return nil, nil
	}
	return o, nil
}

func cmp(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

// otelDisabled honours the OpenTelemetry SDK's switch OTEL_SDK_DISABLED.
func otelDisabled() bool { return strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") }

// newTracerProvider returns a provider that batches spans to the OTLP/HTTP
// exporter. The exporter reads the standard OTEL_EXPORTER_OTLP_* variables
// (endpoint, headers, timeout, compression; --otel-endpoint wins over the
// endpoint), the provider OTEL_TRACES_SAMPLER, and the resource
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (the service name is
// "workq" unless they say otherwise).
func newTracerProvider(ctx context.Context, cfg config.Config) (*sdktrace.TracerProvider, error) {
	var opts []otlptracehttp.Option
	if cfg.OtelEndpoint != "" {
		opts = append(opts, otlptracehttp.WithEndpointURL(cfg.OtelEndpoint))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("otlp trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "workq"), attribute.String("service.instance.id", cfg.WorkerID)),
		resource.WithTelemetrySDK(), resource.WithHost(), resource.WithFromEnv())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// metricsHandler serves the metrics, for the HTTP API's /metrics; nil
// without --metrics-addr.
func (o *observability) metricsHandler() http.Handler {
	if o == nil || o.metrics == nil {
		return nil
	}
	return o.metrics.Handler()
}

// close stops the metrics server and flushes the last spans, each within
// observeShutdown.
func (o *observability) close() {
	if o == nil {
		return
	}
	if o.server != nil {
		ctx, cancel := context.WithTimeout(context.Background(), observeShutdown)
		if err := o.server.Shutdown(ctx); err != nil {
			o.log.Warn("metrics: server shutdown", "err", err)
		}
		cancel()
	}
	if o.tp != nil {
		ctx, cancel := context.WithTimeout(context.Background(), observeShutdown)
		if err := o.tp.Shutdown(ctx); err != nil {
			o.log.Warn("tracing: flushing the last spans failed", "err", err)
		}
		cancel()
	}
}
