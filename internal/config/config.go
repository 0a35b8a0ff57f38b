// Package config is the CLI's flat configuration: the flags and WORKQ_*
// environment variables of cmd/workq, parsed into one Config. Precedence:
// flag, then environment, then default.
//
// The settings of workq.Config (the worker runtime's, the maintenance's,
// the Client's item defaults) are not declared here: cmd/workq declares
// them from workq.Config's fields (its clientSettings table), with the
// library's defaults and the library's validation, and binds them onto
// Config's fields through Bind's settings. What is left here is what only
// the CLI has: the database URL and pool, the built-in handlers and
// publishers, logging, metrics and tracing, and the HTTP API's listener
// and tokens.
package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/workq/workq/internal/maintain"
	"github.com/workq/workq/internal/redact"
	"github.com/workq/workq/internal/worker"
	"github.com/workq/workq/workqtype"

	"github.com/workq/workq/internal/dbschema"
)

// Config holds every setting of the CLI. Schema and the fields from
// WorkerID to ScheduleInterval hold settings of workq.Config: cmd/workq's
// table binds them (their flags, environment variables, defaults and
// validation are declared with workq.Config's fields; a duration whose
// library value "negative: none" is none holds a negative value). The
// others are the CLI's own.
type Config struct {
	DatabaseURL string // DATABASE_URL: libpq URL or keyword/value string
	Schema      string // PostgreSQL schema of workq's objects (docs/design.md, "Schema isolation")
	MaxConns    int32  // connection pool size

	// workq.Config's settings (cmd/workq's table).
	WorkerID    string        // recorded on claimed rows and in the run archive
	Queues      []string      // job_runs queues this worker serves
	Concurrency int           // handlers running at once, per queue
	Batch       int           // most rows one claim takes
	Lease       time.Duration // lease TTL; heartbeats run every Lease/3
	ExecTimeout time.Duration // hard deadline of one handler run (negative = none)
	Poll        time.Duration // claim poll interval when no notification arrives
	PollOnly    bool          // no LISTEN/NOTIFY (PgBouncer transaction pooling)
	Reclaim     bool          // producers reap their queue's expired leases before claiming

	NotifyDebounce time.Duration // enqueue sends at most one NOTIFY per queue per this
	FlushInterval  time.Duration // completer flushes at least this often
	FlushBatch     int           // ... or when this many completions wait
	DrainTimeout   time.Duration // on shutdown, how long in-flight handlers may finish
	RunsDir        string        // per-attempt meta.json and attempt.log ("" = off)

	MaxAttempts int           // default max attempts of new jobs (1 + retries)
	MaxPayload  int           // most bytes of a job's JSON payload, 1 to MaxPayloadCeiling
	BackoffBase time.Duration // full-jitter backoff: random(0, min(base*2^attempt, cap))
	BackoffCap  time.Duration

	ReapInterval time.Duration // reaper period
	ReapBatch    int           // most rows one reap statement handles (bounds its locks and WAL; the reaper loops over larger backlogs)

	LeaderTTL         time.Duration // maintenance leader lock TTL: a dead leader is replaced within it
	RetainFinished    time.Duration // done and failed items are deleted this long after they finished (negative = kept)
	RetainRuns        time.Duration // archived attempts are deleted this long after they ended (negative = kept)
	RetentionInterval time.Duration // how often the retention task runs
	InboxWindow       time.Duration // processed inbox messages are forgotten (deleted) this long after processing
	ScheduleInterval  time.Duration // how often due schedule slots are materialised
	VacuumInterval    time.Duration // how often the work tables' dead tuples are checked and vacuumed (negative = never)

	// The CLI's own settings.
	WebhookAllow   []string      // hosts the webhook handler may call
	WebhookSecret  string        // HMAC-SHA256 signing secret ("" = unsigned)
	WebhookTimeout time.Duration // per request
	ExecAllow      []string      // commands the exec handler may run

	LogLevel  string // debug, info, warn, error
	LogFormat string // text or json

	MetricsAddr          string        // serve Prometheus metrics at http://ADDR/metrics ("" = off)
	MetricsDepthInterval time.Duration // the queue depth is read at most this often (0 = no depth metrics)
	OtelExporter         string        // trace exporter: none or otlp-http
	OtelEndpoint         string        // OTLP/HTTP traces URL ("" = the OTEL_EXPORTER_OTLP_* variables, else http://localhost:4318/v1/traces)

	// Built-in outbox publishers per topic (config/publishers.go).
	OutboxWebhooks         []string      // TOPIC=URL, one per topic; hosts must be in WebhookAllow
	OutboxWebhookSecret    string        // HMAC-SHA256 key of outbox webhooks (required with OutboxWebhooks); whsec_ secrets under "standard"
	OutboxWebhookSignature string        // signature scheme of outbox webhooks: "workq" (Workq-Signature) or "standard" (Standard Webhooks)
	NATSURL                string        // NATS server(s) of the JetStream publisher
	OutboxNATS             []string      // TOPIC or TOPIC=SUBJECT, one per topic
	OutboxNATSPrefix       string        // subject prefix of TOPIC entries without =SUBJECT
	NATSTimeout            time.Duration // one JetStream publish including its ack

	// HTTP API (`workq api`, package api).
	APIAddr              string        // listen address
	APITokens            []string      // NAME:SCOPE:SHA256-HEX entries (hashes of the bearer tokens, never the tokens)
	APIMaxBody           int           // most bytes of a request body; 0: MaxPayload + 1 MiB
	APIReadHeaderTimeout time.Duration // to read a request's headers
	APIReadTimeout       time.Duration // to read a whole request
	APIWriteTimeout      time.Duration // from the end of the request headers to the end of the response
	APIIdleTimeout       time.Duration // keep-alive connections idle this long are closed
	APIMaxHeaderBytes    int           // most bytes of a request's headers
	APIShutdownTimeout   time.Duration // on shutdown, time for requests in flight to finish

	check func(Config) error // SetCheck's
}

