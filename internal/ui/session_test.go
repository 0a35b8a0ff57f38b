package ui_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/ui"
)

// TestLoginsCannotEvictOtherTokens: with one global cap that evicted the
// oldest session, any token holder logged everyone else out by logging in
// often enough (issue 18: 10,050 read-token logins in 5 s ended an admin's
// session). Now each token holds at most its own share, a login past it
// ends only that token's oldest session, and a login into a store full of
// other tokens' sessions is refused.
func TestLoginsCannotEvictOtherTokens(t *testing.T) {
	pool := testdb.Pool(t)
	secrets := map[string]ui.Principal{"admin-secret": {Name: "ops", Admin: true}, "read-secret": {Name: "viewer"}}
	for i := range 3 {
		secrets[fmt.Sprintf("t%d-secret", i)] = ui.Principal{Name: fmt.Sprintf("t%d", i)}
	}
	const maxSessions, perToken = 8, 3
	client, err := workq.NewClient(pool, workq.Config{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := ui.New(ui.Options{Client: client, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		MaxSessions: maxSessions, MaxSessionsPerToken: perToken,
		Authenticate: func(secret string) (ui.Principal, bool) { p, ok := secrets[secret]; return p, ok }})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	defer hs.Close()
	s := &site{t: t, pool: pool, http: hs}

	admin := s.browser()
	admin.login("admin-secret")
	loggedIn := func(b *browser) bool {
		t.Helper()
		p := b.get("/ui/schedules")
		return p.status == http.StatusOK
	}
	// The read token logs in many times over: its own oldest sessions end.
	var viewers []*browser
	for range 60 {
		b := s.browser()
		b.login("read-secret")
		viewers = append(viewers, b)
	}
	if !loggedIn(admin) {
		t.Fatal("60 logins with the read token ended the admin's session")
	}
	if n := h.Sessions(); n != 1+perToken {
		t.Fatalf("%d sessions held, want %d (the admin's and the read token's %d)", n, 1+perToken, perToken)
	}
	if loggedIn(viewers[0]) {
		t.Error("the read token's first session outlived its token's bound")
	}
	for _, b := range viewers[len(viewers)-perToken:] {
		if !loggedIn(b) {
			t.Error("one of the read token's newest sessions ended")
		}
	}

	// Fill the store with other tokens: t0 takes its 3, t1 the last free one.
	var others []*browser
	for _, tok := range []string{"t0-secret", "t0-secret", "t0-secret", "t1-secret"} {
		b := s.browser()
		b.login(tok)
		others = append(others, b)
	}
	if n := h.Sessions(); n != maxSessions {
		t.Fatalf("%d sessions, want the store full (%d)", n, maxSessions)
	}
	// t1 logs in again in a full store: its own session makes room.
	again := s.browser()
	again.login("t1-secret")
	if loggedIn(others[3]) || !loggedIn(again) {
		t.Error("t1's second login in a full store did not replace its first session")
	}
	// t2 has no session to give up: refused, and nobody else is logged out.
	p := s.browser().post("/ui/login", url.Values{"token": {"t2-secret"}, "csrf": {""}})
	must(t, p, http.StatusServiceUnavailable, "as many sessions as it may")
	if p.header.Get("Retry-After") == "" || p.header.Get("Set-Cookie") != "" {
		t.Errorf("refused login: Retry-After %q, Set-Cookie %q", p.header.Get("Retry-After"), p.header.Get("Set-Cookie"))
	}
	for i, b := range append([]*browser{admin, again}, append(others[:3], viewers[len(viewers)-perToken:]...)...) {
		if !loggedIn(b) {
			t.Errorf("session %d ended by another token's login", i)
		}
	}
}
