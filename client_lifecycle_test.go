package workq_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
)

// The Client shares package startstop's lifecycle with the services under
// it: Stops called during the stop, from several goroutines, all wait for
// it (none returns while a handler still drains) and return its result
// (nil); a Stop after it is ErrNotRunning; a Client starts once, even one
// without handlers or maintenance.
func TestClientLifecycle(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		workers bool
		sharded bool
	}{
		{name: "worker and maintenance", workers: true},
		{name: "nothing to run"},
		{name: "sharded", workers: true, sharded: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cfg := workq.Config{FetchPollInterval: 50 * time.Millisecond, DrainTimeout: time.Second}
			cfg.Maintenance.Disabled = !tc.workers
			running := make(chan struct{}, 1)
			var drained atomic.Bool // the handler has returned
			if tc.workers {
				cfg.Workers = workq.NewWorkers()
				workq.AddWorker(cfg.Workers, workq.WorkFunc(func(ctx context.Context, _ *workq.Job[StopArgs]) error {
					running <- struct{}{}
					<-ctx.Done() // cancelled at the end of the 1 s drain
					time.Sleep(100 * time.Millisecond)
					drained.Store(true)
					return ctx.Err()
				}))
			}
			var client *workq.Client
			var err error
			if tc.sharded {
				client, err = workq.NewShardedClient([]workq.Shard{{Name: "a", Pool: testdb.Pool(t)}, {Name: "b", Pool: testdb.Pool(t)}}, cfg)
			} else {
				client, err = workq.NewClient(testdb.Pool(t), cfg)
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := client.Stop(ctx); !errors.Is(err, workq.ErrNotRunning) {
				t.Fatalf("Stop before Start: %v, want ErrNotRunning", err)
			}
			if err := client.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if err := client.Start(ctx); err == nil {
				t.Fatal("second Start succeeded")
			}
			if tc.workers {
				if _, err := client.Enqueue(ctx, StopArgs{}, nil); err != nil {
					t.Fatal(err)
				}
				select {
				case <-running:
				case <-ctx.Done():
					t.Fatal("the handler did not start")
				}
			}
			var wg sync.WaitGroup
			errs := make([]error, 3)
			early := make([]bool, len(errs)) // returned while the handler ran
			for i := range errs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[i] = client.Stop(ctx)
					early[i] = tc.workers && !drained.Load()
				}()
			}
			wg.Wait()
			stopped := 0
			for i, err := range errs {
				switch {
				case early[i]:
					t.Errorf("Stop %d of %d at once returned (%v) while the handler still drained", i+1, len(errs), err)
				case err == nil:
					stopped++
				case !errors.Is(err, workq.ErrNotRunning): // one that came after the stop
					t.Errorf("Stop %d of %d at once: %v, want nil", i+1, len(errs), err)
				}
			}
			if stopped == 0 {
				t.Error("no Stop returned nil")
			}
			if err := client.Stop(ctx); !errors.Is(err, workq.ErrNotRunning) {
				t.Fatalf("Stop after the stop: %v, want ErrNotRunning", err)
			}
			if err := client.Start(ctx); err == nil {
				t.Fatal("Start after Stop succeeded: a Client starts once")
			}
		})
	}
}