// Default returns the built-in defaults. The workq.Config settings are
// the components' own defaults (package worker's, package maintain's),
// for the engine's tests that build a runtime from a Config (Worker);
// cmd/workq sets them from workq.Config's defaults instead.
func Default() Config {
	w := worker.DefaultConfig() // the worker part: written once, in package worker
	c := Config{
		Schema:               dbschema.Default,
		MaxConns:             10,
		WorkerID:             w.ID,
		Queues:               w.Queues,
		Concurrency:          w.Concurrency,
		Batch:                w.Batch,
		Lease:                w.Lease,
		ExecTimeout:          w.ExecTimeout,
		Poll:                 w.Poll,
		Reclaim:              true,
		NotifyDebounce:       workqtype.DefaultNotifyDebounce,
		FlushInterval:        w.FlushInterval,
		FlushBatch:           w.FlushBatch,
		DrainTimeout:         w.DrainTimeout,
		MaxAttempts:          workqtype.DefaultMaxAttempts,
		MaxPayload:           DefaultMaxPayload,
		BackoffBase:          w.BackoffBase,
		BackoffCap:           w.BackoffCap,
		ReapInterval:         maintain.DefaultReapInterval, // the maintenance's: written once, in package maintain
		ReapBatch:            maintain.DefaultReapBatch,
		LeaderTTL:            maintain.DefaultLeaderTTL,
		RetainFinished:       maintain.DefaultRetainFinished,
		RetainRuns:           maintain.DefaultRetainRuns, // also the worker's --runs-dir retention (the same default)
		RetentionInterval:    maintain.DefaultRetentionInterval,
		InboxWindow:          maintain.DefaultInboxWindow,
		ScheduleInterval:     maintain.DefaultScheduleInterval,
		VacuumInterval:       maintain.DefaultVacuumInterval,
		WebhookTimeout:       10 * time.Second,
		LogLevel:             "info",
		LogFormat:            "text",
		NATSTimeout:          5 * time.Second,
		MetricsDepthInterval: 15 * time.Second,
		OtelExporter:         OtelNone,

		APIAddr:              "127.0.0.1:8080",
		APIReadHeaderTimeout: 5 * time.Second,
		APIReadTimeout:       30 * time.Second,
		APIWriteTimeout:      60 * time.Second,
		APIIdleTimeout:       2 * time.Minute,
		APIMaxHeaderBytes:    64 << 10,
		APIShutdownTimeout:   10 * time.Second,
	}
	c.OutboxWebhookSignature = WebhookSignatureWorkq
	return c
}

// DefaultMaxPayload is the default limit on a job's JSON payload: 1 MiB.
const DefaultMaxPayload = workqtype.DefaultMaxPayload

// MaxPayloadCeiling is the highest payload limit workq accepts (256 MiB).
const MaxPayloadCeiling = workqtype.MaxPayloadCeiling

