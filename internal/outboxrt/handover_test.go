package outboxrt_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workq/workq/internal/outboxrt"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/worker"
	"github.com/workq/workq/outbox"
)

// Two relay workers on a queue of 10 busy partition keys share them: the
// first one holds every key by the time the second starts (it claims a
// key's next message as soon as it completes the previous one), and the
// hand-over (RelayOptions.HandOverAfter) gives the second one a fair part
// of what is delivered after it starts. Each key is still delivered in
// order, one message at a time (the database's invariant).
func TestRelaysShareKeys(t *testing.T) {
	pool := testdb.PoolWith(t, 40)
	ctx := context.Background()
	const keys, perKey = 10, 300
	var msgs []outbox.Message
	for i := range keys * perKey {
		msgs = append(msgs, outbox.Message{Queue: "share", Topic: "t", PartitionKey: fmt.Sprintf("k%02d", i%keys)})
	}
	sent, err := outboxrt.NewClient(outboxrt.ClientOptions{}).SendMany(ctx, pool, msgs)
	if err != nil {
		t.Fatal(err)
	}

	var (
		total    atomic.Int64 // deliveries so far
		sinceB   atomic.Int64 // the total when the second worker started (-1: not yet)
		mu       sync.Mutex
		byWorker = map[string]int{} // deliveries after the second worker started
		byKey    = map[string][]int64{}
	)
	sinceB.Store(-1)
	handler := func(name string) worker.HandlerFunc {
		return func(ctx context.Context, j *worker.Job) error {
			n := total.Add(1)
			mu.Lock()
			defer mu.Unlock()
			if b := sinceB.Load(); b >= 0 && n > b {
				byWorker[name]++
			}
			byKey[j.PartitionKey] = append(byKey[j.PartitionKey], j.ID)
			return nil
		}
	}
	start := func(name string) {
		relay := outboxrt.NewRelay(outbox.RelayOptions{})
		relay.HandleDefault(handler(name))
		cfg := testConfig()
		cfg.Concurrency = 16 // room for every key in one worker
		// The default poll: a worker with nothing to do claims once a second
		// unless a notification wakes it (testConfig's 20ms poll would let
		// the second worker find keys free between another's completion and
		// its next claim).
		cfg.Poll = time.Second
		w, err := worker.New(pool, cfg.Worker(), worker.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.AddSource(relay.Source("share")); err != nil {
			t.Fatal(err)
		}
		if err := w.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := w.Stop(context.Background()); err != nil {
				t.Errorf("stop %s: %v", name, err)
			}
		})
	}
	start("first")
	waitFor(t, "the first worker to deliver some of every key", func() bool { return total.Load() >= 3*keys })
	sinceB.Store(total.Load())
	start("second")
	waitFor(t, "every message", func() bool { return total.Load() == keys*perKey })

	mu.Lock()
	defer mu.Unlock()
	after := keys*perKey - int(sinceB.Load())
	t.Logf("after the second worker started: %d messages, first %d, second %d", after, byWorker["first"], byWorker["second"])
	for _, name := range []string{"first", "second"} {
		// An even split, with a wide tolerance: which worker claims a
		// handed-over key first is up to the scheduler (16 runs: the
		// second's share from 31% to 63%); before the hand-over it was 0.
		if got := byWorker[name]; got < after/5 {
			t.Errorf("the %s worker delivered %d of the %d messages after the second started; want at least a fifth", name, got, after)
		}
	}
	want := map[string][]int64{}
	for i, s := range sent {
		k := msgs[i].PartitionKey
		want[k] = append(want[k], s.ID)
	}
	for k, w := range want {
		if !slices.Equal(byKey[k], w) {
			t.Errorf("key %s delivered %v; want %v", k, byKey[k], w)
		}
	}
}
