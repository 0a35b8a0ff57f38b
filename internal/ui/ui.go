// Package ui is workq's web dashboard, served by the HTTP API (package
// api mounts it at /ui/): server-rendered html/template pages and one small
// hand-written script, embedded in the binary, that need no network beyond
// the API process itself. It shows every (table, queue) with live charts,
// lists and filters items, shows an item with its attempts and logs, and
// acts on items, queues and schedules: every read and write of work goes
// through the workq.Client it is given (Options.Client), as the API's and
// the CLI's do.
//
// Visitors log in with an API token, exchanged for a session cookie
// (sessions live in memory); every state-changing request must carry the
// session's CSRF token and come from the dashboard's own origin; sessions
// of read tokens see no actions and are refused them. docs/dashboard.md
// describes the pages.
package ui

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/authlimit"
)

// Prefix is the path the dashboard is served under.
const Prefix = "/ui/"

// Options configure a Handler.
type Options struct {
	// Client is the workq Client whose work the dashboard shows and acts
	// on (required); a producer Client (no Workers) will do. On a sharded
	// Client (NewShardedClient of several shards) the item pages list the
	// items of every shard, each with its shard, an item and its actions
	// name their shard (?shard=, a form's shard field, or SHARD:ID ids),
	// and the exact counts are per shard. A shard that does not answer
	// within ShardTimeout (0: DefaultShardTimeout) is shown as unreachable
	// and the others are served. Pause and resume apply to every shard;
	// the limit names one shard's budget (a form's shard field); schedules
	// are listed from every shard and triggered on their own. The outbox's
	// keys and joins are the first shard's.
	Client       *workq.Client
	ShardTimeout time.Duration
	Logger       *slog.Logger // nil: slog.Default()
	// Authenticate says who holds an API token (the API's own check);
	// required unless Anonymous is set.
	Authenticate func(token string) (Principal, bool)
	// Anonymous, when set, is who every visitor is without logging in (the
	// API's insecure mode on loopback). Actions still need the CSRF token.
	// The Handler does not check Host: the API refuses any request whose
	// Host is not a loopback name before it gets here (DNS rebinding); a
	// program that serves the Handler alone with Anonymous must do the same.
	Anonymous *Principal
	// Sampler is the history of the overview's counts and charts; nil
	// shows no history.
	Sampler *Sampler
	// RunsDir is the workers' --runs-dir, when this process can read it:
	// the item page shows each attempt's attempt.log.
	RunsDir    string
	SessionTTL time.Duration // 0: 12h
	// MaxSessions bounds the sessions held (0: 10000); MaxSessionsPerToken
	// those of one token (0: 100). A login past its token's bound ends that
	// token's oldest session; a login when the store is full of other
	// tokens' sessions is refused. No login ever ends another token's
	// session.
	MaxSessions         int
	MaxSessionsPerToken int
	// Failures limits failed logins per client address (nil: a limiter of
	// its own with authlimit's defaults). The API passes the limiter of its
	// bearer tokens, so both share one budget per address.
	Failures FailureLimiter
}

// FailureLimiter limits failed credentials per client address
// (internal/authlimit.Limiter is one).
type FailureLimiter interface {
	// Wait returns how long r's client must wait before its credentials
	// are checked again; 0 when they may be checked now.
	Wait(r *http.Request) time.Duration
	// Fail records a failed credential of r's client; true when that
	// failure spent the client's budget.
	Fail(r *http.Request) bool
}

