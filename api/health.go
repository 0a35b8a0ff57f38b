package api

import (
	"context"
	_ "embed"
	"errors"
	"net/http"
	"time"

	"github.com/workq/workq/db"
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

type health struct {
	Status        string `json:"status"`                   // ok, ready or unavailable
	Error         string `json:"error,omitempty"`          // why not ready
	SchemaVersion int64  `json:"schema_version,omitempty"` // ready: the database's migration version
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request, _ principal) error {
	writeJSON(w, http.StatusOK, health{Status: "ok"})
	return nil
}

// readyz answers 200 when the database answers and its schema is this
// binary's, else 503 with the reason (the details of a connection error
// go to the log, not to an unauthenticated caller).
func (s *Server) readyz(w http.ResponseWriter, r *http.Request, _ principal) error {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	v, err := db.SchemaVersion(ctx, s.o.DB)
	if err == nil {
		err = db.CheckSchema(ctx, s.o.DB)
	}
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, health{Status: "ready", SchemaVersion: v})
	case errors.Is(err, db.ErrSchemaBehind):
		writeJSON(w, http.StatusServiceUnavailable, health{Status: "unavailable", Error: err.Error()})
	default:
		s.log.WarnContext(r.Context(), "api not ready: database unreachable", "err", err)
		writeJSON(w, http.StatusServiceUnavailable, health{Status: "unavailable", Error: "the database does not answer"})
	}
	return nil
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
