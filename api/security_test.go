package api

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/testdb"
)

// attack sends one request to hs as a browser or a script would: Host,
// body and headers as given (pairs; Content-Type among them), from the
// local address from ("" for any).
func attack(t *testing.T, hs *httptest.Server, method, path, host, body string, hdr ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, hs.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	client := hs.Client()
	for i := 0; i+1 < len(hdr); i += 2 {
		switch hdr[i] {
		case "from": // the client's own address: another loopback address is another client
			d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(hdr[i+1])}}
			client = &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
		default:
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// newInsecure is a Server without tokens (--insecure) over its own
// database behind a loopback listener.
func newInsecure(t *testing.T) (*httptest.Server, *Server, func() string) {
	t.Helper()
	pool := testdb.Pool(t)
	s, err := newServer(t, setup{Options: Options{Insecure: true, Logger: testLogger(t)}, pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return hs, s, func() string { return snapshot(t, pool) }
}

// TestInsecureRefusesOtherHosts: DNS rebinding (issue 18). A page on
// attacker.example whose name then resolves to 127.0.0.1 sends its
// requests to the insecure API with Host attacker.example: they must get
// nothing, neither the admin API nor an anonymous dashboard session.
func TestInsecureRefusesOtherHosts(t *testing.T) {
	hs, _, snap := newInsecure(t)
	_, port, _ := net.SplitHostPort(hs.Listener.Addr().String())
	before := snap()
	json := []string{"Content-Type", "application/json"}
	for _, host := range []string{"attacker.example", "attacker.example:" + port, "127.0.0.1.attacker.example:" + port,
		"localhost.attacker.example", "0.0.0.0:" + port, "10.1.2.3:" + port, "[::ffff:10.0.0.1]:" + port} {
		for _, rq := range []struct{ method, path, body string }{
			{"POST", "/v1/jobs", `{"kind":"rebound"}`},
			{"POST", "/v1/queues/job_runs/default/pause", ``},
			{"POST", "/v1/tables/job_runs/items/delete-matching", `{"filter":{}}`},
			{"GET", "/v1/queues", ``},
			{"GET", "/v1/tables/job_runs/items", ``},
			{"GET", "/readyz", ``},
			{"GET", "/openapi.json", ``},
			{"GET", "/ui/", ``},
			{"GET", "/ui/api/overview", ``},
			{"POST", "/ui/queues/job_runs/default/pause", `csrf=x`},
		} {
			r := attack(t, hs, rq.method, rq.path, host, rq.body, json...)
			if r.status != http.StatusMisdirectedRequest {
				t.Errorf("Host %s: %s %s: status %d, want 421: %s", host, rq.method, rq.path, r.status, r.body)
				continue
			}
			if e := r.err(t); e.Code != CodeMisdirected || !strings.Contains(e.Message, "localhost, 127.0.0.1 or [::1]") {
				t.Errorf("Host %s: %s %s: %+v", host, rq.method, rq.path, e)
			}
			if c := r.header.Get("Set-Cookie"); c != "" {
				t.Errorf("Host %s: %s %s set a cookie: %s", host, rq.method, rq.path, c)
			}
		}
	}
	// HTTP/1.0 without any Host.
	conn, err := net.Dial("tcp", hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "GET /v1/queues HTTP/1.0\r\n\r\n")
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("no Host: status %d, want 421", res.StatusCode)
	}
	if after := snap(); after != before {
		t.Fatalf("a request to another host changed the database:\nbefore %s\nafter  %s", before, after)
	}

	// Loopback names and addresses are served.
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LocalHost", "127.9.8.7:" + port, "[::1]:" + port, "[::1]", "127.0.0.1"} {
		if r := attack(t, hs, "GET", "/v1/queues", host, ""); r.status != http.StatusOK {
			t.Errorf("Host %s: status %d: %s", host, r.status, r.body)
		}
	}
	if r := attack(t, hs, "POST", "/v1/jobs", "localhost:"+port, `{"kind":"local"}`, json...); r.status != http.StatusCreated {
		t.Errorf("a write to localhost: %d %s", r.status, r.body)
	}
	if r := attack(t, hs, "GET", "/ui/", "localhost:"+port, ""); r.status != http.StatusOK || r.header.Get("Set-Cookie") == "" {
		t.Errorf("the dashboard on localhost: %d, cookie %q", r.status, r.header.Get("Set-Cookie"))
	}

	// With tokens any Host is served (a proxy's name): the token is the guard.
	e := newEnv(t)
	if r := attack(t, e.http, "GET", "/v1/queues", "api.example.com", "", "Authorization", "Bearer "+e.read); r.status != http.StatusOK {
		t.Errorf("with tokens, Host api.example.com: %d %s", r.status, r.body)
	}
}

// TestCrossSiteWritesRefused: a cross-site HTML form (issue 18) posts
// with no body, or a form-encoded or text/plain one; the insecure API
// served it as the admin. Writes need application/json even when empty,
// and requests a browser marks as cross-origin are refused; nothing is
// written.
func TestCrossSiteWritesRefused(t *testing.T) {
	hs, _, snap := newInsecure(t)
	json := []string{"Content-Type", "application/json"}
	if r := attack(t, hs, "POST", "/v1/schedules", "", `{"name":"nightly","cron":"@daily","kind":"k","enabled":false}`, json...); r.status != 201 {
		t.Fatalf("create schedule: %d %s", r.status, r.body)
	}
	if r := attack(t, hs, "POST", "/v1/jobs", "", `{"kind":"k"}`, json...); r.status != 201 {
		t.Fatalf("enqueue: %d %s", r.status, r.body)
	}
	before := snap()
	const evil = "http://attacker.example"
	forms := []struct {
		name string
		body string
		hdr  []string
		want int
	}{
		{"cross-site form", "", []string{"Content-Type", "application/x-www-form-urlencoded", "Origin", evil, "Sec-Fetch-Site", "cross-site"}, 403},
		{"cross-site form of an old browser", "", []string{"Content-Type", "application/x-www-form-urlencoded", "Origin", evil}, 403},
		{"same-site, other origin", "", []string{"Content-Type", "application/x-www-form-urlencoded", "Sec-Fetch-Site", "same-site"}, 403},
		{"cross-site text/plain JSON", `{"ids":[1]}`, []string{"Content-Type", "text/plain", "Origin", evil, "Sec-Fetch-Site", "cross-site"}, 403},
		{"cross-site fetch with JSON", `{"ids":[1]}`, []string{"Content-Type", "application/json", "Origin", evil, "Sec-Fetch-Site", "cross-site"}, 403},
		{"no content type, no body", "", nil, 415},
		{"form type, no body, no origin", "", []string{"Content-Type", "application/x-www-form-urlencoded"}, 415},
	}
	paths := []string{"/v1/queues/job_runs/default/pause", "/v1/queues/job_runs/default/resume", "/v1/schedules/nightly/trigger",
		"/v1/schedules/nightly/enable", "/v1/schedules/nightly/disable", "/v1/tables/job_runs/items/cancel", "/v1/jobs"}
	for _, f := range forms {
		for _, path := range paths {
			want := f.want
			r := attack(t, hs, "POST", path, "", f.body, f.hdr...)
			if r.status != want {
				t.Errorf("%s: POST %s: status %d, want %d: %s", f.name, path, r.status, want, r.body)
				continue
			}
			if e := r.err(t); e.Code != map[int]string{403: CodeForbidden, 415: CodeUnsupportedMedia}[want] {
				t.Errorf("%s: POST %s: code %q", f.name, path, e.Code)
			}
		}
	}
	if after := snap(); after != before {
		t.Fatalf("a refused cross-site request changed the database:\nbefore %s\nafter  %s", before, after)
	}
	// A program's empty write with the JSON type, and a same-origin browser's, go through.
	if r := attack(t, hs, "POST", "/v1/queues/job_runs/default/pause", "", "", json...); r.status != 200 {
		t.Fatalf("pause with an empty JSON body: %d %s", r.status, r.body)
	}
	if r := attack(t, hs, "POST", "/v1/queues/job_runs/default/resume", "", "", "Content-Type", "application/json",
		"Sec-Fetch-Site", "same-origin", "Origin", hs.URL); r.status != 200 {
		t.Fatalf("resume from the same origin: %d %s", r.status, r.body)
	}
	// Reads are not refused for their origin (they change nothing; a
	// browser keeps a cross-origin answer from the page anyway).
	if r := attack(t, hs, "GET", "/v1/queues", "", "", "Sec-Fetch-Site", "cross-site", "Origin", evil); r.status != 200 {
		t.Fatalf("a cross-site read: %d %s", r.status, r.body)
	}
}

// TestBadTokensRateLimited: failed bearer tokens and failed dashboard
// logins share one budget per client address (issue 18); once it is spent
// every token of that address is refused unchecked, a good one too,
// with 429 and Retry-After, while other addresses are served.
func TestBadTokensRateLimited(t *testing.T) {
	for _, via := range []string{"bearer", "login"} {
		t.Run(via, func(t *testing.T) {
			e := newEnv(t)
			advance := freezeFailures(e.srv)
			fail := func() response {
				if via == "bearer" {
					return attack(t, e.http, "GET", "/v1/queues", "", "", "Authorization", "Bearer wq_guess")
				}
				return attack(t, e.http, "POST", "/ui/login", "", url.Values{"token": {"wq_guess"}}.Encode(),
					"Content-Type", "application/x-www-form-urlencoded", "Sec-Fetch-Site", "same-origin")
			}
			for i := range 10 {
				if r := fail(); r.status != http.StatusUnauthorized {
					t.Fatalf("bad token %d: status %d, want 401: %s", i+1, r.status, r.body)
				}
			}
			r := fail()
			if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "6" {
				t.Fatalf("bad token 11: status %d, Retry-After %q; want 429 and 6: %s", r.status, r.header.Get("Retry-After"), r.body)
			}
			// The good token from the same address: refused unchecked, by both doors.
			r = attack(t, e.http, "GET", "/v1/queues", "", "", "Authorization", "Bearer "+e.admin)
			if r.status != http.StatusTooManyRequests || r.err(t).Code != CodeTooManyRequests || r.header.Get("Retry-After") == "" {
				t.Fatalf("good token while locked out: %d %s (Retry-After %q)", r.status, r.body, r.header.Get("Retry-After"))
			}
			r = attack(t, e.http, "POST", "/ui/login", "", url.Values{"token": {e.admin}}.Encode(),
				"Content-Type", "application/x-www-form-urlencoded", "Sec-Fetch-Site", "same-origin")
			if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" || r.header.Get("Set-Cookie") != "" {
				t.Fatalf("login while locked out: %d (Retry-After %q, cookie %q)", r.status, r.header.Get("Retry-After"), r.header.Get("Set-Cookie"))
			}
			// What needs no token is served.
			if r := attack(t, e.http, "GET", "/healthz", "", ""); r.status != 200 {
				t.Fatalf("healthz while locked out: %d", r.status)
			}
			// Another address is another client.
			if r := attack(t, e.http, "GET", "/v1/queues", "", "", "Authorization", "Bearer "+e.admin, "from", "127.0.0.2"); r.status != 200 {
				t.Fatalf("good token from another address: %d %s", r.status, r.body)
			}
			// One failure more is allowed every 6 s.
			advance(6 * time.Second)
			if r := attack(t, e.http, "GET", "/v1/queues", "", "", "Authorization", "Bearer "+e.admin); r.status != 200 {
				t.Fatalf("good token after Retry-After: %d %s", r.status, r.body)
			}
			if r := fail(); r.status != http.StatusUnauthorized {
				t.Fatalf("a bad token after Retry-After: %d", r.status)
			}
			if r := fail(); r.status != http.StatusTooManyRequests {
				t.Fatalf("the next bad token: %d, want 429", r.status)
			}
		})
	}
}