// Handler serves the dashboard under Prefix.
type Handler struct {
	o        Options
	log      *slog.Logger
	mux      *http.ServeMux
	pages    map[string]*template.Template
	static   fs.FS
	version  string // of the static assets, for their URLs
	sessions *sessions
	cop      *http.CrossOriginProtection
	client   *workq.Client
	shards   []string // the Client's shards' names
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// New returns a Handler.
func New(o Options) (*Handler, error) {
	if o.Client == nil {
		return nil, errors.New("ui: Options.Client is required")
	}
	if o.Authenticate == nil && o.Anonymous == nil {
		return nil, errors.New("ui: Options.Authenticate is required")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.SessionTTL == 0 {
		o.SessionTTL = DefaultSessionTTL
	}
	if o.MaxSessions == 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	if o.MaxSessionsPerToken == 0 {
		o.MaxSessionsPerToken = DefaultMaxSessionsPerToken
	}
	if o.SessionTTL < 0 || o.MaxSessions < 0 || o.MaxSessionsPerToken < 0 {
		return nil, fmt.Errorf("ui: SessionTTL %s, MaxSessions %d and MaxSessionsPerToken %d must not be negative",
			o.SessionTTL, o.MaxSessions, o.MaxSessionsPerToken)
	}
	if o.Failures == nil {
		o.Failures = authlimit.New(authlimit.Options{})
	}
	if o.ShardTimeout == 0 {
		o.ShardTimeout = DefaultShardTimeout
	}
	if o.ShardTimeout < 0 {
		return nil, fmt.Errorf("ui: ShardTimeout %s must not be negative", o.ShardTimeout)
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	h := &Handler{o: o, log: o.Logger, mux: http.NewServeMux(), static: static,
		sessions: newSessions(o.SessionTTL, o.MaxSessions, o.MaxSessionsPerToken), cop: http.NewCrossOriginProtection(),
		client: o.Client, shards: o.Client.Shards()}
	if h.version, err = assetVersion(static); err != nil {
		return nil, err
	}
	if h.pages, err = parsePages(); err != nil {
		return nil, err
	}
	h.routes()
	return h, nil
}

// assetVersion is a digest of the static files: their URLs carry it, so
// they can be cached for long and change when the binary does.
func assetVersion(static fs.FS) (string, error) {
	d := sha256.New()
	err := fs.WalkDir(static, ".", func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := fs.ReadFile(static, path)
		d.Write([]byte(path))
		d.Write(b)
		return err
	})
	return hex.EncodeToString(d.Sum(nil))[:12], err
}

func parsePages() (map[string]*template.Template, error) {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if base == "layout" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", n)
		if err != nil {
			return nil, fmt.Errorf("ui: template %s: %w", n, err)
		}
		pages[base] = t
	}
	return pages, nil
}

func (h *Handler) routes() {
	m := h.mux
	m.HandleFunc("GET /ui/{$}", h.page(h.overview))
	m.HandleFunc("GET /ui/counts", h.page(h.counts))
	m.HandleFunc("GET /ui/items/{table}", h.page(h.items))
	m.HandleFunc("GET /ui/items/{table}/{id}", h.page(h.item))
	m.HandleFunc("GET /ui/outbox", h.page(h.outboxPage))
	m.HandleFunc("GET /ui/schedules", h.page(h.schedulesPage))
	m.HandleFunc("GET /ui/flow", h.page(h.flowPage))
	m.HandleFunc("GET /ui/workflows", h.page(h.workflowsPage))
	m.HandleFunc("GET /ui/workflows/{id}", h.page(h.workflowPage))
	m.HandleFunc("GET /ui/api/overview", h.data(h.overviewJSON))
	m.HandleFunc("GET /ui/api/history", h.data(h.historyJSON))

	m.HandleFunc("POST /ui/items/{table}/act", h.action(h.actItems))
	m.HandleFunc("POST /ui/queues/{table}/{queue}/{op}", h.action(h.actQueue))
	m.HandleFunc("POST /ui/schedules/{name}/trigger", h.action(h.actTrigger))
	m.HandleFunc("POST /ui/flow/resume-kind", h.action(h.actResumeKind))
	m.HandleFunc("POST /ui/workflows/{id}/{op}", h.action(h.actWorkflow))

	m.HandleFunc("GET /ui/login", h.loginForm)
	m.HandleFunc("POST /ui/login", h.login)
	m.HandleFunc("POST /ui/logout", h.logout)
	m.HandleFunc("GET /ui/static/{file}", h.serveStatic)
}

// ServeHTTP serves one request of the dashboard.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("X-Frame-Options", "DENY")
	hdr.Set("Referrer-Policy", "same-origin")
	if _, pattern := h.mux.Handler(r); pattern == "" {
		h.fail(w, r, nil, http.StatusNotFound, "There is no such page.")
		return
	}
	h.mux.ServeHTTP(w, r)
}

// root is the relative path from r's page to the dashboard's root ("./",
// "../", ...): links and redirects are relative, so the dashboard works
// under any prefix the API is mounted at.
func root(r *http.Request) string {
	rel := strings.TrimPrefix(r.URL.Path, Prefix)
	n := strings.Count(rel, "/")
	if n == 0 {
		return "./"
	}
	return strings.Repeat("../", n)
}

// redirect sends a 303 to target, a path relative to the dashboard's root.
func redirect(w http.ResponseWriter, r *http.Request, target string) {
	w.Header().Set("Location", root(r)+target)
	w.WriteHeader(http.StatusSeeOther)
}

