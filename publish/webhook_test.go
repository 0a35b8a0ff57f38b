package publish_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/worker"
	"github.com/workq/workq/publish"
	"github.com/workq/workq/workqtype"
)

const testSecret = "publish-test-secret"

// request is what a test server received.
type request struct {
	Header http.Header
	Body   []byte
}

// recorder is a real HTTP server recording requests per path; each path
// answers with its registered behaviour (200 when none is).
type recorder struct {
	srv   *httptest.Server
	mu    sync.Mutex
	reqs  map[string][]request
	serve map[string]func(w http.ResponseWriter, r *http.Request, n int)
}

func newRecorder(t *testing.T) *recorder {
	rec := &recorder{reqs: map[string][]request{}, serve: map[string]func(http.ResponseWriter, *http.Request, int){}}
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.reqs[r.URL.Path] = append(rec.reqs[r.URL.Path], request{Header: r.Header.Clone(), Body: body})
		n := len(rec.reqs[r.URL.Path])
		serve := rec.serve[r.URL.Path]
		rec.mu.Unlock()
		if serve == nil {
			fmt.Fprint(w, "ok")
			return
		}
		serve(w, r, n)
	}))
	t.Cleanup(rec.srv.Close)
	return rec
}

func (rec *recorder) on(path string, f func(http.ResponseWriter, *http.Request, int)) {
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

func (rec *recorder) host() string { return rec.srv.Listener.Addr().String() }

// statuses answers the n-th request with codes[n-1] (the last repeats).
func statuses(codes ...int) func(http.ResponseWriter, *http.Request, int) {
	return func(w http.ResponseWriter, _ *http.Request, n int) {
		code := codes[min(n, len(codes))-1]
		w.WriteHeader(code)
		fmt.Fprintf(w, "answer %d of the test server", code)
	}
}

// TestWebhookRelay runs every webhook outcome through the real runtime and
// database against a real HTTP server: what the server received, and each
// message's final row.
func TestWebhookRelay(t *testing.T) {
	target := newRecorder(t)
	outsider := newRecorder(t) // reachable, not on the allow-list
	type tc struct {
		name     string
		msg      message
		serve    func(http.ResponseWriter, *http.Request, int)
		status   lease.Status
		attempts int32
		requests int
		errHas   []string
		check    func(t *testing.T, s sent, row finalRow, reqs []request)
	}
	cases := []tc{
		{
			name: "2xx acks; body, headers and signature",
			msg: message{Payload: map[string]any{"order": 42, "items": []string{"a", "b"}},
				Headers: map[string]any{
					"X-Tenant": "acme", "X-Count": 3, "X-Multi": []string{"one", "two"}, "X-Skip": nil,
					// Reserved or transport headers a message must not set:
					"Host": "evil.example", "Content-Length": "1", "Connection": "close",
					"Workq-Topic": "forged", "Workq-Signature": "sha256=forged", "Content-Type": "text/plain",
				},
				CorrelationID: "corr-1", PartitionKey: "customer-7"},
			status: lease.StatusDone, attempts: 1, requests: 1,
			check: func(t *testing.T, s sent, row finalRow, reqs []request) {
				r := reqs[0]
				if string(r.Body) != row.Payload {
					t.Errorf("body %q, want the stored payload %q", r.Body, row.Payload)
				}
				if err := publish.VerifyWebhook(testSecret, r.Header, r.Body, time.Minute, time.Now()); err != nil {
					t.Errorf("VerifyWebhook: %v", err)
				}
				want := map[string]string{
					"X-Tenant": "acme", "X-Count": "3", "Content-Type": "application/json",
					publish.HeaderMessageID: s.MessageID, publish.HeaderAttempt: "1",
					publish.HeaderCorrelationID: "corr-1", publish.HeaderPartitionKey: "customer-7",
				}
				for k, v := range want {
					if got := r.Header.Get(k); got != v {
						t.Errorf("header %s = %q, want %q", k, got, v)
					}
				}
				if got := r.Header.Values("X-Multi"); strings.Join(got, ",") != "one,two" {
					t.Errorf("X-Multi = %q, want [one two]", got)
				}
				if _, ok := r.Header["X-Skip"]; ok {
					t.Errorf("a null header was sent")
				}
				if got := r.Header.Get(publish.HeaderWebhookSignature); got != "" {
					t.Errorf("the default scheme sent %s %q", publish.HeaderWebhookSignature, got)
				}
				if got := r.Header.Get(publish.HeaderTopic); got == "forged" || got == "" {
					t.Errorf("Workq-Topic = %q: the message overrode it", got)
				}
				ts, err := strconv.ParseInt(r.Header.Get(publish.HeaderTimestamp), 10, 64)
				if err != nil || time.Since(time.Unix(ts, 0)) > time.Minute {
					t.Errorf("Workq-Timestamp %q is not a recent unix time", r.Header.Get(publish.HeaderTimestamp))
				}
			},
		},
		{
			name:  "5xx retries, then done",
			msg:   message{Payload: map[string]any{"n": 1}, MaxAttempts: 5},
			serve: statuses(500, 502, 200), status: lease.StatusDone, attempts: 3, requests: 3,
			check: func(t *testing.T, s sent, _ finalRow, reqs []request) {
				for i, r := range reqs {
					if got := r.Header.Get(publish.HeaderAttempt); got != strconv.Itoa(i+1) {
						t.Errorf("request %d: attempt header %q", i+1, got)
					}
					if got := r.Header.Get(publish.HeaderMessageID); got != s.MessageID {
						t.Errorf("request %d: message id %q, want the same %q on every retry", i+1, got, s.MessageID)
					}
				}
			},
		},
		{
			name: "5xx until the attempts are used up fails", msg: message{Payload: map[string]any{}, MaxAttempts: 2},
			serve: statuses(502), status: lease.StatusFailed, attempts: 2, requests: 2,
			errHas: []string{"502 Bad Gateway", "answer 502 of the test server"},
		},
		{
			name: "404 fails at once", msg: message{Payload: map[string]any{}},
			serve: statuses(404), status: lease.StatusFailed, attempts: 1, requests: 1,
			errHas: []string{"404 Not Found", "not retried"},
		},
		{
			name: "400 fails at once", msg: message{Payload: map[string]any{}},
			serve: statuses(400), status: lease.StatusFailed, attempts: 1, requests: 1,
			errHas: []string{"400 Bad Request"},
		},
		{
			name: "a timeout retries",
			msg:  message{Payload: map[string]any{}},
			// The first request hangs until the publisher gives up on it
			// (its timeout closes the connection, ending r.Context()).
			serve: func(w http.ResponseWriter, r *http.Request, n int) {
				if n == 1 {
					<-r.Context().Done()
					return
				}
				w.WriteHeader(200)
			},
			status: lease.StatusDone, attempts: 2, requests: 2,
		},
		{
			name: "a redirect off the allow-list is not followed",
			msg:  message{Payload: map[string]any{}},
			serve: func(w http.ResponseWriter, r *http.Request, _ int) {
				http.Redirect(w, r, outsider.srv.URL+"/stolen", http.StatusTemporaryRedirect)
			},
			status: lease.StatusFailed, attempts: 1, requests: 1,
			errHas: []string{"307 Temporary Redirect", "not followed"},
			check: func(t *testing.T, _ sent, _ finalRow, _ []request) {
				if n := outsider.total(); n != 0 {
					t.Errorf("the host off the allow-list received %d requests", n)
				}
			},
		},
		{
			name:   "a header HTTP cannot carry fails without a request",
			msg:    message{Payload: map[string]any{}, Headers: map[string]any{"Bad Name": "x"}},
			status: lease.StatusFailed, attempts: 1, requests: 0,
			errHas: []string{`"Bad Name"`},
		},
	}
	pool := testdb.PoolWith(t, 8)
	handlers := map[string]publisher{}
	for i := range cases {
		c := &cases[i]
		c.msg.Topic = fmt.Sprintf("hook.case-%d", i)
		path := fmt.Sprintf("/case/%d", i)
		if c.serve != nil {
			target.on(path, c.serve)
		}
		wh, err := publish.NewWebhook(publish.WebhookConfig{URL: target.srv.URL + path, Secret: testSecret,
			AllowHosts: []string{target.host()}, Timeout: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		handlers[c.msg.Topic] = wh.Handle
	}
	startRelay(t, pool, relayConfig(), handlers, worker.Options{})
	msgs := make([]message, len(cases))
	for i, c := range cases {
		msgs[i] = c.msg
	}
	ids := enqueue(t, pool, msgs...)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			row := waitFinal(t, pool, ids[i].ID)
			if row.Status != c.status || row.Attempts != c.attempts {
				t.Errorf("ended %s after %d attempts (last error %q), want %s after %d", row.Status, row.Attempts, row.LastError, c.status, c.attempts)
			}
			for _, s := range c.errHas {
				if !strings.Contains(row.LastError, s) {
					t.Errorf("last_error %q does not mention %q", row.LastError, s)
				}
			}
			reqs := target.requests(fmt.Sprintf("/case/%d", i))
			if len(reqs) != c.requests {
				t.Fatalf("server received %d requests, want %d", len(reqs), c.requests)
			}
			if c.check != nil {
				c.check(t, ids[i], row, reqs)
			}
		})
	}
}

