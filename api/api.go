// Package api is workq's HTTP API: JSON over HTTP to enqueue job runs,
// outbox messages and timers, receive into the inbox, read and page
// through the items of every work table, retry, cancel and delete them,
// pause and resume queues, set their limits and manage schedules. It is a
// user of a workq.Client (New takes one): the Client's databases, shards,
// schema, payload limit and defaults are the API's, every enqueue is the
// Client's (its enqueue middleware runs, and it places each item on its
// key's shard), and every request is checked by the Client's checks before
// anything is written: a rejected request writes nothing.
//
// A Server is an http.Handler to embed in a program's own server, or runs
// its own listener with Start and Stop (Run for a process: `workq api`).
// Requests carry a bearer token (Options.Tokens: names, scopes and SHA-256
// hashes, never the secrets); read tokens may call GET endpoints, admin
// tokens every endpoint. /healthz, /readyz and /openapi.json need none.
// The routes are one table (routes.go) that both the ServeMux and the test
// of the embedded OpenAPI document walk; docs/api.md describes them.
package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/inbox"
	"github.com/workq/workq/internal/authlimit"
	"github.com/workq/workq/internal/clienthook"
	"github.com/workq/workq/internal/config"
	"github.com/workq/workq/internal/startstop"
	"github.com/workq/workq/internal/ui"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/timers"
)

// ErrNoTokens is returned by New and Start for a server that would accept
// requests without a token when that was not explicitly allowed (Insecure,
// and for Start a loopback address).
var ErrNoTokens = errors.New("refusing to serve the API without a token")

// Limits of one request.
const (
	MaxBatch = 1000 // most items of one batch request
)

// Options configure a Server: HTTP settings only (the databases, shards,
// schema, payload limit and item defaults are the Client's); zero values
// take the defaults.
type Options struct {
	Logger *slog.Logger // nil: slog.Default()

	// Tokens are the accepted bearer tokens (ParseTokens reads them from
	// the api-tokens setting). With none, New fails unless Insecure is set;
	// then every request is served as the admin "anonymous", Start only
	// listens on a loopback address, and only requests whose Host is a
	// loopback name or address are answered (421 otherwise).
	Tokens   []Token
	Insecure bool

	// MaxBodyBytes limits a request body (0: the Client's MaxPayloadBytes
	// + 1 MiB); a larger one gets 413 and is not read.
	MaxBodyBytes int64

	// Metrics, when set, is served at GET /metrics (read scope): the
	// Prometheus handler of the process.
	Metrics http.Handler

	// The dashboard, served at /ui/ unless DisableUI. RunsDir is the
	// workers' --runs-dir when this process can read it (the item page
	// shows attempt logs). SampleInterval is how often the overview's
	// history is sampled (0: 10s).
	DisableUI      bool
	RunsDir        string
	SampleInterval time.Duration
	// ShardTimeout bounds the dashboard's read of one shard (a page's, a
	// sample's) of a sharded Client: a shard that does not answer in time
	// is shown as unreachable and the others are served (0: 3s). It also
	// bounds each shard's part of an API request that goes to every shard
	// (the queue list, pause, resume, the schedule list).
	ShardTimeout time.Duration

	// The listener of Start and Run.
	Addr              string        // "": 127.0.0.1:8080
	ReadHeaderTimeout time.Duration // 0: 5s
	ReadTimeout       time.Duration // 0: 30s
	WriteTimeout      time.Duration // 0: 60s
	IdleTimeout       time.Duration // 0: 2m
	MaxHeaderBytes    int           // 0: 64 KiB
	ShutdownTimeout   time.Duration // Run's bound on Stop (0: 10s)
}

// Server serves the API. It is an http.Handler; Start, Stop and Run run
// it on its own listener.
type Server struct {
	o       Options
	log     *slog.Logger
	mux     *http.ServeMux
	maxBody int64

	client *workq.Client // every enqueue; the other operations are in ops.go
	// waits holds a place per request waiting (?wait=), each of which
	// holds a pooled connection: at most a quarter of the smallest shard
	// pool's connections, so that waits never take the connections every
	// other request needs (a request past it waits for a place).
	waits chan struct{}
	// From the client (clienthook.API): its shards' databases in its
	// schema (one unnamed for a NewClient's DefaultShard), its schedule
	// store and its item checks.
	shards          []dbShard
	validateMessage func(outbox.Message) error
	validateTimer   func(timers.Timer) error
	validateInbox   func(inbox.Message) error
	sampler         *ui.Sampler // nil without the dashboard

	cop      *http.CrossOriginProtection // refuses cross-site writes
	failures *authlimit.Limiter          // failed tokens per client address, shared with the dashboard's logins
	ready    *readiness                  // /readyz's cached answer

	mu      sync.Mutex
	srv     *http.Server
	ln      net.Listener
	serving chan error          // Serve's result, when it returns
	life    startstop.Lifecycle // its run is the sampler of Start
}

