package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// env is a Server over its own database, behind an httptest server, with
// an admin and a read token.
type env struct {
	t            *testing.T
	pool         *pgxpool.Pool
	srv          *Server
	http         *httptest.Server
	admin, read  string
	skipValidate bool // responses of requests the document does not describe (a 404 path)
}

// setup is what a test may change of its env before the Server is made:
// the HTTP Options, and the Client the Server serves.
type setup struct {
	Options
	pool   *pgxpool.Pool // the env's database
	config workq.Config  // the Client's (Maintenance is disabled)
	// shards, when set, make the Client a sharded one of these
	// (workq.NewShardedClient); pool is usually the first's.
	shards []workq.Shard
}

// testClient is a producer Client (maintenance off) on pool, or on
// shards when given.
func testClient(t testing.TB, pool *pgxpool.Pool, cfg workq.Config, shards ...workq.Shard) *workq.Client {
	t.Helper()
	cfg.Maintenance.Disabled = true
	var c *workq.Client
	var err error
	if len(shards) > 0 {
		c, err = workq.NewShardedClient(shards, cfg)
	} else {
		c, err = workq.NewClient(pool, cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// newServer is New of a Client on st's databases.
func newServer(t testing.TB, st setup) (*Server, error) {
	t.Helper()
	return New(testClient(t, st.pool, st.config, st.shards...), st.Options)
}

func newEnv(t *testing.T, mod ...func(*setup)) *env {
	t.Helper()
	pool := testdb.Pool(t)
	adminSecret, adminEntry, err := NewToken("ops", ScopeAdmin)
	if err != nil {
		t.Fatal(err)
	}
	readSecret, readEntry, err := NewToken("viewer", ScopeRead)
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := ParseTokens([]string{adminEntry, readEntry})
	if err != nil {
		t.Fatal(err)
	}
	st := setup{Options: Options{Tokens: tokens, Logger: testLogger(t)}, pool: pool}
	for _, f := range mod {
		f(&st)
	}
	s, err := newServer(t, st)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return &env{t: t, pool: pool, srv: s, http: hs, admin: adminSecret, read: readSecret}
}

// testLogger logs to the test's output.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// response is what a request got.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("response %d %s: %v", r.status, r.body, err)
	}
}

func (r response) err(t *testing.T) Error {
	t.Helper()
	var e Error
	r.decode(t, &e)
	return e
}

// raw is a request body sent as it is.
type raw string

// do sends a request with token (none when ""), body (nil: none; raw: as
// it is; anything else as JSON) and checks the response against the
// OpenAPI document.
func (e *env) do(method, path, token string, body any, headers ...string) response {
	e.t.Helper()
	var b []byte
	switch v := body.(type) {
	case nil:
	case raw:
		b = []byte(v)
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			e.t.Fatal(err)
		}
	}
	req, err := http.NewRequest(method, e.http.URL+path, bytes.NewReader(b))
	if err != nil {
		e.t.Fatal(err)
	}
	if body != nil || method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch {
		req.Header.Set("Content-Type", "application/json") // also on an empty body: every write needs it
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	res, err := e.http.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	rb, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	out := response{status: res.StatusCode, header: res.Header, body: rb}
	if !e.skipValidate {
		checkAgainstDocument(e.t, req, b, out)
	}
	return out
}

// must is do that fails the test unless the status is want.
func (e *env) must(want int, method, path, token string, body any) response {
	e.t.Helper()
	r := e.do(method, path, token, body)
	if r.status != want {
		e.t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.status, want, r.body)
	}
	return r
}

var (
	docOnce   sync.Once
	docRouter routers.Router
	docErr    error
)

// document loads and validates the embedded OpenAPI document once.
func document(t testing.TB) routers.Router {
	t.Helper()
	docOnce.Do(func() {
		loader := openapi3.NewLoader()
		doc, err := loader.LoadFromData(openAPIDocument)
		if err != nil {
			docErr = fmt.Errorf("load openapi.json: %w", err)
			return
		}
		if err := doc.Validate(context.Background()); err != nil {
			docErr = fmt.Errorf("openapi.json is not a valid OpenAPI document: %w", err)
			return
		}
		docRouter, docErr = legacy.NewRouter(doc)
	})
	if docErr != nil {
		t.Fatal(docErr)
	}
	return docRouter
}

// checkAgainstDocument validates a response (and, when it succeeded, the
// request) against the OpenAPI document: what the server answers is what
// the document says, and what it accepts the document accepts.
func checkAgainstDocument(t *testing.T, req *http.Request, body []byte, res response) {
	t.Helper()
	router := document(t)
	route, params, err := router.FindRoute(req)
	if err != nil {
		t.Fatalf("%s %s: not in the OpenAPI document: %v", req.Method, req.URL.Path, err)
	}
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
	if res.status < 300 {
		r2 := req.Clone(context.Background())
		r2.Body = io.NopCloser(bytes.NewReader(body))
		in.Request = r2
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			t.Errorf("%s %s was accepted (%d) but the document rejects the request: %v", req.Method, req.URL.Path, res.status, err)
		}
		in.Request = req
	}
	rin := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: res.status, Header: res.header, Options: opts}
	rin.SetBodyBytes(res.body)
	if err := openapi3filter.ValidateResponse(context.Background(), rin); err != nil {
		t.Errorf("%s %s: response %d does not match the document: %v\n%s", req.Method, req.URL.Path, res.status, err, res.body)
	}
}

// snapshot is a digest of every table of the database: equal snapshots
// mean nothing was written.
func snapshot(t *testing.T, pool *pgxpool.Pool) string { return testdb.Snapshot(t, pool) }
