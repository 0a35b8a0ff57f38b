package outbox

import (
	"slices"
	"testing"

	"github.com/workq/workq/lease"
	"github.com/workq/workq/worker"
)

func done(key string) worker.Result {
	return worker.Result{Item: lease.Item{PartitionKey: key}, Applied: true, Status: lease.StatusDone}
}

// The hand-over, claim by claim: after HandOverAfter deliveries of a key in
// a row the next claim passes the key over and wakes the queue; claims stay
// passing it until one that was woken (after the one that handed over);
// retries and unkeyed messages do not count; a relay with HandOverAfter < 0
// never hands over.
func TestClaimOptionsHandOver(t *testing.T) {
	type step struct {
		woken     bool
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
			{completed: []worker.Result{done("a"), retry, done("")}},
			{completed: []worker.Result{done("a")}, pass: []string{"a"}, wake: true},
			{completed: []worker.Result{done("b")}, pass: []string{"a"}},
			{woken: true, completed: []worker.Result{done("b")}, pass: []string{"b"}, wake: true},
			{pass: []string{"b"}},
			{woken: true},
			// The count starts again after a hand-over.
			{completed: []worker.Result{done("a"), done("a")}},
			{completed: []worker.Result{done("a")}, pass: []string{"a"}, wake: true},
		}},
		{"handed over in a woken claim", 2, []step{
			{woken: true, completed: []worker.Result{done("k"), done("k")}, pass: []string{"k"}, wake: true},
			{woken: true},
		}},
		{"several keys at once, in order", 1, []step{
			{completed: []worker.Result{done("z"), done("m")}, pass: []string{"m", "z"}, wake: true},
			{completed: []worker.Result{done("a")}, pass: []string{"a", "m", "z"}, wake: true},
			{woken: true},
		}},
		{"never", -1, []step{
			{completed: []worker.Result{done("a"), done("a"), done("a")}},
			{completed: []worker.Result{done("a")}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRelay(RelayOptions{HandOverAfter: tc.handOver})
			cs := &claimState{queues: map[string]*queueState{}}
			for i, s := range tc.steps {
				got := r.claimOptions(cs, worker.ClaimContext{Queue: "q", Woken: s.woken, Completed: s.completed})
				if !slices.Equal(got.PassKeys, s.pass) || got.Wake != s.wake {
					t.Fatalf("claim %d: PassKeys %v, Wake %v; want %v, %v", i, got.PassKeys, got.Wake, s.pass, s.wake)
				}
			}
		})
	}
	if r := NewRelay(RelayOptions{}); r.handOver != DefaultHandOverAfter {
		t.Fatalf("default hand-over after %d, want %d", r.handOver, DefaultHandOverAfter)
	}
}

// A key delivered fewer times than HandOverAfter and then not again is
// forgotten within twice sweepEvery claims: the relay does not keep every
// key it ever saw.
func TestClaimOptionsForgetsIdleKeys(t *testing.T) {
	r := NewRelay(RelayOptions{HandOverAfter: 5})
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
	items := func(keys ...string) []lease.Item {
		out := make([]lease.Item, len(keys))
		for i, k := range keys {
			out[i].PartitionKey = k
		}
		return out
	}
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
