package ui

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"sync"
	"time"
)

// Defaults of the session store.
const (
	DefaultSessionTTL  = 12 * time.Hour
	DefaultMaxSessions = 10000
	cookieName         = "workq_session"
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

// sessions is the in-memory session store: sessions end when the process
// does (everyone logs in again), at their expiry, or at logout.
type sessions struct {
	ttl time.Duration
	max int
	now func() time.Time

	mu   sync.Mutex
	byID map[string]*session
}

func newSessions(ttl time.Duration, max int) *sessions {
	return &sessions{ttl: ttl, max: max, now: time.Now, byID: map[string]*session{}}
}

// random returns 32 random bytes in base64url.
func random() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand: " + err.Error()) // never fails on a supported platform (Go 1.24+ crashes first)
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// create starts a session for who. At the cap it drops expired sessions,
// then the one closest to its expiry.
func (s *sessions) create(who Principal) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if len(s.byID) >= s.max {
		var oldest *session
		for id, x := range s.byID {
			if !now.Before(x.expires) {
				delete(s.byID, id)
			} else if oldest == nil || x.expires.Before(oldest.expires) {
				oldest = x
			}
		}
		if len(s.byID) >= s.max && oldest != nil {
			delete(s.byID, oldest.id)
		}
	}
	x := &session{id: random(), who: who, csrf: random(), expires: now.Add(s.ttl)}
	s.byID[x.id] = x
	return x
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
		delete(s.byID, x.id)
		return nil, false
	}
	return x, true
}

func (s *sessions) remove(x *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, x.id)
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
