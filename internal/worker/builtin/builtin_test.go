package builtin_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workq/workq/internal/jobq"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/config"
	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/testutil"
	"github.com/workq/workq/internal/worker"
	"github.com/workq/workq/internal/worker/builtin"
)

// testConfig is config.Default with retries fast enough for a test: the
// backoff is a few milliseconds and a claim polls often.
func testConfig() config.Config {
	cfg := config.Default()
	cfg.WorkerID = "builtin-test"
	cfg.Lease = 2 * time.Second
	cfg.BackoffBase = 5 * time.Millisecond
	cfg.BackoffCap = 50 * time.Millisecond
	cfg.Poll = 50 * time.Millisecond
	cfg.Concurrency = 32
	cfg.Batch = 32
	cfg.DrainTimeout = 2 * time.Second
	return cfg
}

// startWorker runs a real worker on a fresh database with the built-in
// handlers registered the way `workq worker` registers them (see
// registerBuiltins in cmd/workq/worker.go). The worker stops when the test
// ends, before its database is dropped.
func startWorker(t *testing.T, cfg config.Config) *pgxpool.Pool {
	t.Helper()
	pool := testdb.PoolWith(t, 8)
	var logs testutil.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("worker log:\n%s", logs.String())
		}
	})
	w, err := worker.New(pool, cfg.Worker(), worker.Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	ex, err := builtin.NewExec(cfg.ExecAllow)
	if err != nil {
		t.Fatal(err)
	}
	wh := builtin.NewWebhook(cfg.WebhookAllow, cfg.WebhookSecret, cfg.WebhookTimeout)
	if err := w.Register(builtin.WebhookKind, wh.Handle); err != nil {
		t.Fatal(err)
	}
	if err := w.Register(builtin.ExecKind, ex.Handle); err != nil {
		t.Fatal(err)
	}
	if err := w.Register(builtin.NoopKind, builtin.Noop); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("worker.Run: %v", err)
		}
	})
	return pool
}

func enqueue(t *testing.T, pool *pgxpool.Pool, kind string, payload any, maxAttempts int) int64 {
	t.Helper()
	if raw, ok := payload.(sqlPayload); ok {
		// The client accepts only JSON objects; a row written by plain SQL
		// can hold any JSON, and the handlers must cope with it.
		row, err := gen.New(pool).JobRunsEnqueue(context.Background(), gen.JobRunsEnqueueParams{
			Queue: "default", Kind: kind, Payload: []byte(raw), MaxAttempts: int32(maxAttempts)})
		if err != nil {
			t.Fatalf("insert %s: %v", kind, err)
		}
		return row.ID
	}
	res, err := jobq.New(jobq.Options{}).Enqueue(context.Background(), pool,
		jobq.Job{Kind: kind, Payload: payload, MaxAttempts: maxAttempts})
	if err != nil {
		t.Fatalf("enqueue %s: %v", kind, err)
	}
	return res.ID
}

// sqlPayload is a payload written by plain SQL, past the client's checks.
type sqlPayload string

// finalRow is a job_runs row that has reached done or failed.
// wantIdempotencyKey is the Idempotency-Key of job run id: job_runs-<id>-<its
// created_at in Unix microseconds>, read back from its row.
func wantIdempotencyKey(t *testing.T, pool *pgxpool.Pool, id int64) string {
	t.Helper()
	var created time.Time
	if err := pool.QueryRow(context.Background(), "select created_at from workq.job_runs_all where id = $1", id).Scan(&created); err != nil {
		t.Fatal(err)
	}
	return "job_runs-" + strconv.FormatInt(id, 10) + "-" + strconv.FormatInt(created.UnixMicro(), 10)
}

type finalRow struct {
	Status    lease.Status
	Attempts  int32
	LastError string
}