// Validate returns every problem with c, one per line: the CLI's own
// settings' here, the workq.Config settings' through the check cmd/workq
// set (SetCheck: the library's validation).
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.MaxConns < 2 {
		bad("max-conns must be at least 2 (one for LISTEN, one for claims), got %d", c.MaxConns)
	}
	for _, h := range c.WebhookAllow {
		if h == "" || strings.ContainsAny(h, "/ ") {
			bad("webhook-allow entry %q must be a host name or host:port", h)
		} else if host, port, err := net.SplitHostPort(h); err == nil {
			// SplitHostPort accepts any port text; "host:" or "host:http"
			// would never match a request URL.
			if n, perr := strconv.Atoi(port); host == "" || perr != nil || n < 1 || n > 65535 {
				bad("webhook-allow entry %q must be a host name or host:port with a port from 1 to 65535", h)
			}
		} else if strings.Count(h, ":") == 1 {
			bad("webhook-allow entry %q: %v", h, err)
		}
	}
	if c.WebhookTimeout <= 0 {
		bad("webhook-timeout must be positive, got %s", c.WebhookTimeout)
	}
	errs = append(errs, c.validatePublishers()...)
	if _, port, err := net.SplitHostPort(c.APIAddr); err != nil || port == "" {
		bad("api-addr %q must be host:port (e.g. 127.0.0.1:8080, or :8080 for every interface)", c.APIAddr)
	}
	if c.APIMaxBody != 0 && (c.APIMaxBody < 1024 || c.APIMaxBody > MaxPayloadCeiling+1<<20) {
		bad("api-max-body must be 0 (max-payload + 1 MiB) or between 1024 and %d bytes, got %d", MaxPayloadCeiling+1<<20, c.APIMaxBody)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"api-read-header-timeout", c.APIReadHeaderTimeout}, {"api-read-timeout", c.APIReadTimeout},
		{"api-write-timeout", c.APIWriteTimeout}, {"api-idle-timeout", c.APIIdleTimeout}, {"api-shutdown-timeout", c.APIShutdownTimeout}} {
		if d.v <= 0 {
			bad("%s must be positive, got %s", d.name, d.v)
		}
	}
	if c.APIMaxHeaderBytes < 4096 || c.APIMaxHeaderBytes > 1<<20 {
		bad("api-max-header-bytes must be between 4096 and 1048576, got %d", c.APIMaxHeaderBytes)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("log-level must be debug, info, warn or error, got %q", c.LogLevel)
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		bad("log-format must be text or json, got %q", c.LogFormat)
	}
	errs = append(errs, c.validateObservability()...)
	if c.check != nil {
		if err := c.check(c); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// SetCheck makes Validate also run check: cmd/workq's validation of the
// workq.Config settings (the library's, through its table).
func (c *Config) SetCheck(check func(Config) error) { c.check = check }

// Option describes one setting for flags, environment and documentation.
type Option struct {
	Flag    string
	Env     string
	Usage   string
	Default string
}

// Setting is a setting declared outside this package (cmd/workq's
// workq.Config settings) whose value is held in a Config: Ptr points into
// it (*string, *[]string, *int, *int32, *bool, *time.Duration, or a
// pflag.Value such as NoneDuration's, which parses the environment too).
type Setting struct {
	Option
	Ptr any
}

// Bind registers the settings used by a command on fs: the CLI's own ones
// of c and the given settings (pointing into c), with defaults taken from
// their values after the WORKQ_* environment is applied. It returns an
// error naming the variable when an environment value does not parse.
func (c *Config) Bind(fs *pflag.FlagSet, settings []Setting, names ...string) error {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	opts := c.all(settings)
	// Only the settings this command uses read the environment, so a bad
	// value in an unrelated WORKQ_* variable does not break it.
	if err := applyEnv(opts, os.LookupEnv, want); err != nil {
		return err
	}
	for _, o := range opts {
		if len(names) > 0 && !want[o.Flag] {
			continue
		}
		o.bind(fs)
	}
	return nil
}

// Options lists every setting with its value in c as the default: the
// database URL and pool first, then the given settings, then the CLI's
// own (the README table and `workq config`).
func (c *Config) Options(settings []Setting) []Option {
	var out []Option
	for _, o := range c.all(settings) {
		out = append(out, Option{Flag: o.Flag, Env: o.Env, Usage: o.Usage, Default: o.def()})
	}
	return out
}

// all returns c's own options with settings after the database ones.
func (c *Config) all(settings []Setting) []option {
	own := c.options()
	out := slices.Clone(own[:2]) // database-url, max-conns
	for _, s := range settings {
		out = append(out, option{s.Option, s.Ptr})
	}
	return append(out, own[2:]...)
}

// None is how the CLI writes the none of a duration setting.
const None = "none"

// NoneDuration returns the flag value of a duration whose negative value
// is none (workq.Config's convention): it parses "none" and any negative
// duration as none (held as -1ns), a zero as none too when zeroIsNone
// (the CLI's old spelling of none, kept for the settings that documented
// it), and shows none as "none".
func NoneDuration(p *time.Duration, zeroIsNone bool) pflag.Value {
	return &noneDuration{p: p, zeroIsNone: zeroIsNone}
}

type noneDuration struct {
	p          *time.Duration
	zeroIsNone bool
}

func (d *noneDuration) Set(v string) error {
	if strings.EqualFold(strings.TrimSpace(v), None) {
		*d.p = -1
		return nil
	}
	n, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("not a duration (e.g. 500ms, 30s, 5m) or %s", None)
	}
	if n < 0 || (n == 0 && d.zeroIsNone) {
		n = -1
	}
	*d.p = n
	return nil
}

