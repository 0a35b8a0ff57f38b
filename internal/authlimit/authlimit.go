// Package authlimit limits failed credentials per client address: the API's
// bad bearer tokens and the dashboard's failed logins share one budget per
// address (a token bucket of golang.org/x/time/rate). While an address's
// budget is spent, every credential it presents is refused without being
// checked, a good one too: if a good token were let through, the refusal of
// the others would tell a guesser which guess was right, and the limit would
// slow nothing.
//
// Addresses are the peer's IP (an IPv6 client counts as its /64, which one
// host usually holds whole); X-Forwarded-For is not trusted. The table of
// addresses is bounded: when it is full, addresses whose budget has refilled
// go first, then the one that failed longest ago.
package authlimit

import (
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Defaults: 10 failures at once, then one every 6 seconds (10 a minute),
// for at most 10,000 addresses at a time.
const (
	DefaultBurst    = 10
	DefaultEvery    = 6 * time.Second
	DefaultMaxAddrs = 10000
)

// Options configure a Limiter; zero values take the defaults.
type Options struct {
	Burst    int              // failures allowed at once
	Every    time.Duration    // one more failure allowed per Every
	MaxAddrs int              // addresses tracked at most
	Now      func() time.Time // nil: time.Now (tests freeze it)
}

// Limiter counts failed credentials per client address. It is safe for
// concurrent use.
type Limiter struct {
	o Options

	mu    sync.Mutex
	addrs map[netip.Prefix]*entry
}

type entry struct {
	lim  *rate.Limiter
	last time.Time // of the last failure
}

// New returns a Limiter.
func New(o Options) *Limiter {
	if o.Burst <= 0 {
		o.Burst = DefaultBurst
	}
	if o.Every <= 0 {
		o.Every = DefaultEvery
	}
	if o.MaxAddrs <= 0 {
		o.MaxAddrs = DefaultMaxAddrs
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Limiter{o: o, addrs: map[netip.Prefix]*entry{}}
}

// Key is the address r's failures count against: the peer's IP, or its /64
// for IPv6. ok is false when RemoteAddr is not an IP (a test recorder, a
// Unix socket): such requests are not limited.
func Key(r *http.Request) (netip.Prefix, bool) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Prefix{}, false
	}
	a = a.Unmap().WithZone("")
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, err := a.Prefix(bits)
	return p, err == nil
}

// Wait returns how long r's address must wait before its credentials are
// checked again: 0 when they may be checked now.
func (l *Limiter) Wait(r *http.Request) time.Duration {
	k, ok := Key(r)
	if !ok {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.addrs[k]
	if e == nil {
		return 0
	}
	tokens := e.lim.TokensAt(l.o.Now())
	if tokens >= 1 {
		return 0
	}
	return time.Duration(math.Ceil((1 - tokens) * float64(l.o.Every)))
}

// Fail records a failed credential of r's address; it returns true when
// that failure spent the address's budget (the caller logs it: once per
// lockout, not once per refused request).
func (l *Limiter) Fail(r *http.Request) (locked bool) {
	k, ok := Key(r)
	if !ok {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.o.Now()
	e := l.addrs[k]
	if e == nil {
		if len(l.addrs) >= l.o.MaxAddrs {
			l.evict(now)
		}
		e = &entry{lim: rate.NewLimiter(rate.Every(l.o.Every), l.o.Burst)}
		l.addrs[k] = e
	}
	e.last = now
	e.lim.AllowN(now, 1)
	return e.lim.TokensAt(now) < 1
}

// evict makes room for one address: it forgets every address whose budget
// has refilled (as good as unknown), and if none has, the one that failed
// longest ago.
func (l *Limiter) evict(now time.Time) {
	var oldest netip.Prefix
	var oldestAt time.Time
	for k, e := range l.addrs {
		if e.lim.TokensAt(now) >= float64(l.o.Burst) {
			delete(l.addrs, k)
			continue
		}
		if oldestAt.IsZero() || e.last.Before(oldestAt) {
			oldest, oldestAt = k, e.last
		}
	}
	if len(l.addrs) >= l.o.MaxAddrs {
		delete(l.addrs, oldest)
	}
}

// SetNow replaces the limiter's clock (tests freeze it). Call it before
// the limiter is in use.
func (l *Limiter) SetNow(now func() time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.o.Now = now
}

// Len is the number of addresses tracked.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.addrs)
}

// RetryAfter is the value of a Retry-After header for a wait: whole
// seconds, at least 1.
func RetryAfter(d time.Duration) string {
	s := int64(math.Ceil(d.Seconds()))
	if s < 1 {
		s = 1
	}
	return strconv.FormatInt(s, 10)
}