// localTarget reports whether s is a path inside the dashboard, relative
// to its root ("items/job_runs?status=failed"), safe to redirect to.
func localTarget(s string) bool {
	if s == "" || len(s) > 2048 || strings.ContainsAny(s, "\\\r\n") {
		return false
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return false
	}
	if strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, ".") {
		return false
	}
	for _, seg := range strings.Split(u.Path, "/") {
		if seg == ".." || seg == "." {
			return false
		}
	}
	return true
}

// view is what every page's template gets besides its own data.
type view struct {
	Title   string
	Root    string
	Version string
	Nav     string // the nav entry of this page
	Who     *Principal
	CSRF    string
	Flash   string
	Data    any
}

func (h *Handler) render(w http.ResponseWriter, r *http.Request, x *session, status int, name, title, nav string, data any) {
	v := view{Title: title, Root: root(r), Version: h.version, Nav: nav, Data: data}
	if x != nil {
		who := x.who
		v.Who, v.CSRF, v.Flash = &who, x.csrf, h.sessions.takeFlash(x)
	}
	var b strings.Builder
	if err := h.pages[name].Execute(&b, v); err != nil {
		h.log.ErrorContext(r.Context(), "dashboard template", "page", name, "err", err)
		http.Error(w, "internal error (the server log has the details)", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// fail renders an error page.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, x *session, status int, msg string) {
	h.render(w, r, x, status, "error", http.StatusText(status), "", struct {
		Status  int
		Message string
	}{status, msg})
}

// session returns the visitor's session; the anonymous principal of an
// insecure API gets one without logging in.
func (h *Handler) session(w http.ResponseWriter, r *http.Request) (*session, bool) {
	if x, ok := h.sessions.get(r); ok {
		return x, true
	}
	if h.o.Anonymous != nil {
		x, err := h.sessions.create(*h.o.Anonymous)
		if err != nil {
			h.log.WarnContext(r.Context(), "dashboard: no anonymous session", "err", err)
			return nil, false
		}
		setCookie(w, r, x)
		return x, true
	}
	return nil, false
}

// page wraps a GET page handler: a visitor without a session goes to the
// login page (and back here after).
func (h *Handler) page(f func(w http.ResponseWriter, r *http.Request, x *session) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		x, ok := h.session(w, r)
		if !ok {
			next := strings.TrimPrefix(r.URL.Path, Prefix)
			if r.URL.RawQuery != "" {
				next += "?" + r.URL.RawQuery
			}
			target := "login"
			if localTarget(next) {
				target += "?next=" + url.QueryEscape(next)
			}
			redirect(w, r, target)
			return
		}
		if err := f(w, r, x); err != nil {
			h.failErr(w, r, x, err)
		}
	}
}

// data wraps a JSON endpoint polled by the script: 401 without a session.
func (h *Handler) data(f func(w http.ResponseWriter, r *http.Request, x *session) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		x, ok := h.session(w, r)
		if !ok {
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "log in again: the session ended"})
			return
		}
		if err := f(w, r, x); err != nil {
			status, msg := classify(err)
			if status >= 500 {
				h.log.ErrorContext(r.Context(), "dashboard data", "path", r.URL.Path, "err", err)
			}
			writeJSON(w, status, map[string]string{"error": msg})
		}
	}
}

// action wraps a state-changing POST: it needs a session, a request from
// the dashboard's own origin (Sec-Fetch-Site, Origin), the session's CSRF
// token, and an admin token behind the session; anything else is refused
// with 403 and changes nothing.
func (h *Handler) action(f func(w http.ResponseWriter, r *http.Request, x *session) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		x, ok := h.checkPost(w, r)
		if !ok {
			return
		}
		if !x.who.Admin {
			h.log.WarnContext(r.Context(), "dashboard action refused: read-only session", "path", r.URL.Path, "token", x.who.Name)
			h.fail(w, r, x, http.StatusForbidden, fmt.Sprintf("Token %q has the read scope: actions need an admin token.", x.who.Name))
			return
		}
		if err := f(w, r, x); err != nil {
			h.failErr(w, r, x, err)
		}
	}
}

// maxForm bounds a form body (1000 ids and a filter fit easily).
const maxForm = 256 << 10