// New returns a Server of client (a producer's: it enqueues, and needs
// neither workers nor maintenance) with the HTTP options o. The Client's
// databases (every shard of a NewShardedClient's), schema, payload limit
// and item defaults are the API's.
func New(client *workq.Client, o Options) (*Server, error) {
	if client == nil {
		return nil, errors.New("api: New needs a workq.Client")
	}
	h, err := clienthook.APIOf(client)
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	if len(o.Tokens) == 0 && !o.Insecure {
		return nil, fmt.Errorf("%w: configure api-tokens (workq api token NAME makes one), or set Insecure to serve without", ErrNoTokens)
	}
	d := config.Default()
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = int64(h.MaxPayloadBytes) + 1<<20
	}
	if o.MaxBodyBytes < 0 {
		return nil, fmt.Errorf("api: MaxBodyBytes must not be negative, got %d", o.MaxBodyBytes)
	}
	setDefault(&o.Addr, d.APIAddr)
	setDefault(&o.ReadHeaderTimeout, d.APIReadHeaderTimeout)
	setDefault(&o.ReadTimeout, d.APIReadTimeout)
	setDefault(&o.WriteTimeout, d.APIWriteTimeout)
	setDefault(&o.IdleTimeout, d.APIIdleTimeout)
	setDefault(&o.MaxHeaderBytes, d.APIMaxHeaderBytes)
	setDefault(&o.ShutdownTimeout, d.APIShutdownTimeout)

	s := &Server{
		o: o, log: o.Logger, mux: http.NewServeMux(), maxBody: o.MaxBodyBytes,
		client: client, shards: shardsOf(h), waits: make(chan struct{}, waitPlaces(client)),
		validateMessage: h.ValidateMessage, validateTimer: h.ValidateTimer, validateInbox: h.ValidateInbox,
		cop:      http.NewCrossOriginProtection(),
		failures: authlimit.New(authlimit.Options{}),
	}
	s.ready = newReadiness(s.checkReady)
	for _, rt := range routes() {
		if rt.path == metricsPath && o.Metrics == nil {
			continue
		}
		s.mux.Handle(rt.method+" "+rt.path, s.wrap(rt))
	}
	if !o.DisableUI {
		if err := s.mountUI(); err != nil {
			return nil, err
		}
	}
	if len(o.Tokens) == 0 {
		s.log.Warn("the HTTP API accepts every request without a token (insecure mode): bind it to loopback only")
	}
	return s, nil
}

// mountUI serves the dashboard at /ui/ with its sampler, which Start runs:
// the dashboard is a user of the Client, as the API: its pages and its
// sampler (summed over the shards of a sharded Client) read and act
// through the Client's methods.
func (s *Server) mountUI() error {
	so := ui.SamplerOptions{Client: s.client, Logger: s.log, Interval: s.o.SampleInterval, ShardTimeout: s.o.ShardTimeout}
	uo := ui.Options{Client: s.client, Logger: s.log, RunsDir: s.o.RunsDir, Failures: s.failures,
		ShardTimeout: s.o.ShardTimeout,
		Authenticate: func(secret string) (ui.Principal, bool) {
			t, ok := match(s.o.Tokens, secret)
			return ui.Principal{Name: t.Name, Admin: t.Scope == ScopeAdmin}, ok
		}}
	smp, err := ui.NewSampler(so)
	if err != nil {
		return fmt.Errorf("api: %w", err)
	}
	uo.Sampler = smp
	if s.insecure() {
		uo.Anonymous = &ui.Principal{Name: "anonymous", Admin: true}
	}
	h, err := ui.New(uo)
	if err != nil {
		return fmt.Errorf("api: %w", err)
	}
	s.sampler = smp
	s.mux.Handle(ui.Prefix, h)
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Location", strings.TrimPrefix(ui.Prefix, "/")) // relative: right under any mount prefix
		w.WriteHeader(http.StatusFound)
	})
	return nil
}

// RunSampler runs the dashboard's sampler until ctx ends (Start runs it;
// a program that serves the Server with its own http.Server calls it for
// the overview's history). Without the dashboard it returns at once.
func (s *Server) RunSampler(ctx context.Context) {
	if s.sampler != nil {
		s.sampler.Run(ctx)
	}
}

func setDefault[T comparable](p *T, d T) {
	var zero T
	if *p == zero {
		*p = d
	}
}