func (d *noneDuration) String() string {
	if d.p == nil {
		return ""
	}
	if *d.p < 0 {
		return None
	}
	return d.p.String()
}

func (d *noneDuration) Type() string { return "duration" }

type option struct {
	Option
	ptr any
}

func (o option) def() string {
	switch p := o.ptr.(type) {
	case pflag.Value:
		return p.String()
	case *string:
		if *p == "" {
			return "none"
		}
		return *p
	case *[]string:
		if len(*p) == 0 {
			return "none"
		}
		return strings.Join(*p, ",")
	case *int:
		return strconv.Itoa(*p)
	case *int32:
		return strconv.Itoa(int(*p))
	case *bool:
		return strconv.FormatBool(*p)
	case *time.Duration:
		return p.String()
	}
	return "?"
}

// secretFlags are the settings whose value (from the environment) must not
// be shown as a flag's default in --help: connection strings lose their
// password, secrets are hidden whole.
var secretFlags = map[string]func(string) string{
	"database-url":          redact.URL,
	"nats-url":              redact.URL,
	"otel-endpoint":         redact.URL,
	"webhook-secret":        hideSecret,
	"outbox-webhook-secret": hideSecret,
}

func hideSecret(s string) string {
	if s == "" {
		return s
	}
	return "(set)"
}

func (o option) bind(fs *pflag.FlagSet) {
	defer func() {
		if show, ok := secretFlags[o.Flag]; ok {
			if f := fs.Lookup(o.Flag); f != nil && f.DefValue != "" {
				f.DefValue = show(f.DefValue)
			}
		}
	}()
	switch p := o.ptr.(type) {
	case pflag.Value:
		fs.Var(p, o.Flag, o.Usage)
	case *string:
		fs.StringVar(p, o.Flag, *p, o.Usage)
	case *[]string:
		fs.StringSliceVar(p, o.Flag, *p, o.Usage)
	case *int:
		fs.IntVar(p, o.Flag, *p, o.Usage)
	case *int32:
		fs.Int32Var(p, o.Flag, *p, o.Usage)
	case *bool:
		fs.BoolVar(p, o.Flag, *p, o.Usage)
	case *time.Duration:
		fs.DurationVar(p, o.Flag, *p, o.Usage)
	}
}