// countingTracer counts the statements run on a pool (a pgx tracer of
// its connections).
type countingTracer struct{ n atomic.Int64 }

func (c *countingTracer) count() int { return int(c.n.Load()) }

func (c *countingTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *countingTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestReadyzSharesOneCheck: /readyz needs no token, so a flood of it must
// not be a flood of statements (issue 18): concurrent callers share one
// check, and its answer serves for a second.
func TestReadyzSharesOneCheck(t *testing.T) {
	db := &countingTracer{}
	pool := testdb.PoolTraced(t, db)
	s, err := newServer(t, setup{Options: Options{Insecure: true, Logger: testLogger(t), DisableUI: true}, pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	defer hs.Close()
	advance := freezeReady(s)

	const callers = 64
	var wg sync.WaitGroup
	bodies := make([]response, callers)
	start := make(chan struct{})
	for i := range callers {
		wg.Go(func() {
			<-start
			bodies[i] = attack(t, hs, "GET", "/readyz", "", "")
		})
	}
	close(start)
	wg.Wait()
	for i, r := range bodies {
		if r.status != 200 || string(r.body) != string(bodies[0].body) {
			t.Fatalf("caller %d: %d %s (first: %s)", i, r.status, r.body, bodies[0].body)
		}
	}
	burst := db.count()
	// A second later the next call checks again: that is what one check costs.
	advance(readyTTL)
	if r := attack(t, hs, "GET", "/readyz", "", ""); r.status != 200 {
		t.Fatalf("readyz: %d %s", r.status, r.body)
	}
	perCheck := db.count() - burst
	if perCheck == 0 {
		t.Fatal("the call after the cache's second ran no statement")
	}
	if burst != perCheck {
		t.Fatalf("%d concurrent /readyz ran %d statements; one check is %d: want exactly one check", callers, burst, perCheck)
	}
	// Within the second, more calls cost nothing.
	for range 10 {
		attack(t, hs, "GET", "/readyz", "", "")
	}
	if n := db.count(); n != burst+perCheck {
		t.Fatalf("cached calls ran %d statements", n-burst-perCheck)
	}
}

// TestStrictJSONAccepts what is valid: surrogate pairs, an escaped
// backslash before "ud800" (text, not an escape), any case and any name
// inside a payload, each once.
func TestStrictJSONAccepts(t *testing.T) {
	e := newEnv(t)
	body := raw(`{"kind":"k","payload":{"emoji":"\ud83d\ude00","EMOJI":"\uD83D\uDE00","text":"\\ud800","é":"\u00e9\u00a0"}}`)
	var res jobResult
	e.must(201, "POST", "/v1/jobs", e.admin, body).decode(t, &res)
	var payload map[string]string
	if err := e.pool.QueryRow(context.Background(), `select payload from workq.job_runs_all where id = $1`, res.ID).Scan(&payload); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"emoji": "😀", "EMOJI": "😀", "text": `\ud800`, "é": "é\u00a0"}
	if fmt.Sprint(payload) != fmt.Sprint(want) {
		t.Fatalf("stored payload %q, want %q", payload, want)
	}
	e.must(201, "POST", "/v1/outbox", e.admin, raw(`{"topic":"order\u00a0created","headers":{"x-a":"1","X-A":"2"}}`))
}
