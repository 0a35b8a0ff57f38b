package workq

import (
	"context"
	"log/slog"
	"testing"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/worker"
)

// Without a subscriber (or without one for the event's kind) the runtime's
// events cost no allocation: the observer loads the hub's state and
// returns.
func TestEventsCostNothingWithoutSubscribers(t *testing.T) {
	ev := newClientEvents(slog.New(slog.DiscardHandler))
	o := ev.observer(DefaultShard)
	ctx := context.Background()
	job := &worker.Job{Item: lease.Item{Table: lease.JobRuns, ID: 1, Kind: "k", Queue: "default", Attempt: 1}}
	done := worker.Result{Item: job.Item, Outcome: lease.Done, Status: lease.StatusDone, Applied: true}
	run := func() {
		o.HandlerStart(ctx, job)
		o.Completed(done)
	}
	if n := testing.AllocsPerRun(100, run); n != 0 {
		t.Fatalf("%v allocations per attempt without a subscriber, want 0", n)
	}
	c := &Client{ev: ev}
	ch, unsubscribe := c.Subscribe(EventFailed)
	defer unsubscribe()
	if n := testing.AllocsPerRun(100, run); n != 0 {
		t.Fatalf("%v allocations per attempt with a subscriber to other kinds only, want 0", n)
	}
	if len(ch) != 0 {
		t.Fatalf("the subscriber to EventFailed got %d events", len(ch))
	}
}

func BenchmarkEventsNoSubscriber(b *testing.B) {
	o := newClientEvents(slog.New(slog.DiscardHandler)).observer(DefaultShard)
	r := worker.Result{Item: lease.Item{Table: lease.JobRuns, ID: 1}, Outcome: lease.Done, Status: lease.StatusDone, Applied: true}
	for b.Loop() {
		o.Completed(r)
	}
}
