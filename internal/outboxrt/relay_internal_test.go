package outboxrt

import (
	"fmt"
	"slices"
	"testing"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/worker"
	"github.com/workq/workq/outbox"
)

func done(key string) worker.Result {
	return worker.Result{Item: lease.Item{PartitionKey: key}, Applied: true, Status: lease.StatusDone}
}

// The hand-over, claim by claim: while the relay's claims take only the
// next messages of keys it has just completed, after HandOverAfter
// deliveries of a key in a row the next claim passes the key over and
// wakes the queue; the first woken claim after it still passes the key and
// wakes the queue again, the second takes the key back; retries and
// unkeyed messages do not count; a relay whose claims find other keys free
// hands nothing over; a relay with HandOverAfter < 0 never hands over.
func TestClaimOptionsHandOver(t *testing.T) {
	type step struct {
		woken     bool
		prev      []string // the keys the previous claim took
		completed []worker.Result
		pass      []string // want
		wake      bool     // want
	}
	retry := worker.Result{Item: lease.Item{PartitionKey: "a"}, Applied: true, Status: lease.StatusReady}
	for _, tc := range []struct {
		name     string
		handOver int
		steps    []step
	}{
		{"after three in a row", 3, []step{
			{completed: []worker.Result{done("a"), done("b")}},
			{prev: []string{"a", "b"}, completed: []worker.Result{done("a"), retry, done("")}},
			{prev: []string{"a"}, completed: []worker.Result{done("a")}, pass: []string{"a"}, wake: true},
			{completed: []worker.Result{done("b")}, pass: []string{"a"}},
			{woken: true, prev: []string{"b"}, completed: []worker.Result{done("b")}, pass: []string{"a", "b"}, wake: true},
			{pass: []string{"a", "b"}},
			{woken: true, pass: []string{"b"}, wake: true},
			// The count starts again after a hand-over.
			{woken: true, completed: []worker.Result{done("a")}},
			{prev: []string{"a"}, completed: []worker.Result{done("a")}},
			{prev: []string{"a"}, completed: []worker.Result{done("a")}, pass: []string{"a"}, wake: true},
		}},
		{"only while recycling its own keys", 1, []step{
			{completed: []worker.Result{done("a")}},
			{prev: []string{"a", "x"}, completed: []worker.Result{done("a")}},
			{prev: []string{"b"}, completed: []worker.Result{done("a")}},
			{prev: []string{"a"}, completed: []worker.Result{done("a")}, pass: []string{"a"}, wake: true},
		}},
		{"handed over in a woken claim", 2, []step{
			{completed: []worker.Result{done("k")}},
			{woken: true, prev: []string{"k"}, completed: []worker.Result{done("k")}, pass: []string{"k"}, wake: true},
			{woken: true, pass: []string{"k"}, wake: true},
			{pass: []string{"k"}},
			{woken: true},
		}},
		{"several keys at once, in order", 1, []step{
			{completed: []worker.Result{done("x")}},
			{prev: []string{"x"}, completed: []worker.Result{done("z"), done("m")}, pass: []string{"m", "z"}, wake: true},
			{completed: []worker.Result{done("a")}, pass: []string{"a", "m", "z"}, wake: true},
			{woken: true, pass: []string{"a", "m", "z"}, wake: true},
			{woken: true},
		}},
		{"never", -1, []step{
			{completed: []worker.Result{done("a"), done("a"), done("a")}},
			{prev: []string{"a"}, completed: []worker.Result{done("a")}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRelay(outbox.RelayOptions{HandOverAfter: tc.handOver})
			cs := &claimState{queues: map[string]*queueState{}}
			for i, s := range tc.steps {
				got := r.claimOptions(cs, worker.ClaimContext{Queue: "q", Woken: s.woken, Prev: items(s.prev...), Completed: s.completed})
				if !slices.Equal(got.PassKeys, s.pass) || got.Wake != s.wake {
					t.Fatalf("claim %d: PassKeys %v, Wake %v; want %v, %v", i, got.PassKeys, got.Wake, s.pass, s.wake)
				}
			}
		})
	}
	if r := NewRelay(outbox.RelayOptions{}); r.handOver != outbox.DefaultHandOverAfter {
		t.Fatalf("default hand-over after %d, want %d", r.handOver, outbox.DefaultHandOverAfter)
	}
}

// items returns claimed items of the keys.
func items(keys ...string) []lease.Item {
	out := make([]lease.Item, len(keys))
	for i, k := range keys {
		out[i].PartitionKey = k
	}
	return out
}

// A key delivered fewer times than HandOverAfter and then not again is
// forgotten within twice sweepEvery claims: the relay does not keep every
// key it ever saw.
func TestClaimOptionsForgetsIdleKeys(t *testing.T) {
	r := NewRelay(outbox.RelayOptions{HandOverAfter: 5})
	cs := &claimState{queues: map[string]*queueState{}}
	r.claimOptions(cs, worker.ClaimContext{Queue: "q", Completed: []worker.Result{done("once"), done("busy")}})
	for range 2 * sweepEvery {
		r.claimOptions(cs, worker.ClaimContext{Queue: "q", Completed: []worker.Result{done("busy")}, Woken: true})
	}
	runs := cs.queues["q"].runs
	if _, ok := runs["once"]; ok {
		t.Fatalf("key delivered once %d claims ago still remembered: %v", 2*sweepEvery, runs)
	}
	if len(runs) != 1 {
		t.Fatalf("runs %v: want only the busy key's", runs)
	}
}

// The rotation: the next claim starts after the largest key the previous
// one took beyond AfterKey, or, when it wrapped around, after the largest
// it took up to AfterKey.
func TestNextAfter(t *testing.T) {
	for _, tc := range []struct {
		after string
		prev  []lease.Item
		want  string
	}{
		{"", nil, ""},
		{"m", nil, "m"},
		{"m", items("", ""), "m"},
		{"", items("b", "a", ""), "b"},
		{"m", items("n", "x", "p"), "x"},
		{"m", items("x", "b", "a"), "b"},
		{"m", items("m"), "m"},
	} {
		if got := nextAfter(tc.after, tc.prev); got != tc.want {
			t.Errorf("nextAfter(%q, %v) = %q, want %q", tc.after, tc.prev, got, tc.want)
		}
	}
}

// At most maxPassing keys are handed over at a time; a key due for a
// hand-over beyond that waits for room and goes at its next delivery.
func TestClaimOptionsBoundsPassing(t *testing.T) {
	r := NewRelay(outbox.RelayOptions{HandOverAfter: 1})
	cs := &claimState{queues: map[string]*queueState{}}
	var completed []worker.Result
	for i := range maxPassing + 5 {
		completed = append(completed, done(fmt.Sprintf("k%03d", i)))
	}
	r.claimOptions(cs, worker.ClaimContext{Queue: "q", Completed: []worker.Result{done("x")}})
	got := r.claimOptions(cs, worker.ClaimContext{Queue: "q", Prev: items("x"), Completed: completed})
	if len(got.PassKeys) != maxPassing || !got.Wake {
		t.Fatalf("%d keys passed (wake %v); want %d", len(got.PassKeys), got.Wake, maxPassing)
	}
	r.claimOptions(cs, worker.ClaimContext{Queue: "q", Woken: true})
	r.claimOptions(cs, worker.ClaimContext{Queue: "q", Woken: true})
	got = r.claimOptions(cs, worker.ClaimContext{Queue: "q", Completed: completed[maxPassing:]})
	if want := []string{"k064", "k065", "k066", "k067", "k068"}; !slices.Equal(got.PassKeys, want) {
		t.Fatalf("after room was made: passed %v; want %v", got.PassKeys, want)
	}
}
