package authlimit

import (
	"net/http"
	"testing"
	"time"
)

func from(addr string) *http.Request {
	r, _ := http.NewRequest("GET", "http://127.0.0.1/", nil)
	r.RemoteAddr = addr
	return r
}

func TestBudgetPerAddress(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	l := New(Options{Burst: 3, Every: 10 * time.Second, Now: func() time.Time { return now }})
	a := from("192.0.2.1:5000")
	for i := range 3 {
		if w := l.Wait(a); w != 0 {
			t.Fatalf("before failure %d: wait %s", i+1, w)
		}
		if locked := l.Fail(a); locked != (i == 2) {
			t.Fatalf("failure %d: locked %v", i+1, locked)
		}
	}
	if w := l.Wait(a); w != 10*time.Second {
		t.Fatalf("spent: wait %s, want 10s", w)
	}
	if got := RetryAfter(l.Wait(a)); got != "10" {
		t.Fatalf("Retry-After %q", got)
	}
	// Another port of the same host is the same client; another host is not.
	if w := l.Wait(from("192.0.2.1:6000")); w == 0 {
		t.Error("another port of a spent address may try")
	}
	if w := l.Wait(from("192.0.2.2:5000")); w != 0 {
		t.Errorf("another address waits %s", w)
	}
	now = now.Add(4 * time.Second)
	if w := l.Wait(a); w != 6*time.Second {
		t.Fatalf("4s later: wait %s, want 6s", w)
	}
	now = now.Add(6 * time.Second)
	if w := l.Wait(a); w != 0 {
		t.Fatalf("10s later: wait %s", w)
	}
}

func TestKey(t *testing.T) {
	cases := []struct {
		a, b string
		same bool
	}{
		{"[2001:db8:1:2::1]:1", "[2001:db8:1:2:ffff::9]:2", true}, // one /64
		{"[2001:db8:1:2::1]:1", "[2001:db8:1:3::1]:1", false},
		{"[::ffff:192.0.2.1]:1", "192.0.2.1:2", true}, // IPv4-mapped is IPv4
		{"192.0.2.1:1", "192.0.2.2:1", false},
		{"[fe80::1%eth0]:1", "[fe80::2%eth1]:1", true}, // zones do not split a /64
	}
	for _, c := range cases {
		ka, oka := Key(from(c.a))
		kb, okb := Key(from(c.b))
		if !oka || !okb || (ka == kb) != c.same {
			t.Errorf("Key(%s) = %v, Key(%s) = %v: same %v, want %v", c.a, ka, c.b, kb, ka == kb, c.same)
		}
	}
	if _, ok := Key(from("@unix")); ok {
		t.Error("a non-IP peer has a key")
	}
}

func TestBoundedMemory(t *testing.T) {
	now := time.Unix(0, 0)
	l := New(Options{Burst: 2, Every: time.Minute, MaxAddrs: 4, Now: func() time.Time { return now }})
	spend := func(addr string) {
		l.Fail(from(addr))
		l.Fail(from(addr))
	}
	for _, a := range []string{"10.0.0.1:1", "10.0.0.2:1", "10.0.0.3:1", "10.0.0.4:1"} {
		spend(a)
		now = now.Add(time.Second)
	}
	spend("10.0.0.5:1")
	if n := l.Len(); n != 4 {
		t.Fatalf("%d addresses held, want at most 4", n)
	}
	if l.Wait(from("10.0.0.1:1")) != 0 {
		t.Error("the address that failed longest ago is still held, not the newest")
	}
	if l.Wait(from("10.0.0.5:1")) == 0 {
		t.Error("the newest address was not recorded")
	}
	// Refilled addresses go first.
	now = now.Add(10 * time.Minute)
	l.Fail(from("10.0.0.9:1"))
	if n := l.Len(); n != 1 {
		t.Fatalf("%d addresses after the others refilled, want 1", n)
	}
}