// waitFinal polls the job's row until it is done or failed.
func waitFinal(t *testing.T, pool *pgxpool.Pool, id int64) finalRow {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var r finalRow
		var status int16
		err := pool.QueryRow(context.Background(),
			"select status, attempts, coalesce(last_error, '') from workq.job_runs_all where id = $1", id).
			Scan(&status, &r.Attempts, &r.LastError)
		if err != nil {
			t.Fatalf("read job %d: %v", id, err)
		}
		r.Status = lease.Status(status)
		if r.Status == lease.StatusDone || r.Status == lease.StatusFailed {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d still %s after 30s (attempts %d, last error %q)", id, r.Status, r.Attempts, r.LastError)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func assertFinal(t *testing.T, got finalRow, status lease.Status, attempts int32, errHas []string) {
	t.Helper()
	if got.Status != status || got.Attempts != attempts {
		t.Errorf("job ended %s after %d attempts (last error %q), want %s after %d", got.Status, got.Attempts, got.LastError, status, attempts)
	}
	if status == lease.StatusDone && got.LastError != "" && attempts == 1 {
		t.Errorf("done at the first attempt but last_error = %q", got.LastError)
	}
	for _, s := range errHas {
		if !strings.Contains(got.LastError, s) {
			t.Errorf("last_error %q does not mention %q", got.LastError, s)
		}
	}
}

// hmacSHA256 computes the expected signature without going through builtin.
func hmacSHA256(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// request is what a test server received.
type request struct {
	Method string
	Header http.Header
	Body   []byte
}

// recorder is an HTTP server that records every request by path and answers
// with the behaviour registered for the path (200 when none is).
type recorder struct {
	srv   *httptest.Server
	mu    sync.Mutex
	reqs  map[string][]request
	serve map[string]func(w http.ResponseWriter, r *http.Request, n int)
}

// newRecorder listens on addr ("" for 127.0.0.1 on a free port).
func newRecorder(t *testing.T, addr string) (*recorder, error) {
	rec := &recorder{reqs: map[string][]request{}, serve: map[string]func(http.ResponseWriter, *http.Request, int){}}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(rec.handle))
	if addr != "" {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, err
		}
		srv.Listener.Close()
		srv.Listener = l
	}
	srv.Start()
	t.Cleanup(srv.Close)
	rec.srv = srv
	return rec, nil
}

func (rec *recorder) handle(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rec.mu.Lock()
	rec.reqs[r.URL.Path] = append(rec.reqs[r.URL.Path], request{Method: r.Method, Header: r.Header.Clone(), Body: body})
	n := len(rec.reqs[r.URL.Path])
	serve := rec.serve[r.URL.Path]
	rec.mu.Unlock()
	if serve == nil {
		fmt.Fprint(w, "ok")
		return
	}
	serve(w, r, n)
}

func (rec *recorder) on(path string, f func(w http.ResponseWriter, r *http.Request, n int)) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.serve[path] = f
}

func (rec *recorder) requests(path string) []request {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]request(nil), rec.reqs[path]...)
}

func (rec *recorder) total() int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	n := 0
	for _, r := range rec.reqs {
		n += len(r)
	}
	return n
}

func (rec *recorder) hostPort() string { return rec.srv.Listener.Addr().String() }

func (rec *recorder) port() string {
	_, p, _ := net.SplitHostPort(rec.hostPort())
	return p
}

// statuses answers the n-th request with codes[n-1] (the last code repeats).
func statuses(codes ...int) func(http.ResponseWriter, *http.Request, int) {
	return func(w http.ResponseWriter, _ *http.Request, n int) {
		code := codes[min(n, len(codes))-1]
		w.WriteHeader(code)
		fmt.Fprintf(w, "answer %d of the test server", code)
	}
}

// hookEnv is what a webhook case can aim at.
type hookEnv struct {
	target   *recorder // on the allow-list
	outsider *recorder // reachable, but another port: not on the allow-list
	sibling  *recorder // the target's port on 127.0.0.2 (nil where that address cannot be bound)
	path     string    // this case's own path on target
}

func (e hookEnv) url() string { return e.target.srv.URL + e.path }

type webhookCase struct {
	name        string
	payload     func(e hookEnv) any
	maxAttempts int
	serve       func(e hookEnv) func(http.ResponseWriter, *http.Request, int)
	status      lease.Status
	attempts    int32
	errHas      []string
	requests    int // requests the case's path on target receives
	check       func(t *testing.T, e hookEnv, id int64, got finalRow, reqs []request)
}

const webhookSecret = "webhook-test-secret"

