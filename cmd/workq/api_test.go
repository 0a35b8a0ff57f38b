package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/workq/workq/api"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/testutil"
)

var listening = regexp.MustCompile(`api listening"? addr=(\S+)`)

// startAPI runs `workq api args...` until the returned stop is called,
// and returns the address it listens on.
func startAPI(t *testing.T, args ...string) (addr string, stop func() error) {
	t.Helper()
	var out bytes.Buffer
	var errOut testutil.Buffer
	root := newRoot(&out, &errOut)
	root.SetArgs(append([]string{"api"}, args...))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := listening.FindStringSubmatch(errOut.String()); m != nil {
			addr = m[1]
			break
		}
		select {
		case err := <-done:
			cancel()
			t.Fatalf("workq api exited before listening: %v\n%s", err, errOut.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("workq api did not listen within 30s:\n%s", errOut.String())
		}
	}
	return addr, func() error {
		cancel()
		select {
		case err := <-done:
			t.Logf("stderr of workq api:\n%s", errOut.String())
			return err
		case <-time.After(30 * time.Second):
			t.Fatal("workq api did not stop within 30s of its context ending")
			return nil
		}
	}
}

func get(t *testing.T, url, token string) int {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

func TestAPICommand(t *testing.T) {
	isolateEnv(t)
	t.Setenv("DATABASE_URL", testdb.URL(t))

	out, err := runCLI(t, "api", "token", "deploy-bot", "--scope", "admin", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var tok struct{ Name, Scope, Token, Entry string }
	if err := json.Unmarshal([]byte(out), &tok); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if tok.Scope != "admin" || !strings.HasPrefix(tok.Entry, "deploy-bot:admin:") || strings.Contains(tok.Entry, tok.Token) {
		t.Fatalf("token: %+v", tok)
	}
	text, err := runCLI(t, "api", "token", "viewer")
	if err != nil || !strings.Contains(text, "entry:  viewer:read:") || !strings.Contains(text, "token:  wq_") {
		t.Fatalf("token text: %q %v", text, err)
	}

	addr, stop := startAPI(t, "--api-addr", "127.0.0.1:0", "--api-tokens", tok.Entry)
	base := "http://" + addr
	if got := get(t, base+"/healthz", ""); got != 200 {
		t.Errorf("healthz: %d", got)
	}
	if got := get(t, base+"/readyz", ""); got != 200 {
		t.Errorf("readyz: %d", got)
	}
	if got := get(t, base+"/v1/queues", ""); got != 401 {
		t.Errorf("no token: %d", got)
	}
	if got := get(t, base+"/v1/queues", tok.Token); got != 200 {
		t.Errorf("with the token: %d", got)
	}
	if err := stop(); err != nil {
		t.Fatalf("workq api after its context ended: %v", err)
	}

	// Insecure on loopback starts (and warns).
	addr, stop = startAPI(t, "--api-addr", "127.0.0.1:0", "--insecure")
	if got := get(t, "http://"+addr+"/v1/queues", ""); got != 200 {
		t.Errorf("insecure: %d", got)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestAPICommandRefuses(t *testing.T) {
	isolateEnv(t)
	t.Setenv("DATABASE_URL", testdb.URL(t))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"api", "--api-addr", "127.0.0.1:0"}, "refusing to serve the API without a token"},
		{[]string{"api", "--insecure", "--api-addr", "0.0.0.0:0"}, "not a loopback address"},
		{[]string{"api", "--insecure", "--api-addr", ":0"}, "not a loopback address"},
		{[]string{"api", "--api-tokens", "ops:admin:not-a-hash"}, "64 hex digits"},
		{[]string{"api", "--api-tokens", "ops:root:" + strings.Repeat("0", 64)}, `scope "root"`},
		{[]string{"api", "--api-addr", "nonsense", "--insecure"}, "api-addr"},
		{[]string{"api", "--api-read-timeout", "0s", "--insecure"}, "api-read-timeout must be positive"},
		{[]string{"api", "token", "a b"}, `token name "a b"`},
		{[]string{"api", "token", "x", "--scope", "root"}, "--scope"},
	} {
		_, err := runCLI(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("workq %q: %v, want an error with %q", c.args, err, c.want)
		}
		if (strings.Contains(c.want, "loopback") || strings.Contains(c.want, "refusing")) && !errors.Is(err, api.ErrNoTokens) {
			t.Errorf("workq %q: %v does not wrap api.ErrNoTokens", c.args, err)
		}
	}
}
