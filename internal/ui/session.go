package ui

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"sync"
	"time"
)

// Defaults of the session store.
const (
	DefaultSessionTTL          = 12 * time.Hour
	DefaultMaxSessions         = 10000
	DefaultMaxSessionsPerToken = 100
	cookieName                 = "workq_session"
)

// Principal is who a session acts for: the API token's name and whether
// its scope is admin (otherwise read).
type Principal struct {
	Name  string
	Admin bool
}

// session is one login: a random id (the cookie's value) mapped to the
// token's name and scope, a CSRF token, an expiry, and a one-shot message
// for the next page.
type session struct {
	id      string
	who     Principal
	csrf    string
	expires time.Time
	flash   string
}

// errTooManySessions is create's answer when the store is full of other
// tokens' sessions.
var errTooManySessions = errors.New("the dashboard holds its maximum of sessions")

// sessions is the in-memory session store: sessions end when the process
// does (everyone logs in again), at their expiry, or at logout. Each token
// holds at most perToken sessions and all of them at most max; a login
// never ends another token's session (issue 18: with one global cap, any
// token holder could log everyone else out by logging in often enough).
type sessions struct {
	ttl      time.Duration
	max      int
	perToken int
	now      func() time.Time

	mu      sync.Mutex
	byID    map[string]*session
	byToken map[string]map[string]*session // token name -> id -> session
}

func newSessions(ttl time.Duration, max, perToken int) *sessions {
	return &sessions{ttl: ttl, max: max, perToken: perToken, now: time.Now,
		byID: map[string]*session{}, byToken: map[string]map[string]*session{}}
}

// random returns 32 random bytes in base64url.
func random() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand: " + err.Error()) // never fails on a supported platform (Go 1.24+ crashes first)
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// create starts a session for who. When who's token holds its maximum of
// sessions, its own session closest to expiry ends. When the store is full,
// expired sessions go, then who's oldest one; if who has none, the login
// is refused (errTooManySessions): another token's session never ends for
// it.
func (s *sessions) create(who Principal) (*session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if len(s.byToken[who.Name]) >= s.perToken {
		s.sweep(s.byToken[who.Name], now)
	}
	if len(s.byID) >= s.max {
		s.sweep(s.byID, now)
	}
	mine := s.byToken[who.Name]
	if len(mine) >= s.perToken || (len(s.byID) >= s.max && len(mine) > 0) {
		s.drop(oldest(mine))
	}
	if len(s.byID) >= s.max {
		return nil, errTooManySessions
	}
	x := &session{id: random(), who: who, csrf: random(), expires: now.Add(s.ttl)}
	s.byID[x.id] = x
	if s.byToken[who.Name] == nil {
		s.byToken[who.Name] = map[string]*session{}
	}
	s.byToken[who.Name][x.id] = x
	return x, nil
}

// oldest is the session of m closest to its expiry (nil for none).
func oldest(m map[string]*session) *session {
	var o *session
	for _, x := range m {
		if o == nil || x.expires.Before(o.expires) {
			o = x
		}
	}
	return o
}

// sweep drops the expired sessions of m; s.mu is held.
func (s *sessions) sweep(m map[string]*session, now time.Time) {
	for _, x := range m {
		if !now.Before(x.expires) {
			s.drop(x)
		}
	}
}

// drop forgets x; s.mu is held.
func (s *sessions) drop(x *session) {
	if x == nil {
		return
	}
	delete(s.byID, x.id)
	if m := s.byToken[x.who.Name]; m != nil {
		delete(m, x.id)
		if len(m) == 0 {
			delete(s.byToken, x.who.Name)
		}
	}
}

// get returns the session of r's cookie, if it is known and not expired.
func (s *sessions) get(r *http.Request) (*session, bool) {
	c, err := r.Cookie(cookieName)
	if err != nil || c.Value == "" {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	x, ok := s.byID[c.Value]
	if !ok {
		return nil, false
	}
	if !s.now().Before(x.expires) {
		s.drop(x)
		return nil, false
	}
	return x, true
}

func (s *sessions) remove(x *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drop(x)
}

// setFlash stores a message for the session's next page.
func (s *sessions) setFlash(x *session, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	x.flash = msg
}

// takeFlash returns and clears the session's message.
func (s *sessions) takeFlash(x *session) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := x.flash
	x.flash = ""
	return m
}

// count is the number of sessions held (expired ones included until swept).
func (s *sessions) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID)
}

// validCSRF compares a form's token with the session's in constant time.
func (x *session) validCSRF(token string) bool {
	return token != "" && subtle.ConstantTimeCompare([]byte(token), []byte(x.csrf)) == 1
}

// setCookie sends the session cookie: HttpOnly, SameSite=Strict, Secure
// when the request came over TLS, for the session's lifetime.
func setCookie(w http.ResponseWriter, r *http.Request, x *session) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: x.id, Path: "/", Expires: x.expires,
		MaxAge: int(time.Until(x.expires).Seconds()), HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
}

func clearCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
}
