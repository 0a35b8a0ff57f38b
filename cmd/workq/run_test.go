package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/config"
	"github.com/workq/workq/internal/testdb"
)

var progressLineRE = regexp.MustCompile(`(?m)^\[\s*\d+s\] job_runs \d+\/\d+\/\d+\/\d+ outbox `)

// TestRunForStartsAfterStartup: `workq run --for D` runs the worker for D
// once the server answers, the schema is migrated and the worker is running.
// A slow start (a throwaway server's initdb, a migration waiting for a lock)
// used to eat the window, and with a start longer than D the command failed
// before the worker ran at all.
func TestRunForStartsAfterStartup(t *testing.T) {
	isolateEnv(t)
	const (
		slowStart = 3 * time.Second
		window    = 2500 * time.Millisecond
	)
	cases := []struct {
		name string
		slow func(t *testing.T, dbURL string) string // delays the start by slowStart; returns the URL to use
	}{
		{"server slow to answer", func(t *testing.T, dbURL string) string { return slowProxy(t, dbURL, slowStart) }},
		{"migration waits for a lock", func(t *testing.T, dbURL string) string { lockMigrations(t, dbURL, slowStart); return dbURL }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dbURL := tc.slow(t, testdb.URL(t))
			start := time.Now()
			out, err := runCLI(t, "run", "--database-url", dbURL, "--for", window.String(), "--demo-jobs", "5", "--log-level", "warn")
			took := time.Since(start)
			if err != nil {
				t.Fatalf("workq run --for %s after a %s start: %v\nstdout:\n%s", window, slowStart, err, out)
			}
			if n := len(progressLineRE.FindAllString(out, -1)); n < 2 {
				t.Errorf("%d progress lines in a %s window, want 2 (one a second):\n%s", n, window, out)
			}
			if !strings.Contains(out, "workq: stopped.") {
				t.Errorf("stdout lacks the final 'workq: stopped.' line:\n%s", out)
			}
			if took < slowStart+window {
				t.Errorf("the command took %s; the start alone took %s, and the window %s comes after it", took, slowStart, window)
			}
		})
	}
}

// slowProxy forwards TCP connections to the server of dbURL, but accepts
// none until delay has passed, like a server that is still starting. It
// returns dbURL pointed at the proxy.
func slowProxy(t *testing.T, dbURL string, delay time.Duration) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	target := u.Host
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	track := func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		time.Sleep(delay) // connections wait in the listen backlog meanwhile
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			track(in)
			track(out)
			wg.Add(2)
			go func() { defer wg.Done(); _, _ = io.Copy(out, in); out.Close() }()
			go func() { defer wg.Done(); _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	u.Host = ln.Addr().String()
	return u.String()
}

// lockMigrations holds an exclusive lock on workq's version table for d, so
// that a migration waits that long.
func lockMigrations(t *testing.T, dbURL string, d time.Duration) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "lock table workq.workq_migrations in access exclusive mode"); err != nil {
		t.Fatal(err)
	}
	released := make(chan struct{})
	go func() { defer close(released); time.Sleep(d); _ = tx.Rollback(ctx) }()
	t.Cleanup(func() { <-released })
}

// TestDemoAPIPrintsAWorkingDashboardLogin: `workq run` prints the
// dashboard's URL and a token that logs in to it.
func TestDemoAPIPrintsAWorkingDashboardLogin(t *testing.T) {
	isolateEnv(t)
	pool := testdb.Pool(t)
	cfg := config.Default()
	cfg.APIAddr = "127.0.0.1:0"
	var out strings.Builder
	stop, err := startDemoAPI(context.Background(), demoClient(t, pool), cfg, slog.New(slog.DiscardHandler), &out, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	m := regexp.MustCompile(`admin token (wq_\S+),[\s\S]*workq: dashboard at (http://\S+/ui/) \(log in with the token above\)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no token and dashboard URL in:\n%s", out.String())
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.PostForm(m[2]+"login", url.Values{"token": {m[1]}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || len(res.Cookies()) == 0 {
		t.Fatalf("login with the printed token: %d, %d cookies", res.StatusCode, len(res.Cookies()))
	}
	req, err := http.NewRequest("GET", m[2], nil)
	if err != nil {
		t.Fatal(err)
	}
	req.AddCookie(res.Cookies()[0])
	res, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), "<h1>Overview</h1>") {
		t.Fatalf("the overview after login: %d\n%s", res.StatusCode, body)
	}
}
