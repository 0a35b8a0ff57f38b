package ui_test

import (
	"context"
	"fmt"
	"time"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/api/ui"
	"github.com/workq/workq/lease"
)

// The dashboard's sampler with injected sources (here fixed numbers; the
// API passes admin.Depths, admin.EndedBetween and admin.Clock over its
// pool): each round reads the depth and the attempts ended since the
// previous one, and SeriesOf turns the ring buffer into the charts' data.
func ExampleSampler() {
	clock := time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC)
	s, err := ui.NewSampler(ui.SamplerOptions{
		Interval: 10 * time.Second,
		Settle:   -1, // count up to the clock itself
		Clock:    func(context.Context) (time.Time, error) { return clock, nil },
		Depth: func(context.Context) ([]admin.Depth, error) {
			return []admin.Depth{{Table: lease.JobRuns, Queue: "mail", Ready: 120, InProgress: 8}}, nil
		},
		Ended: func(_ context.Context, after, until time.Time) ([]admin.Ended, error) {
			return []admin.Ended{{Table: lease.JobRuns, Queue: "mail", Outcome: "done", Count: 50}}, nil
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