// TestWebhook runs every webhook outcome through a real worker against real
// HTTP servers and checks both what the server received and the job's final
// row in the database.
func TestWebhook(t *testing.T) {
	target, err := newRecorder(t, "")
	if err != nil {
		t.Fatal(err)
	}
	outsider, err := newRecorder(t, "")
	if err != nil {
		t.Fatal(err)
	}
	// Same port, another loopback address: a server that would record a
	// request if the allow-list compared ports only. Linux routes all of
	// 127/8 to loopback; elsewhere the case still runs without the server.
	sibling, err := newRecorder(t, "127.0.0.2:"+target.port())
	if err != nil {
		t.Logf("no server on 127.0.0.2 (%v): the disallowed-address case only checks the job", err)
		sibling = nil
	}

	cfg := testConfig()
	cfg.WebhookAllow = []string{target.hostPort()}
	cfg.WebhookSecret = webhookSecret
	cfg.WebhookTimeout = 300 * time.Millisecond
	pool := startWorker(t, cfg)
	t.Cleanup(func() {
		// Runs after every case: nothing off the allow-list was ever called.
		if n := outsider.total(); n != 0 {
			t.Errorf("the server off the allow-list received %d requests", n)
		}
		if sibling != nil && sibling.total() != 0 {
			t.Errorf("the server on 127.0.0.2 received %d requests", sibling.total())
		}
	})

	body := map[string]any{
		"order": 42, "items": []any{"a", "b"}, "note": "<b>ünïcode</b> & \"quotes\"", "nested": map[string]any{"ok": true, "n": nil},
	}
	okHeaders := map[string]string{
		"X-Custom": "custom-value",
		// A payload cannot override what the handler sets itself.
		"Content-Type": "text/plain", "Idempotency-Key": "spoofed", builtin.SignatureHeader: "sha256=forged",
	}
	redirectTo := func(to func(e hookEnv) string) func(e hookEnv) func(http.ResponseWriter, *http.Request, int) {
		return func(e hookEnv) func(http.ResponseWriter, *http.Request, int) {
			return func(w http.ResponseWriter, r *http.Request, _ int) { http.Redirect(w, r, to(e), http.StatusFound) }
		}
	}
	fixed := func(f func(http.ResponseWriter, *http.Request, int)) func(hookEnv) func(http.ResponseWriter, *http.Request, int) {
		return func(hookEnv) func(http.ResponseWriter, *http.Request, int) { return f }
	}

	cases := []webhookCase{
		{
			name: "2xx delivers the exact body, headers and signature",
			payload: func(e hookEnv) any {
				return map[string]any{"url": e.url(), "body": body, "headers": okHeaders}
			},
			serve:  fixed(statuses(http.StatusOK)),
			status: lease.StatusDone, attempts: 1, requests: 1,
			check: func(t *testing.T, e hookEnv, id int64, _ finalRow, reqs []request) {
				r := reqs[0]
				// The payload went through jsonb, so the body sent is the
				// database's rendering of payload->'body', byte for byte.
				var stored string
				if err := pool.QueryRow(context.Background(), "select (payload->'body')::text from workq.job_runs_all where id = $1", id).Scan(&stored); err != nil {
					t.Fatal(err)
				}
				if string(r.Body) != stored {
					t.Errorf("body sent %q, want the stored body %q", r.Body, stored)
				}
				var got, want any
				if err := json.Unmarshal(r.Body, &got); err != nil {
					t.Fatalf("body is not JSON: %v: %q", err, r.Body)
				}
				b, _ := json.Marshal(body)
				_ = json.Unmarshal(b, &want)
				if !reflect.DeepEqual(got, want) {
					t.Errorf("body sent %v, want %v", got, want)
				}
				wantHeaders := map[string]string{
					"Content-Type":          "application/json",
					"Idempotency-Key":       wantIdempotencyKey(t, pool, id),
					"X-Custom":              "custom-value",
					"X-Workq-Attempt":       "1",
					builtin.SignatureHeader: hmacSHA256(webhookSecret, []byte(stored)),
				}
				for k, v := range wantHeaders {
					if got := r.Header.Get(k); got != v {
						t.Errorf("header %s = %q, want %q", k, got, v)
					}
				}
				if got, want := builtin.Sign([]byte(webhookSecret), r.Body), hmacSHA256(webhookSecret, r.Body); got != want {
					t.Errorf("builtin.Sign = %q, independent HMAC = %q", got, want)
				}
				if r.Method != http.MethodPost {
					t.Errorf("method %s, want POST", r.Method)
				}
			},
		},
		{
			name:    "204 is success and a missing body is sent as null",
			payload: func(e hookEnv) any { return map[string]any{"url": e.url()} },
			serve:   fixed(statuses(http.StatusNoContent)),
			status:  lease.StatusDone, attempts: 1, requests: 1,
			check: func(t *testing.T, _ hookEnv, _ int64, _ finalRow, reqs []request) {
				if string(reqs[0].Body) != "null" {
					t.Errorf("body %q, want null", reqs[0].Body)
				}
				if got, want := reqs[0].Header.Get(builtin.SignatureHeader), hmacSHA256(webhookSecret, []byte("null")); got != want {
					t.Errorf("signature %q, want %q", got, want)
				}
			},
		},
		{
			name:        "500 is retried until the attempts run out",
			payload:     func(e hookEnv) any { return map[string]any{"url": e.url(), "body": map[string]int{"n": 1}} },
			maxAttempts: 3,
			serve:       fixed(statuses(http.StatusInternalServerError)),
			status:      lease.StatusFailed, attempts: 3, requests: 3,
			errHas: []string{"500 Internal Server Error", "answer 500 of the test server"},
			check: func(t *testing.T, _ hookEnv, id int64, _ finalRow, reqs []request) {
				key := wantIdempotencyKey(t, pool, id)
				for i, r := range reqs {
					if got := r.Header.Get("X-Workq-Attempt"); got != strconv.Itoa(i+1) {
						t.Errorf("request %d: X-Workq-Attempt %q, want %d", i+1, got, i+1)
					}
					// Every retry carries the same key, so the receiver can
					// drop a delivery it already processed.
					if got := r.Header.Get("Idempotency-Key"); got != key {
						t.Errorf("request %d: Idempotency-Key %q, want %q", i+1, got, key)
					}
				}
			},
		},
		{
			name:        "500 then 200 is retried and done",
			payload:     func(e hookEnv) any { return map[string]any{"url": e.url()} },
			maxAttempts: 3,
			serve:       fixed(statuses(http.StatusInternalServerError, http.StatusOK)),
			status:      lease.StatusDone, attempts: 2, requests: 2,
		},
		{
			// Throttled (Retry-After missing: 1 s), not failed: the job is
			// done on its second request within its one attempt.
			name:        "429 throttles without using an attempt",
			payload:     func(e hookEnv) any { return map[string]any{"url": e.url()} },
			maxAttempts: 1,
			serve:       fixed(statuses(http.StatusTooManyRequests, http.StatusOK)),
			status:      lease.StatusDone, attempts: 1, requests: 2,
		},
		{
			name:        "502 every time fails after max attempts",
			payload:     func(e hookEnv) any { return map[string]any{"url": e.url()} },
			maxAttempts: 2,
			serve:       fixed(statuses(http.StatusBadGateway)),
			status:      lease.StatusFailed, attempts: 2, requests: 2,
			errHas: []string{"502 Bad Gateway"},
		},
		{
			name:        "404 fails at once",
			payload:     func(e hookEnv) any { return map[string]any{"url": e.url()} },
			maxAttempts: 3,
			serve:       fixed(statuses(http.StatusNotFound)),
			status:      lease.StatusFailed, attempts: 1, requests: 1,
			errHas: []string{"404 Not Found", "not retried"},
		},
		{
			name:        "400 fails at once",
			payload:     func(e hookEnv) any { return map[string]any{"url": e.url()} },
			maxAttempts: 3,
			serve:       fixed(statuses(http.StatusBadRequest)),
			status:      lease.StatusFailed, attempts: 1, requests: 1,
			errHas: []string{"400 Bad Request", "not retried"},
		},
		{
			name:        "a timeout is retried",
			payload:     func(e hookEnv) any { return map[string]any{"url": e.url()} },
			maxAttempts: 2,
			serve: fixed(func(w http.ResponseWriter, r *http.Request, _ int) {
				// Far past the 300ms webhook timeout; return as soon as the
				// client gives up so the server closes promptly.
				select {
				case <-r.Context().Done():
				case <-time.After(10 * time.Second):
				}
			}),
			status: lease.StatusFailed, attempts: 2, requests: 2,
			errHas: []string{"Client.Timeout"},
		},
		{
			name: "another address on the allowed port is refused",
			payload: func(e hookEnv) any {
				return map[string]any{"url": "http://127.0.0.2:" + e.target.port() + e.path}
			},
			maxAttempts: 3,
			status:      lease.StatusFailed, attempts: 1,
			errHas: []string{"127.0.0.2:", "--webhook-allow"},
			check: func(t *testing.T, e hookEnv, _ int64, got finalRow, _ []request) {
				if e.sibling != nil {
					if n := len(e.sibling.requests(e.path)); n != 0 {
						t.Errorf("127.0.0.2 received %d requests", n)
					}
				}
			},
		},
		{
			name: "an alias of the allowed address is refused",
			payload: func(e hookEnv) any {
				return map[string]any{"url": "http://localhost:" + e.target.port() + e.path}
			},
			maxAttempts: 3,
			status:      lease.StatusFailed, attempts: 1,
			errHas: []string{`"localhost:`, "--webhook-allow"},
		},
		{
			name:        "another port on the allowed address is refused",
			payload:     func(e hookEnv) any { return map[string]any{"url": e.outsider.srv.URL + e.path} },
			maxAttempts: 3,
			status:      lease.StatusFailed, attempts: 1,
			errHas: []string{"--webhook-allow"},
			check: func(t *testing.T, e hookEnv, _ int64, got finalRow, _ []request) {
				if !strings.Contains(got.LastError, strconv.Quote(e.outsider.hostPort())) {
					t.Errorf("last_error %q does not name %s", got.LastError, e.outsider.hostPort())
				}
				if n := len(e.outsider.requests(e.path)); n != 0 {
					t.Errorf("the server off the allow-list received %d requests", n)
				}
			},
		},
		{
			name:        "a redirect off the allow-list is not followed",
			payload:     func(e hookEnv) any { return map[string]any{"url": e.url()} },
			maxAttempts: 3,
			serve:       redirectTo(func(e hookEnv) string { return e.outsider.srv.URL + e.path + "/stolen" }),
			status:      lease.StatusFailed, attempts: 1, requests: 1,
			errHas: []string{"302 Found"},
			check: func(t *testing.T, e hookEnv, _ int64, got finalRow, _ []request) {
				if n := len(e.outsider.requests(e.path + "/stolen")); n != 0 {
					t.Errorf("redirect target received %d requests", n)
				}
			},
		},
		{
			name:        "a redirect to an allowed URL is not followed either",
			payload:     func(e hookEnv) any { return map[string]any{"url": e.url()} },
			maxAttempts: 3,
			serve:       redirectTo(func(e hookEnv) string { return e.url() + "/followed" }),
			status:      lease.StatusFailed, attempts: 1, requests: 1,
			errHas: []string{"302 Found"},
			check: func(t *testing.T, e hookEnv, _ int64, got finalRow, _ []request) {
				if n := len(e.target.requests(e.path + "/followed")); n != 0 {
					t.Errorf("redirect target received %d requests", n)
				}
			},
		},
		{
			name:        "a file URL is refused",
			payload:     func(hookEnv) any { return map[string]any{"url": "file:///etc/passwd"} },
			maxAttempts: 3,
			status:      lease.StatusFailed, attempts: 1,
			errHas: []string{"file:///etc/passwd", "must be http or https"},
		},
		{
			name: "credentials in the URL are refused and not echoed",
			payload: func(e hookEnv) any {
				return map[string]any{"url": "http://user:hunter2@" + e.target.hostPort() + e.path}
			},
			maxAttempts: 3,
			status:      lease.StatusFailed, attempts: 1,
			errHas: []string{"credentials"},
			check: func(t *testing.T, e hookEnv, _ int64, got finalRow, _ []request) {
				if strings.Contains(got.LastError, "hunter2") {
					t.Errorf("last_error leaks the password: %q", got.LastError)
				}
			},
		},
		{
			name:        "a missing URL is refused",
			payload:     func(hookEnv) any { return map[string]any{"body": map[string]int{"n": 1}} },
			maxAttempts: 3,
			status:      lease.StatusFailed, attempts: 1,
			errHas: []string{"not a valid URL"},
		},
		{
			name:        "a URL of the wrong JSON type fails at once",
			payload:     func(hookEnv) any { return map[string]any{"url": 42} },
			maxAttempts: 3,
			status:      lease.StatusFailed, attempts: 1,
			errHas: []string{"decode payload"},
		},
		{
			name:        "headers of the wrong JSON type fail at once",
			payload:     func(e hookEnv) any { return map[string]any{"url": e.url(), "headers": []string{"X-A: b"}} },
			maxAttempts: 3,
			status:      lease.StatusFailed, attempts: 1,
			errHas: []string{"decode payload"},
		},
		{
			name:        "a payload that is not an object fails at once",
			payload:     func(hookEnv) any { return sqlPayload(`["http://127.0.0.1/"]`) },
			maxAttempts: 3,
			status:      lease.StatusFailed, attempts: 1,
			errHas: []string{"decode payload"},
		},
	}

	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := hookEnv{target: target, outsider: outsider, sibling: sibling, path: fmt.Sprintf("/hook/%d", i)}
			if tc.serve != nil {
				target.on(e.path, tc.serve(e))
			}
			id := enqueue(t, pool, builtin.WebhookKind, tc.payload(e), tc.maxAttempts)
			got := waitFinal(t, pool, id)
			assertFinal(t, got, tc.status, tc.attempts, tc.errHas)
			reqs := target.requests(e.path)
			if len(reqs) != tc.requests {
				t.Fatalf("the server received %d requests, want %d", len(reqs), tc.requests)
			}
			if tc.check != nil {
				tc.check(t, e, id, got, reqs)
			}
		})
	}
}