// ServeHTTP serves one request. Requests that match no route get a JSON
// 404, or 405 with an Allow header when the path exists for other methods.
// Without tokens (insecure mode) a request must be addressed to a loopback
// name (Host localhost, 127.0.0.0/8 or [::1]), or it gets 421: a web page
// whose name an attacker rebinds to 127.0.0.1 must not reach an API where
// every request is admin.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.insecure() && !loopbackHost(r.Host) {
		s.log.WarnContext(r.Context(), "api request refused: insecure mode serves loopback names only", "host", r.Host,
			"method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
		writeJSON(w, http.StatusMisdirectedRequest, &Error{Code: CodeMisdirected, Message: fmt.Sprintf(
			"Host %q: without tokens (insecure mode) the API answers only requests to localhost, 127.0.0.1 or [::1]; "+
				"configure api-tokens to serve other names", r.Host)})
		return
	}
	if _, pattern := s.mux.Handler(r); pattern != "" {
		s.mux.ServeHTTP(w, r)
		return
	}
	rec := &recorder{header: http.Header{}}
	s.mux.ServeHTTP(rec, r)
	switch rec.status {
	case http.StatusNotFound:
		writeJSON(w, http.StatusNotFound, notFound("no endpoint %s (GET /openapi.json lists them)", r.URL.Path))
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", rec.header.Get("Allow"))
		writeJSON(w, http.StatusMethodNotAllowed, &Error{Code: CodeMethodNotAllowed,
			Message: fmt.Sprintf("method %s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, rec.header.Get("Allow"))})
	default: // a redirect to the clean path
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.status)
	}
}

// insecure reports whether every request is served as the admin
// "anonymous" (no tokens, Insecure).
func (s *Server) insecure() bool { return len(s.o.Tokens) == 0 && s.o.Insecure }

// loopbackHost reports whether a Host header names this machine's loopback
// interface: localhost or a loopback address, with or without a port. A
// DNS name never does, whatever it resolves to.
func loopbackHost(host string) bool {
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = host
	}
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	if strings.EqualFold(h, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(h)
	return err == nil && a.Zone() == "" && a.Unmap().IsLoopback()
}

// recorder keeps the status and headers the mux writes for a request no
// route matches (its 404, 405 or redirect); the body is dropped.
type recorder struct {
	header http.Header
	status int
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return len(b), nil
}

// principal is who makes a request: a token's name and scope.
type principal struct {
	name  string
	scope Scope
}

// actor is how the run archive and pauses record the principal.
func (p principal) actor() string { return "api:" + p.name }

// wrap runs rt's handler after authentication, writes its error, recovers
// a panic as a 500 and logs the request.
func (s *Server) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		var who principal
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.ErrorContext(r.Context(), "api handler panicked", "method", r.Method, "route", rt.path, "panic", p)
				if sw.status == 0 {
					writeError(sw, r, s.log, fmt.Errorf("panic: %v", p))
				}
			}
			level := slog.LevelDebug
			if rt.method != http.MethodGet || sw.status >= 500 {
				level = slog.LevelInfo
			}
			s.log.Log(r.Context(), level, "api request", "method", r.Method, "route", rt.path, "path", r.URL.Path,
				"status", sw.status, "token", who.name, "duration", time.Since(start))
		}()
		if err := s.cop.Check(r); err != nil {
			s.log.WarnContext(r.Context(), "api request refused: cross-origin", "method", r.Method, "path", r.URL.Path,
				"origin", r.Header.Get("Origin"), "sec_fetch_site", r.Header.Get("Sec-Fetch-Site"))
			writeError(sw, r, s.log, &Error{status: http.StatusForbidden, Code: CodeForbidden,
				Message: "this request came from another site (Origin or Sec-Fetch-Site), so it was refused: call the API from a program, not a web page"})
			return
		}
		p, err := s.authenticate(sw, r, rt.scope)
		if err != nil {
			writeError(sw, r, s.log, err)
			return
		}
		who = p
		if err := rt.handle(s, sw, r, p); err != nil {
			writeError(sw, r, s.log, err)
		}
	})
}

// statusWriter remembers the status written.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

const realm = `Bearer realm="workq"`

