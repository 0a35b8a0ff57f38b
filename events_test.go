package workq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/inbox"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/timers"
)

// outcomeKinds are the events that end an attempt: every kind but
// EventStarted.
var outcomeKinds = []workq.EventKind{workq.EventCompleted, workq.EventRetried, workq.EventFailed, workq.EventSnoozed,
	workq.EventCancelled, workq.EventReleased, workq.EventLeaseLost}

// eventArgs is a job that fails permanently when Fail is set.
type eventArgs struct {
	Fail bool `json:"fail"`
}

func (eventArgs) Kind() string { return "events.job" }

func workEvent(_ context.Context, job *workq.Job[eventArgs]) error {
	if job.Args.Fail {
		return workq.Permanent(errors.New("events: told to fail"))
	}
	return nil
}

// readEvents returns the next n events of ch (the test fails after 30s,
// or if ch closes first).
func readEvents(t *testing.T, ch <-chan *workq.Event, n int) []*workq.Event {
	t.Helper()
	deadline := time.After(30 * time.Second)
	var out []*workq.Event
	for len(out) < n {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("the events channel closed after %d events, want %d", len(out), n)
			}
			out = append(out, ev)
		case <-deadline:
			t.Fatalf("%d events after 30s, want %d: %v", len(out), n, eventNames(out))
		}
	}
	return out
}

// drainClosed reads ch until it is closed (the test fails after 30s) and
// returns what it read.
func drainClosed(t *testing.T, ch <-chan *workq.Event) []*workq.Event {
	t.Helper()
	deadline := time.After(30 * time.Second)
	var out []*workq.Event
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return out
			}
			out = append(out, ev)
		case <-deadline:
			t.Fatal("the events channel was not closed within 30s")
		}
	}
}

// eventName is an event's kind and item, for messages and comparisons.
func eventName(ev *workq.Event) string {
	what := ev.Work.Kind + ev.Work.Topic
	return fmt.Sprintf("%s %s %s", ev.Kind, ev.Work.Table, what)
}

func eventNames(evs []*workq.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = eventName(ev)
	}
	return out
}

