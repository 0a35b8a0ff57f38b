package config

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"
)

// Trace exporters (OtelExporter).
const (
	OtelNone     = "none"
	OtelOTLPHTTP = "otlp-http"
)

// ObservabilityFlags are the settings of metrics and tracing, for the
// long-running processes (`workq worker`, `workq maintain`, `workq run`).
var ObservabilityFlags = []string{"metrics-addr", "metrics-depth-interval", "otel-exporter", "otel-endpoint"}

func (c Config) validateObservability() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.MetricsAddr != "" {
		_, port, err := net.SplitHostPort(c.MetricsAddr)
		if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 0 || n > 65535 {
			bad("metrics-addr %q must be host:port (e.g. :9090 or 127.0.0.1:9090)", c.MetricsAddr)
		}
	}
	if c.MetricsDepthInterval != 0 && c.MetricsDepthInterval < time.Second {
		bad("metrics-depth-interval must be 0 (off) or at least 1s, got %s", c.MetricsDepthInterval)
	}
	switch c.OtelExporter {
	case OtelNone, OtelOTLPHTTP:
	default:
		bad("otel-exporter must be %s or %s, got %q", OtelNone, OtelOTLPHTTP, c.OtelExporter)
	}
	if c.OtelEndpoint != "" {
		u, err := url.Parse(c.OtelEndpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("otel-endpoint %q must be an http or https URL, e.g. http://collector:4318/v1/traces", c.OtelEndpoint)
		}
	}
	return errs
}