// TestWebhookUnsigned: without a secret no signature header is sent, and an
// allow-list entry without a port admits every port of that host.
func TestWebhookUnsigned(t *testing.T) {
	target, err := newRecorder(t, "")
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.WebhookAllow = []string{"127.0.0.1"}
	cfg.WebhookTimeout = 5 * time.Second
	pool := startWorker(t, cfg)
	id := enqueue(t, pool, builtin.WebhookKind, map[string]any{"url": target.srv.URL + "/unsigned", "body": map[string]int{"n": 7}}, 1)
	assertFinal(t, waitFinal(t, pool, id), lease.StatusDone, 1, nil)
	reqs := target.requests("/unsigned")
	if len(reqs) != 1 {
		t.Fatalf("the server received %d requests, want 1", len(reqs))
	}
	if v, ok := reqs[0].Header[http.CanonicalHeaderKey(builtin.SignatureHeader)]; ok {
		t.Errorf("unsigned worker sent %s: %q", builtin.SignatureHeader, v)
	}
	if string(reqs[0].Body) != `{"n": 7}` {
		t.Errorf("body %q", reqs[0].Body)
	}
}

// TestNoop: the no-op handler acks any payload at its first attempt.
func TestNoop(t *testing.T) {
	pool := startWorker(t, testConfig())
	for _, payload := range []any{nil, map[string]any{"anything": []int{1, 2}}, sqlPayload(`"text"`)} {
		id := enqueue(t, pool, builtin.NoopKind, payload, 1)
		assertFinal(t, waitFinal(t, pool, id), lease.StatusDone, 1, nil)
	}
}