// authenticate returns who makes r, or the 401 or 403 for a route that
// needs scope need.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request, need Scope) (principal, error) {
	if need == scopeNone {
		return principal{}, nil
	}
	if s.insecure() {
		return principal{name: "anonymous", scope: ScopeAdmin}, nil
	}
	hdr := r.Header.Get("Authorization")
	if hdr == "" {
		w.Header().Set("WWW-Authenticate", realm)
		return principal{}, &Error{status: http.StatusUnauthorized, Code: CodeUnauthorized,
			Message: "this endpoint needs a token: send Authorization: Bearer TOKEN"}
	}
	// An address that sent too many bad tokens has its tokens refused
	// unchecked, a good one too (internal/authlimit says why).
	if wait := s.failures.Wait(r); wait > 0 {
		w.Header().Set("Retry-After", authlimit.RetryAfter(wait))
		return principal{}, &Error{status: http.StatusTooManyRequests, Code: CodeTooManyRequests, Message: fmt.Sprintf(
			"too many bad tokens from your address: no token is checked for %s s (Retry-After)", authlimit.RetryAfter(wait))}
	}
	secret, ok := bearer(hdr)
	if !ok {
		s.failed(r)
		w.Header().Set("WWW-Authenticate", realm+`, error="invalid_request"`)
		return principal{}, &Error{status: http.StatusUnauthorized, Code: CodeUnauthorized,
			Message: "the Authorization header must be Bearer TOKEN"}
	}
	t, ok := match(s.o.Tokens, secret)
	if !ok {
		s.failed(r)
		w.Header().Set("WWW-Authenticate", realm+`, error="invalid_token"`)
		return principal{}, &Error{status: http.StatusUnauthorized, Code: CodeUnauthorized, Message: "the token is not valid"}
	}
	if !t.Scope.allows(need) {
		w.Header().Set("WWW-Authenticate", realm+`, error="insufficient_scope", scope="`+string(need)+`"`)
		return principal{}, &Error{status: http.StatusForbidden, Code: CodeForbidden,
			Message: fmt.Sprintf("token %q has scope %s; this endpoint needs %s", t.Name, t.Scope, need)}
	}
	return principal{name: t.Name, scope: t.Scope}, nil
}

// failed counts a bad token of r's address, and logs when that locks the
// address out.
func (s *Server) failed(r *http.Request) {
	if s.failures.Fail(r) {
		s.log.WarnContext(r.Context(), "api: too many bad tokens from an address: its tokens are refused for a while",
			"remote", r.RemoteAddr, "burst", authlimit.DefaultBurst, "every", authlimit.DefaultEvery)
	}
}

// Start listens on Options.Addr and serves in the background until Stop.
// Without tokens it refuses (ErrNoTokens) unless Insecure is set and the
// address it bound is a loopback address.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	run, err := s.life.Begin(ctx)
	if err != nil {
		return fmt.Errorf("api: server: %w", err) // a Server starts once
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.o.Addr)
	if err != nil {
		run.Abort()
		return fmt.Errorf("api: listen on %s: %w", s.o.Addr, err)
	}
	if len(s.o.Tokens) == 0 {
		if tcp, ok := ln.Addr().(*net.TCPAddr); !ok || !tcp.IP.IsLoopback() {
			ln.Close()
			run.Abort()
			return fmt.Errorf("%w on %s, which is not a loopback address: configure api-tokens (insecure mode is for 127.0.0.1 or ::1 only)",
				ErrNoTokens, s.o.Addr)
		}
	}
	s.srv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: s.o.ReadHeaderTimeout,
		ReadTimeout:       s.o.ReadTimeout,
		WriteTimeout:      s.o.WriteTimeout,
		IdleTimeout:       s.o.IdleTimeout,
		MaxHeaderBytes:    s.o.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	s.ln = ln
	s.serving = make(chan error, 1)
	srv, serving := s.srv, s.serving
	go func() { serving <- srv.Serve(ln) }()
	go func() { defer run.Stopped(); run.Started(); s.RunSampler(run.Context()) }()
	s.log.Info("api listening", "addr", ln.Addr().String(), "tokens", len(s.o.Tokens))
	return nil
}

// Addr is the address Start bound (nil before Start).
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Stop stops accepting connections and waits for the requests in flight
// to finish; when ctx ends first it closes the connections left and
// returns ctx's error. Calling it again waits for the same stop.
func (s *Server) Stop(ctx context.Context) error {
	sampled, err := s.life.RequestStop() // ends the sampler
	if err != nil {
		return fmt.Errorf("api: server: %w", err)
	}
	s.mu.Lock() // a Start in progress has started it, or failed
	srv, serving := s.srv, s.serving
	s.mu.Unlock()
	if srv == nil {
		return fmt.Errorf("api: server: %w", startstop.ErrNotStarted)
	}
	err = srv.Shutdown(ctx)
	if err != nil {
		_ = srv.Close()
	}
	if serr := <-serving; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	serving <- http.ErrServerClosed // a second Stop returns at once
	select {                        // the sampler's round in flight ends with its context
	case <-sampled:
	case <-ctx.Done():
		if err == nil {
			err = ctx.Err()
		}
	}
	return err
}

// Run starts the server, serves until ctx ends (or the listener fails) and
// stops it within Options.ShutdownTimeout.
func (s *Server) Run(ctx context.Context) error {
	if err := s.Start(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	serving := s.serving
	s.mu.Unlock()
	select {
	case <-ctx.Done():
	case err := <-serving:
		serving <- err // for Stop
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.o.ShutdownTimeout)
	defer cancel()
	if err := s.Stop(stopCtx); err != nil {
		return fmt.Errorf("api: shutdown: %w", err)
	}
	s.log.Info("api stopped")
	return nil
}
