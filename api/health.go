package api

import (
	"context"
	_ "embed"
	"errors"
	"net/http"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/workq/workq"
)

// openAPIDocument is the OpenAPI 3.0 description of every route, served at
// /openapi.json; TestOpenAPIMatchesRoutes keeps it equal to the routes.
//
//go:embed openapi.json
var openAPIDocument []byte

// OpenAPI returns the OpenAPI document of the API (JSON).
func OpenAPI() []byte { return append([]byte(nil), openAPIDocument...) }

// readyTimeout bounds the database checks of /readyz.
const readyTimeout = 2 * time.Second

// readyTTL is how long /readyz serves the answer of one check. The
// endpoint needs no token, so without a cache anyone could make the
// database run two statements per request (issue 18: a flood tripled the
// latency of authenticated requests); with it, a flood costs at most one
// check a second, and a probe still sees a change within about a second.
const readyTTL = time.Second

type health struct {
	Status        string `json:"status"`                   // ok, ready or unavailable
	Error         string `json:"error,omitempty"`          // why not ready
	SchemaVersion int64  `json:"schema_version,omitempty"` // ready: the database's migration version
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request, _ principal) error {
	writeJSON(w, http.StatusOK, health{Status: "ok"})
	return nil
}

// readyz answers 200 when every database of the Client answers and its
// schema is current (the Client's Ready), else 503 with the reason (the details of a connection error
// go to the log, not to an unauthenticated caller). The answer is at most
// readyTTL old: concurrent callers share one check.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request, _ principal) error {
	a := s.ready.get(r.Context())
	writeJSON(w, a.status, a.body)
	return nil
}

// readyAnswer is one answer of /readyz.
type readyAnswer struct {
	status int
	body   health
}

// checkReady runs the checks of /readyz: the Client's Ready, one
// statement per shard.
func (s *Server) checkReady(ctx context.Context) readyAnswer {
	v, err := s.client.Ready(ctx)
	switch {
	case err == nil:
		return readyAnswer{http.StatusOK, health{Status: "ready", SchemaVersion: v}}
	case schemaBehind(err):
		return readyAnswer{http.StatusServiceUnavailable, health{Status: "unavailable", Error: err.Error()}}
	}
	s.log.WarnContext(ctx, "api not ready: database unreachable", "err", err)
	return readyAnswer{http.StatusServiceUnavailable, health{Status: "unavailable", Error: "the database does not answer"}}
}

// schemaBehind reports whether err says only that a schema is behind (on
// a sharded Client: every shard that failed), not that a database did not
// answer: its message names no server's internals and says to migrate.
func schemaBehind(err error) bool {
	var se *workq.ShardsError
	if !errors.As(err, &se) {
		return errors.Is(err, workq.ErrSchemaBehind)
	}
	for _, e := range se.Failed {
		if !errors.Is(e, workq.ErrSchemaBehind) {
			return false
		}
	}
	return true
}

// readiness caches the answer of check for readyTTL, and runs one check at
// a time: callers that arrive while it runs wait for its answer.
type readiness struct {
	check func(ctx context.Context) readyAnswer
	now   func() time.Time // tests freeze it
	ttl   time.Duration
	group singleflight.Group

	mu  sync.Mutex
	at  time.Time // of the cached answer; zero: none
	ans readyAnswer
}

func newReadiness(check func(ctx context.Context) readyAnswer) *readiness {
	return &readiness{check: check, now: time.Now, ttl: readyTTL}
}

// cached returns the cached answer while it is fresh.
func (c *readiness) cached() (readyAnswer, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ans, !c.at.IsZero() && c.now().Sub(c.at) < c.ttl
}

// get returns a fresh answer, checking when there is none. The check runs
// on a context of its own (readyTimeout, not the first caller's
// cancellation), since every waiting caller gets its answer.
func (c *readiness) get(ctx context.Context) readyAnswer {
	if a, ok := c.cached(); ok {
		return a
	}
	v, _, _ := c.group.Do("ready", func() (any, error) {
		if a, ok := c.cached(); ok { // a check ended between cached and Do
			return a, nil
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readyTimeout)
		defer cancel()
		a := c.check(cctx)
		c.mu.Lock()
		c.at, c.ans = c.now(), a
		c.mu.Unlock()
		return a, nil
	})
	return v.(readyAnswer)
}

func (s *Server) openAPI(w http.ResponseWriter, _ *http.Request, _ principal) error {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(openAPIDocument)
	return nil
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request, _ principal) error {
	s.o.Metrics.ServeHTTP(w, r)
	return nil
}
