package ui_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/ui"
)

// The dashboard's sampler with injected sources (here fixed numbers; the
// API passes its Client: SamplerOptions.Client, whose QueueDepths,
// EndedBetween and DatabaseTime it reads): each round reads the depth and the attempts ended since the
// previous one, and SeriesOf turns the ring buffer into the charts' data.
func ExampleSampler() {
	clock := time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC)
	s, err := ui.NewSampler(ui.SamplerOptions{
		Interval: 10 * time.Second,
		Settle:   -1, // count up to the clock itself
		Clock:    func(context.Context) (time.Time, error) { return clock, nil },
		Depth: func(context.Context) ([]workq.QueueDepth, error) {
			return []workq.QueueDepth{{Table: workq.TableJobRuns, Queue: "mail", Ready: 120, InProgress: 8}}, nil
		},
		Ended: func(_ context.Context, after, until time.Time) ([]workq.EndedCount, error) {
			return []workq.EndedCount{{Table: workq.TableJobRuns, Queue: "mail", Outcome: "done", Count: 50}}, nil
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	for range 3 {
		if err := s.SampleOnce(ctx); err != nil {
			fmt.Println(err)
			return
		}
		clock = clock.Add(10 * time.Second)
	}
	samples, _ := s.Samples()
	series := ui.SeriesOf(samples, s.Interval(), func(k ui.QueueKey) bool { return k.Queue == "mail" })
	fmt.Println("ready:", series.Ready)
	fmt.Println("done per second:", series.Rates["done"]) // the first sample has no interval before it
	// Output:
	// ready: [120 120 120]
	// done per second: [0 5 5]
}

// A sharded sampler (what api.New builds of a sharded Client): every
// shard is read at once, each bounded by ShardTimeout, and each sample is
// their sum; a shard that fails is left out and ShardStates says so.
func ExampleSampler_shards() {
	clock := time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC)
	shard := func(name string, ready int64, err error) ui.SampleSource {
		return ui.SampleSource{Name: name,
			Clock: func(context.Context) (time.Time, error) { return clock, err },
			Depth: func(context.Context) ([]workq.QueueDepth, error) {
				return []workq.QueueDepth{{Table: workq.TableJobRuns, Queue: "mail", Ready: ready}}, nil
			},
			Ended: func(context.Context, time.Time, time.Time) ([]workq.EndedCount, error) { return nil, nil },
		}
	}
	s, err := ui.NewSampler(ui.SamplerOptions{
		Shards: []ui.SampleSource{shard("eu", 120, nil), shard("us", 80, nil), shard("ap", 40, errors.New("connection refused"))},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := s.SampleOnce(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	smp, _ := s.Latest()
	fmt.Println("ready:", smp.Queues[ui.QueueKey{Table: workq.TableJobRuns, Queue: "mail"}].Ready)
	for _, st := range s.ShardStates() {
		fmt.Println(st.Name, st.Ready, st.Err)
	}
	// Output:
	// ready: 200
	// eu 120 <nil>
	// us 80 <nil>
	// ap 0 connection refused
}