// TestVerifyWebhook checks the receiver side against a signature computed
// here, independently of the publisher.
func TestVerifyWebhook(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"order": 42}`)
	const msgID, topic = "0191b5c4-7f00-8000-8000-000000000001", "orders.placed"
	signed := func(secret string, ts int64, body []byte) http.Header {
		h := http.Header{}
		h.Set(publish.HeaderTimestamp, strconv.FormatInt(ts, 10))
		h.Set(publish.HeaderMessageID, msgID)
		h.Set(publish.HeaderTopic, topic)
		h.Set(publish.HeaderSignature, hmacHex(secret, strconv.FormatInt(ts, 10)+"\n"+msgID+"\n"+topic+"\n"+string(body)))
		return h
	}
	cases := []struct {
		name   string
		header http.Header
		body   []byte
		want   error
	}{
		{"valid", signed(testSecret, now.Unix(), body), body, nil},
		{"valid within the tolerance", signed(testSecret, now.Unix()-299, body), body, nil},
		{"tampered body", signed(testSecret, now.Unix(), body), []byte(`{"order": 43}`), publish.ErrBadSignature},
		{"other secret", signed("other", now.Unix(), body), body, publish.ErrBadSignature},
		{"stale timestamp", signed(testSecret, now.Unix()-301, body), body, publish.ErrStaleTimestamp},
		{"timestamp from the future", signed(testSecret, now.Unix()+301, body), body, publish.ErrStaleTimestamp},
		{"timestamp changed after signing", func() http.Header {
			h := signed(testSecret, now.Unix()-1000, body)
			h.Set(publish.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
			return h
		}(), body, publish.ErrBadSignature},
		{"message id changed after signing (a replay past de-duplication)", func() http.Header {
			h := signed(testSecret, now.Unix(), body)
			h.Set(publish.HeaderMessageID, "0191b5c4-7f00-8000-8000-000000000002")
			return h
		}(), body, publish.ErrBadSignature},
		{"topic changed after signing", func() http.Header {
			h := signed(testSecret, now.Unix(), body)
			h.Set(publish.HeaderTopic, "orders.cancelled")
			return h
		}(), body, publish.ErrBadSignature},
		{"no signature", func() http.Header {
			h := signed(testSecret, now.Unix(), body)
			h.Del(publish.HeaderSignature)
			return h
		}(), body, publish.ErrBadSignature},
		{"no timestamp", http.Header{publish.HeaderSignature: {"sha256=00"}}, body, publish.ErrBadSignature},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := publish.VerifyWebhook(testSecret, c.header, c.body, 5*time.Minute, now)
			if c.want == nil && err != nil {
				t.Fatalf("VerifyWebhook: %v", err)
			}
			if c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("VerifyWebhook = %v, want %v", err, c.want)
			}
		})
	}
}

// TestNewWebhookInvalid: a bad configuration is refused with ErrInvalid and
// without any request.
func TestNewWebhookInvalid(t *testing.T) {
	srv := newRecorder(t)
	u, _ := url.Parse(srv.srv.URL)
	ok := publish.WebhookConfig{URL: srv.srv.URL + "/hook", Secret: testSecret, AllowHosts: []string{srv.host()}}
	cases := []struct {
		name   string
		edit   func(c *publish.WebhookConfig)
		also   error
		errHas string
	}{
		{"no secret", func(c *publish.WebhookConfig) { c.Secret = "" }, nil, "secret"},
		{"host not allowed", func(c *publish.WebhookConfig) { c.AllowHosts = []string{"example.com"} }, publish.ErrNotAllowed, u.Host},
		{"other port of the host", func(c *publish.WebhookConfig) { c.AllowHosts = []string{u.Hostname() + ":1"} }, publish.ErrNotAllowed, u.Host},
		{"empty allow-list", func(c *publish.WebhookConfig) { c.AllowHosts = nil }, nil, "AllowHosts"},
		{"not http", func(c *publish.WebhookConfig) { c.URL = "file:///etc/passwd" }, nil, "http or https"},
		{"credentials", func(c *publish.WebhookConfig) { c.URL = "http://u:p@" + u.Host + "/" }, nil, "credentials"},
		{"negative timeout", func(c *publish.WebhookConfig) { c.Timeout = -time.Second }, nil, "timeout"},
		{"unknown signature", func(c *publish.WebhookConfig) { c.Signature = "hmac" }, nil, `unknown signature "hmac"`},
		{"standard signature, plain secret", func(c *publish.WebhookConfig) { c.Signature = publish.SignatureStandard }, nil, `does not start with "whsec_"`},
		{"standard signature, not base64", func(c *publish.WebhookConfig) {
			c.Signature, c.Secret = publish.SignatureStandard, "whsec_not*base64"
		}, nil, "not base64"},
		{"standard signature, short key", func(c *publish.WebhookConfig) {
			c.Signature, c.Secret = publish.SignatureStandard, "whsec_"+base64.StdEncoding.EncodeToString(make([]byte, 16))
		}, nil, "16 bytes, want 24 to 64"},
		{"standard signature, second secret bad", func(c *publish.WebhookConfig) {
			c.Signature, c.Secret = publish.SignatureStandard, "whsec_"+base64.StdEncoding.EncodeToString(make([]byte, 32))+" hunter2"
		}, nil, "secret 2 of 2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := ok
			c.edit(&cfg)
			_, err := publish.NewWebhook(cfg)
			if !errors.Is(err, workqtype.ErrInvalid) || (c.also != nil && !errors.Is(err, c.also)) || !strings.Contains(fmt.Sprint(err), c.errHas) {
				t.Fatalf("NewWebhook = %v, want ErrInvalid (and %v) mentioning %q", err, c.also, c.errHas)
			}
			if secret := strings.TrimPrefix(cfg.Secret, "whsec_"); (secret != "" && strings.Contains(err.Error(), secret)) || strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("NewWebhook = %v: the error shows the secret", err)
			}
		})
	}
	if _, err := publish.NewWebhook(ok); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	if n := srv.total(); n != 0 {
		t.Errorf("server received %d requests", n)
	}
}