// Subscribe reports the attempts of every kind of work, filtered by
// kind: each subscription gets the kinds it asked for and no other, with
// the item, the attempt and the handler's error; Stop closes every
// subscription's channel.
func TestSubscribeEveryKindOfWork(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(workEvent))
	ok := func(context.Context, *workq.Message[map[string]any]) error { return nil }
	for _, err := range []error{workq.HandleOutbox(workers, "ev.out", ok), workq.HandleInbox(workers, "ev.in", ok),
		workq.HandleTimer(workers, "ev.timer", ok)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	client, err := workq.NewClient(pool, workq.Config{Workers: workers, Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	runs, _ := client.Subscribe(workq.EventStarted, workq.EventCompleted)
	failures, _ := client.Subscribe(workq.EventFailed)
	all, stopAll := client.Subscribe()

	good, err := client.Enqueue(ctx, eventArgs{}, &workq.EnqueueOpts{Queue: "default"})
	if err != nil {
		t.Fatal(err)
	}
	bad, err := client.Enqueue(ctx, eventArgs{Fail: true}, &workq.EnqueueOpts{MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Send(ctx, outbox.Message{Topic: "ev.out", PartitionKey: "k", Payload: map[string]int{"n": 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Receive(ctx, inbox.Message{Source: "psp", MessageID: "m1", Topic: "ev.in", Payload: map[string]int{"n": 2}}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.ScheduleTimer(ctx, timers.Timer{Topic: "ev.timer", DueTime: time.Now(), Payload: map[string]int{"n": 3}}); err != nil {
		t.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}

	// Five started, four completed (the bad job failed).
	got := map[string]int{}
	for _, ev := range readEvents(t, runs, 9) {
		got[eventName(ev)]++
		if ev.Work.Shard != workq.DefaultShard || ev.Work.Attempt != 1 || ev.Work.Queue != "default" || ev.Work.ID == 0 {
			t.Errorf("event %+v: want attempt 1 of an item of queue default on shard default", ev)
		}
		if ev.Kind == workq.EventCompleted && (ev.Started.IsZero() || ev.Finished.Before(ev.Started) || ev.Duration != ev.Finished.Sub(ev.Started)) {
			t.Errorf("completed event %+v: want the handler's start, end and duration", ev)
		}
		if ev.Kind == workq.EventCompleted && ev.Work.Table == "job_runs" && ev.Work.ID != good.ID {
			t.Errorf("completed job %+v: want job %d", ev, good.ID)
		}
		if ev.Kind == workq.EventCompleted && ev.Work.Table == "inbox" && ev.Work.Source != "psp" {
			t.Errorf("inbox event %+v: want source psp", ev)
		}
	}
	want := map[string]int{
		"started job_runs events.job": 2, "completed job_runs events.job": 1,
		"started outbox ev.out": 1, "completed outbox ev.out": 1,
		"started inbox ev.in": 1, "completed inbox ev.in": 1,
		"started timers ev.timer": 1, "completed timers ev.timer": 1,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events %v, want %v", got, want)
	}
	f := readEvents(t, failures, 1)[0]
	if f.Kind != workq.EventFailed || f.Work.ID != bad.ID || f.Work.Kind != "events.job" || f.Work.MaxAttempts != 3 ||
		!strings.Contains(f.Error, "told to fail") {
		t.Errorf("failed event %+v: want job %d, its max attempts and error", f, bad.ID)
	}
	if evs := readEvents(t, all, 10); len(evs) != 10 {
		t.Errorf("the subscription to every kind got %v", eventNames(evs))
	}
	stopAll()
	stopAll() // a second call changes nothing
	if rest := drainClosed(t, all); len(rest) != 0 {
		t.Errorf("events after the 10: %v", eventNames(rest))
	}

	if err := client.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for name, ch := range map[string]<-chan *workq.Event{"started and completed": runs, "failed": failures} {
		if rest := drainClosed(t, ch); len(rest) != 0 {
			t.Errorf("%s: events it did not ask for or more than happened: %v", name, eventNames(rest))
		}
	}
}

// A subscriber that does not read loses events, and never slows the
// work: every job completes, the drops are counted, and its channel
// still holds what fitted.
func TestSubscribeFullChannelDropsAndNeverBlocks(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(workEvent))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers, Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	params := make([]workq.EnqueueParams, n)
	for i := range params {
		params[i] = workq.EnqueueParams{Args: eventArgs{}}
	}
	if _, err := client.EnqueueMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	ch, unsubscribe := client.SubscribeConfig(workq.SubscribeConfig{Kinds: []workq.EventKind{workq.EventStarted, workq.EventCompleted}, ChanSize: 1})
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer client.Stop(ctx)
	deadline := time.Now().Add(60 * time.Second)
	for client.Stats().Done < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs done after 60s: a full subscriber must not hold the work up", client.Stats().Done, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// 2n events were sent (each published before its job counts as
	// done); one fitted.
	if d := client.EventsDropped(); d < 2*n-1 {
		t.Errorf("EventsDropped %d, want at least %d", d, 2*n-1)
	}
	unsubscribe()
	if evs := drainClosed(t, ch); len(evs) != 1 || evs[0].Kind != workq.EventStarted {
		t.Errorf("the full channel held %v, want the first started event", eventNames(evs))
	}
}

// A sharded Client's subscription gets the events of every shard, each
// naming its shard; a shard's own subscription gets that shard's.
func TestSubscribeSharded(t *testing.T) {
	ctx := context.Background()
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(context.Context, *workq.Job[ShardArgs]) error { return nil }))
	client, err := workq.NewShardedClient([]workq.Shard{{Name: "a", Pool: testdb.Pool(t)}, {Name: "b", Pool: testdb.Pool(t)}},
		workq.Config{Workers: workers, FetchPollInterval: 50 * time.Millisecond, Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	all, _ := client.Subscribe(workq.EventCompleted)
	sb, err := client.Shard("b")
	if err != nil {
		t.Fatal(err)
	}
	onlyB, _ := sb.Subscribe(workq.EventCompleted)
	shardWork(t, client, "a", 3)
	shardWork(t, client, "b", 2)
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	perShard := map[string]int{}
	for _, ev := range readEvents(t, all, 5) {
		perShard[ev.Work.Shard]++
	}
	if perShard["a"] != 3 || perShard["b"] != 2 {
		t.Errorf("completed per shard %v, want a:3 b:2", perShard)
	}
	for _, ev := range readEvents(t, onlyB, 2) {
		if ev.Work.Shard != "b" {
			t.Errorf("shard b's subscription got %+v", ev)
		}
	}
	if err := client.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if rest := drainClosed(t, all); len(rest) != 0 {
		t.Errorf("more events than jobs: %v", eventNames(rest))
	}
	if rest := drainClosed(t, onlyB); len(rest) != 0 {
		t.Errorf("shard b: more events than its jobs: %v", eventNames(rest))
	}
}

// Subscribe refuses a kind that is not an EventKind (a typo would never
// deliver).
func TestSubscribeUnknownEventKindPanics(t *testing.T) {
	client, err := workq.NewClient(testdb.SharedPool(t), workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), `"complete"`) {
			t.Fatalf("Subscribe(\"complete\") recovered %v, want a panic naming it", r)
		}
	}()
	client.Subscribe(workq.EventKind("complete"))
}
