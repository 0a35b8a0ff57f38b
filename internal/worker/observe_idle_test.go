package worker

import (
	"sync/atomic"
	"testing"
)

// idleObserver is an Observer whose idleness a test switches.
type idleObserver struct {
	NopObserver
	idle atomic.Bool
}

func (o *idleObserver) Idle() bool { return o.idle.Load() }

func TestObservingSkipsIdleObservers(t *testing.T) {
	plain := NopObserver{}
	a, b := &idleObserver{}, &idleObserver{}
	cases := []struct {
		name    string
		obs     Observer
		idle    [2]bool // a's and b's
		present bool
	}{
		{"none", nil, [2]bool{}, false},
		{"plain observer is never idle", plain, [2]bool{}, true},
		{"idler busy", a, [2]bool{false, false}, true},
		{"idler idle", a, [2]bool{true, false}, false},
		{"all idle", Observers(a, b), [2]bool{true, true}, false},
		{"one busy", Observers(a, b), [2]bool{true, false}, true},
		{"idle with a plain one", Observers(a, plain), [2]bool{true, true}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a.idle.Store(tc.idle[0])
			b.idle.Store(tc.idle[1])
			got := newObserving(tc.obs).get()
			if (got != nil) != tc.present {
				t.Fatalf("get() = %v, want present=%v", got, tc.present)
			}
		})
	}
	// Idleness is read at each get, not fixed at construction.
	r := newObserving(a)
	a.idle.Store(true)
	if r.get() != nil {
		t.Fatal("idle observer returned")
	}
	a.idle.Store(false)
	if r.get() == nil {
		t.Fatal("observer that became busy not returned")
	}
}