func (c *Config) options() []option {
	o := func(flag, env string, ptr any, usage string) option {
		return option{Option{Flag: flag, Env: env, Usage: usage}, ptr}
	}
	return []option{
		o("database-url", "DATABASE_URL", &c.DatabaseURL, "PostgreSQL URL or keyword/value string"),
		o("max-conns", "WORKQ_MAX_CONNS", &c.MaxConns, "connection pool size"),
		o("webhook-allow", "WORKQ_WEBHOOK_ALLOW", &c.WebhookAllow, "hosts (host or host:port) the webhook handler may call"),
		o("webhook-secret", "WORKQ_WEBHOOK_SECRET", &c.WebhookSecret, "HMAC-SHA256 key for the X-Workq-Signature header"),
		o("webhook-timeout", "WORKQ_WEBHOOK_TIMEOUT", &c.WebhookTimeout, "webhook request timeout"),
		o("exec-allow", "WORKQ_EXEC_ALLOW", &c.ExecAllow, "commands (absolute paths or names) the exec handler may run"),
		o("log-level", "WORKQ_LOG_LEVEL", &c.LogLevel, "debug, info, warn or error"),
		o("log-format", "WORKQ_LOG_FORMAT", &c.LogFormat, "text or json"),
		o("metrics-addr", "WORKQ_METRICS_ADDR", &c.MetricsAddr, "serve Prometheus metrics at http://ADDR/metrics (host:port; none = off)"),
		o("metrics-depth-interval", "WORKQ_METRICS_DEPTH_INTERVAL", &c.MetricsDepthInterval, "with --metrics-addr: read the queue depth (one statement per work table) at most this often; 0 = no depth metrics"),
		o("otel-exporter", "WORKQ_OTEL_EXPORTER", &c.OtelExporter, "OpenTelemetry trace exporter: none or otlp-http (the OTEL_* variables configure it)"),
		o("otel-endpoint", "WORKQ_OTEL_ENDPOINT", &c.OtelEndpoint, "OTLP/HTTP traces URL, e.g. http://collector:4318/v1/traces (none = OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT, else localhost:4318)"),
		o("outbox-webhook", "WORKQ_OUTBOX_WEBHOOK", &c.OutboxWebhooks, "outbox webhook publisher TOPIC=URL, repeatable; the host must be in --webhook-allow"),
		o("outbox-webhook-secret", "WORKQ_OUTBOX_WEBHOOK_SECRET", &c.OutboxWebhookSecret, "HMAC-SHA256 key of outbox webhooks' signatures (with --outbox-webhook-signature standard: whsec_<base64>, several space-separated while rotating)"),
		o("outbox-webhook-signature", "WORKQ_OUTBOX_WEBHOOK_SIGNATURE", &c.OutboxWebhookSignature, "signature scheme of outbox webhooks: workq (Workq-Timestamp, Workq-Signature) or standard (Standard Webhooks: webhook-id, webhook-timestamp, webhook-signature)"),
		o("nats-url", "WORKQ_NATS_URL", &c.NATSURL, "NATS server URL(s) of the JetStream outbox publisher"),
		o("outbox-nats", "WORKQ_OUTBOX_NATS", &c.OutboxNATS, "outbox JetStream publisher TOPIC or TOPIC=SUBJECT, repeatable"),
		o("outbox-nats-prefix", "WORKQ_OUTBOX_NATS_PREFIX", &c.OutboxNATSPrefix, "subject prefix of --outbox-nats TOPIC entries without =SUBJECT"),
		o("nats-timeout", "WORKQ_NATS_TIMEOUT", &c.NATSTimeout, "JetStream publish timeout, ack included"),
		o("api-addr", "WORKQ_API_ADDR", &c.APIAddr, "HTTP API listen address host:port"),
		o("api-tokens", "WORKQ_API_TOKENS", &c.APITokens, "HTTP API bearer tokens as NAME:SCOPE:SHA256-HEX (scope read or admin; the hash, never the token: workq api token makes one), comma-separated"),
		o("api-max-body", "WORKQ_API_MAX_BODY", &c.APIMaxBody, "most bytes of an HTTP API request body (0 = max-payload + 1 MiB)"),
		o("api-read-header-timeout", "WORKQ_API_READ_HEADER_TIMEOUT", &c.APIReadHeaderTimeout, "HTTP API: time to read a request's headers"),
		o("api-read-timeout", "WORKQ_API_READ_TIMEOUT", &c.APIReadTimeout, "HTTP API: time to read a whole request"),
		o("api-write-timeout", "WORKQ_API_WRITE_TIMEOUT", &c.APIWriteTimeout, "HTTP API: time from the end of the request headers to the end of the response"),
		o("api-idle-timeout", "WORKQ_API_IDLE_TIMEOUT", &c.APIIdleTimeout, "HTTP API: idle keep-alive connections are closed after this"),
		o("api-max-header-bytes", "WORKQ_API_MAX_HEADER_BYTES", &c.APIMaxHeaderBytes, "HTTP API: most bytes of a request's headers"),
		o("api-shutdown-timeout", "WORKQ_API_SHUTDOWN_TIMEOUT", &c.APIShutdownTimeout, "HTTP API: on shutdown, time for requests in flight to finish"),
	}
}

// applyEnv sets every option of opts whose environment variable is present.
func applyEnv(opts []option, lookup func(string) (string, bool), only map[string]bool) error {
	var errs []error
	for _, o := range opts {
		if len(only) > 0 && !only[o.Flag] {
			continue
		}
		v, ok := lookup(o.Env)
		if !ok {
			continue
		}
		if err := set(o.ptr, v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", o.Env, v, err))
		}
	}
	return errors.Join(errs...)
}

func set(ptr any, v string) error {
	switch p := ptr.(type) {
	case pflag.Value:
		return p.Set(v)
	case *string:
		*p = v
	case *[]string:
		*p = nil
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				*p = append(*p, s)
			}
		}
	case *int:
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("not an integer")
		}
		*p = n
	case *int32:
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return fmt.Errorf("not a 32-bit integer")
		}
		*p = int32(n)
	case *bool:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("not a boolean (true/false)")
		}
		*p = b
	case *time.Duration:
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("not a duration (e.g. 500ms, 30s, 5m)")
		}
		*p = d
	}
	return nil
}