// TestSign checks builtin.Sign against a published HMAC-SHA256 vector.
func TestSign(t *testing.T) {
	got := builtin.Sign([]byte("key"), []byte("The quick brown fox jumps over the lazy dog"))
	const want = "sha256=f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8"
	if got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
}

type execCase struct {
	name        string
	payload     any
	maxAttempts int
	status      lease.Status
	attempts    int32
	errHas      []string
	check       func(t *testing.T, id int64)
}

// TestExec runs the exec handler in a real worker with the allow-list
// true, false, echo and a runs directory.
func TestExec(t *testing.T) {
	runsDir := t.TempDir()
	cfg := testConfig()
	cfg.ExecAllow = []string{"true", "false", "echo"}
	cfg.RunsDir = runsDir
	pool := startWorker(t, cfg)

	scratch := t.TempDir()
	victim := filepath.Join(scratch, "victim")
	if err := os.WriteFile(victim, []byte("still here"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustExist := func(t *testing.T, path string) {
		t.Helper()
		if _, err := os.Stat(path); err != nil {
			t.Errorf("%s: %v (a command that must not run ran)", path, err)
		}
	}
	mustNotExist := func(t *testing.T, path string) {
		t.Helper()
		if _, err := os.Stat(path); err == nil {
			t.Errorf("%s exists: a command that must not run ran", path)
		}
	}
	attemptLog := func(t *testing.T, id int64) string {
		t.Helper()
		var runID string
		if err := pool.QueryRow(context.Background(), "select workq.workq_run_id('job_runs', id, lease_version)::text from workq.job_runs_all where id = $1", id).Scan(&runID); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(runsDir, "job_runs", strconv.FormatInt(id, 10), runID, "attempt.log"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	truePath, err := exec.LookPath("true")
	if err != nil {
		t.Fatal(err)
	}
	truePath, _ = filepath.Abs(truePath)

	cases := []execCase{
		{name: "true is done", payload: map[string]any{"command": "true"}, status: lease.StatusDone, attempts: 1},
		{
			name: "false is retried, then failed", payload: map[string]any{"command": "false"}, maxAttempts: 3,
			status: lease.StatusFailed, attempts: 3, errHas: []string{"exec false", "exit status 1"},
		},
		{
			name: "echo output reaches attempt.log", payload: map[string]any{"command": "echo", "args": []string{"hello from exec"}},
			status: lease.StatusDone, attempts: 1,
			check: func(t *testing.T, id int64) {
				if log := attemptLog(t, id); !strings.Contains(log, `"output":"hello from exec\n"`) {
					t.Errorf("attempt.log lacks the echo output:\n%s", log)
				}
			},
		},
		{
			name: "arguments are not interpreted by a shell",
			payload: map[string]any{"command": "echo", "args": []string{
				"$(touch " + filepath.Join(scratch, "injected") + ")", ";", "rm", victim,
			}},
			status: lease.StatusDone, attempts: 1,
			check: func(t *testing.T, id int64) {
				mustNotExist(t, filepath.Join(scratch, "injected"))
				mustExist(t, victim)
				if log := attemptLog(t, id); !strings.Contains(log, "$(touch ") {
					t.Errorf("attempt.log lacks the literal argument:\n%s", log)
				}
			},
		},
		{
			name: "rm is off the allow-list", payload: map[string]any{"command": "rm", "args": []string{"-f", victim}}, maxAttempts: 3,
			status: lease.StatusFailed, attempts: 1, errHas: []string{`"rm" is not in this worker's --exec-allow list`},
			check: func(t *testing.T, _ int64) { mustExist(t, victim) },
		},
		{
			name: "/bin/sh is off the allow-list", maxAttempts: 3,
			payload: map[string]any{"command": "/bin/sh", "args": []string{"-c", "touch " + filepath.Join(scratch, "sh-ran")}},
			status:  lease.StatusFailed, attempts: 1, errHas: []string{`"/bin/sh"`, "--exec-allow"},
			check: func(t *testing.T, _ int64) { mustNotExist(t, filepath.Join(scratch, "sh-ran")) },
		},
		{
			name: "the path of an allowed name is not itself allowed", payload: map[string]any{"command": truePath}, maxAttempts: 3,
			status: lease.StatusFailed, attempts: 1, errHas: []string{strconv.Quote(truePath), "--exec-allow"},
		},
		{
			name: "an empty command is refused", payload: map[string]any{"args": []string{"x"}}, maxAttempts: 3,
			status: lease.StatusFailed, attempts: 1, errHas: []string{`command ""`},
		},
		{
			name: "a payload of the wrong shape fails at once", payload: map[string]any{"command": []string{"true"}}, maxAttempts: 3,
			status: lease.StatusFailed, attempts: 1, errHas: []string{"decode payload"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			id := enqueue(t, pool, builtin.ExecKind, tc.payload, tc.maxAttempts)
			assertFinal(t, waitFinal(t, pool, id), tc.status, tc.attempts, tc.errHas)
			if tc.check != nil {
				tc.check(t, id)
			}
		})
	}
}

// TestNewExecUnknownCommand: a typo in the allow-list fails at start-up,
// naming the command.
func TestNewExecUnknownCommand(t *testing.T) {
	_, err := builtin.NewExec([]string{"true", "workq-no-such-command"})
	if err == nil || !strings.Contains(err.Error(), `"workq-no-such-command"`) {
		t.Fatalf("NewExec = %v, want an error naming workq-no-such-command", err)
	}
	if _, err := builtin.NewExec(nil); err != nil {
		t.Fatalf("NewExec(nil) = %v", err)
	}
}