// checkPost checks a POST's origin, session and CSRF token, and parses its
// form; on failure it has answered.
func (h *Handler) checkPost(w http.ResponseWriter, r *http.Request) (*session, bool) {
	if err := h.cop.Check(r); err != nil {
		h.log.WarnContext(r.Context(), "dashboard request refused: cross-origin", "path", r.URL.Path, "origin", r.Header.Get("Origin"),
			"sec_fetch_site", r.Header.Get("Sec-Fetch-Site"))
		h.fail(w, r, nil, http.StatusForbidden, "This request came from another site, so it was refused.")
		return nil, false
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		h.fail(w, r, nil, http.StatusBadRequest, "The form could not be read.")
		return nil, false
	}
	x, ok := h.sessions.get(r)
	if !ok {
		h.fail(w, r, nil, http.StatusForbidden, "Your session has ended (or you never logged in): log in and try again.")
		return nil, false
	}
	tok := r.PostForm.Get("csrf")
	if tok == "" {
		tok = r.Header.Get("X-CSRF-Token")
	}
	if !x.validCSRF(tok) {
		h.log.WarnContext(r.Context(), "dashboard request refused: bad CSRF token", "path", r.URL.Path, "token", x.who.Name)
		h.fail(w, r, x, http.StatusForbidden, "The form's security token is missing or stale: reload the page and try again.")
		return nil, false
	}
	return x, true
}

func (h *Handler) loginForm(w http.ResponseWriter, r *http.Request) {
	if _, ok := h.session(w, r); ok {
		redirect(w, r, "./")
		return
	}
	next := r.URL.Query().Get("next")
	if !localTarget(next) {
		next = ""
	}
	h.render(w, r, nil, http.StatusOK, "login", "Log in", "", struct{ Next, Error string }{next, ""})
}

func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	if err := h.cop.Check(r); err != nil {
		h.fail(w, r, nil, http.StatusForbidden, "This request came from another site, so it was refused.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		h.fail(w, r, nil, http.StatusBadRequest, "The form could not be read.")
		return
	}
	next := r.PostForm.Get("next")
	if !localTarget(next) {
		next = ""
	}
	token := strings.TrimSpace(r.PostForm.Get("token"))
	loginError := func(status int, msg string) {
		h.render(w, r, nil, status, "login", "Log in", "", struct{ Next, Error string }{next, msg})
	}
	// An address that failed too often has its tokens refused unchecked,
	// a good one too (internal/authlimit says why).
	if wait := h.o.Failures.Wait(r); wait > 0 {
		w.Header().Set("Retry-After", authlimit.RetryAfter(wait))
		loginError(http.StatusTooManyRequests, fmt.Sprintf("Too many failed logins from your address: try again in %s seconds.",
			authlimit.RetryAfter(wait)))
		return
	}
	var who Principal
	ok := false
	if h.o.Authenticate != nil && token != "" {
		who, ok = h.o.Authenticate(token)
	}
	if !ok {
		locked := token != "" && h.o.Failures.Fail(r)
		h.log.WarnContext(r.Context(), "dashboard login refused", "remote", r.RemoteAddr, "locked_out", locked)
		loginError(http.StatusUnauthorized, "That token is not valid. Use a token of the API's api-tokens (workq api token NAME makes one).")
		return
	}
	if old, ok := h.sessions.get(r); ok {
		h.sessions.remove(old)
	}
	x, err := h.sessions.create(who)
	if err != nil {
		h.log.WarnContext(r.Context(), "dashboard login refused: the session store is full", "token", who.Name, "err", err)
		w.Header().Set("Retry-After", "60")
		loginError(http.StatusServiceUnavailable, "The dashboard holds as many sessions as it may: try again later, or ask whoever runs it.")
		return
	}
	setCookie(w, r, x)
	h.log.InfoContext(r.Context(), "dashboard login", "token", who.Name, "admin", who.Admin)
	if next == "" {
		next = "./"
	}
	redirect(w, r, next)
}

func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	x, ok := h.checkPost(w, r)
	if !ok {
		return
	}
	h.sessions.remove(x)
	clearCookie(w, r)
	redirect(w, r, "login")
}

func (h *Handler) serveStatic(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	b, err := fs.ReadFile(h.static, name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	switch {
	case strings.HasSuffix(name, ".js"):
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case strings.HasSuffix(name, ".css"):
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	case strings.HasSuffix(name, ".svg"):
		w.Header().Set("Content-Type", "image/svg+xml")
	}
	if r.URL.Query().Get("v") == h.version {
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		w.Header().Set("Cache-Control", "no-cache")
	}
	_, _ = w.Write(b)
}

// Sessions is the number of sessions held (for tests and logs).
func (h *Handler) Sessions() int { return h.sessions.count() }
