package workq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
)

// outcomeArgs tell outcomeWorker what to return on each run.
type outcomeArgs struct {
	Results []string `json:"results"` // per run: "nil", "error", "permanent", "snooze", "cancel"
}

func (outcomeArgs) Kind() string { return "onresult.outcome" }

// outcomeWorker returns what its job's args say for the job's nth run (a
// snooze runs the same attempt again).
type outcomeWorker struct {
	mu   sync.Mutex
	runs map[int64]int
}

func (w *outcomeWorker) Work(_ context.Context, job *workq.Job[outcomeArgs]) error {
	w.mu.Lock()
	if w.runs == nil {
		w.runs = map[int64]int{}
	}
	w.runs[job.ID]++
	n := w.runs[job.ID]
	w.mu.Unlock()
	switch job.Args.Results[min(n, len(job.Args.Results))-1] {
	case "error":
		return errors.New("flaky")
	case "permanent":
		return workq.Permanent(errors.New("bad input"))
	case "snooze":
		return workq.Snooze(10 * time.Millisecond)
	case "cancel":
		return fmt.Errorf("giving up: %w", workq.ErrCancelled)
	}
	return nil
}

// resultLog collects the attempt outcomes a Client's events report, per
// item.
type resultLog struct {
	mu  sync.Mutex
	got map[int64][]*workq.Event
}

// subscribe collects client's outcome events until its Stop closes the
// channel.
func (l *resultLog) subscribe(client *workq.Client) {
	events, _ := client.Subscribe(outcomeKinds...)
	go func() {
		for ev := range events {
			l.mu.Lock()
			if l.got == nil {
				l.got = map[int64][]*workq.Event{}
			}
			l.got[ev.Work.ID] = append(l.got[ev.Work.ID], ev)
			l.mu.Unlock()
		}
	}()
}

// outcomeOf is the runs.outcome of an attempt outcome's EventKind.
var outcomeOf = map[workq.EventKind]lease.Outcome{workq.EventCompleted: lease.Done, workq.EventRetried: lease.Retry,
	workq.EventFailed: lease.Failed, workq.EventSnoozed: lease.Snoozed, workq.EventCancelled: lease.Cancelled,
	workq.EventReleased: lease.Released}

// wait returns the events of id once it has n of them (the test fails
// after 30s).
func (l *resultLog) wait(t *testing.T, id int64, n int) []*workq.Event {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		l.mu.Lock()
		rs := append([]*workq.Event(nil), l.got[id]...)
		l.mu.Unlock()
		if len(rs) >= n {
			return rs
		}
		if time.Now().After(deadline) {
			t.Fatalf("item %d: %d results after 30s, want %d", id, len(rs), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fastRetries is a worker configuration whose retries come within
// milliseconds, so a test sees a job through all of its attempts.
func fastRetries(cfg workq.Config) workq.Config {
	cfg.BackoffBase, cfg.BackoffCap, cfg.FetchPollInterval = time.Millisecond, 5*time.Millisecond, 20*time.Millisecond
	return cfg
}

// TestEventOutcome: the event of an attempt (Subscribe) says what the
// attempt did, as runs.outcome records it: an error on the last attempt
// is EventFailed (it ended the job failed), not EventRetried (docs/go.md
// names the events).
func TestEventOutcome(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	var log resultLog
	workers := workq.NewWorkers()
	workq.AddWorker[outcomeArgs](workers, &outcomeWorker{})
	client, err := workq.NewClient(pool, fastRetries(workq.Config{Workers: workers,
		Maintenance: workq.MaintenanceConfig{Disabled: true}}))
	if err != nil {
		t.Fatal(err)
	}
	log.subscribe(client)
	cases := []struct {
		name        string
		results     []string
		maxAttempts int
		want        []lease.Outcome
		status      lease.Status
	}{
		{"nil is done", []string{"nil"}, 2, []lease.Outcome{lease.Done}, lease.StatusDone},
		{"an error with attempts left is retry", []string{"error", "nil"}, 2, []lease.Outcome{lease.Retry, lease.Done}, lease.StatusDone},
		{"an error on the last attempt is failed", []string{"error", "error"}, 2, []lease.Outcome{lease.Retry, lease.Failed}, lease.StatusFailed},
		{"an error on the only attempt is failed", []string{"error"}, 1, []lease.Outcome{lease.Failed}, lease.StatusFailed},
		{"Permanent is failed", []string{"permanent"}, 3, []lease.Outcome{lease.Failed}, lease.StatusFailed},
		{"Snooze is snoozed, even on the last attempt", []string{"snooze", "nil"}, 1, []lease.Outcome{lease.Snoozed, lease.Done}, lease.StatusDone},
		{"ErrCancelled is cancelled", []string{"cancel"}, 3, []lease.Outcome{lease.Cancelled}, lease.StatusCancelled},
	}
	ids := make([]int64, len(cases))
	for i, c := range cases {
		res, err := client.Enqueue(ctx, outcomeArgs{Results: c.results}, &workq.EnqueueOpts{MaxAttempts: c.maxAttempts})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = res.ID
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer client.Stop(ctx)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rs := log.wait(t, ids[i], len(c.want))
			var got []lease.Outcome
			for _, r := range rs {
				got = append(got, outcomeOf[r.Kind])
				if r.Work.Table != "job_runs" || r.Work.Kind != "onresult.outcome" || r.Work.Shard != workq.DefaultShard ||
					r.Work.MaxAttempts != c.maxAttempts || r.Started.IsZero() || r.Duration < 0 || r.Finished.Before(r.Started) {
					t.Errorf("event %+v", r)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("event outcomes %v, want %v", got, c.want)
			}
			it, err := admin.Get(ctx, pool, lease.JobRuns, ids[i])
			if err != nil {
				t.Fatal(err)
			}
			if it.Status != c.status.String() {
				t.Fatalf("status %s, want %s", it.Status, c.status)
			}
			atts, err := admin.Attempts(ctx, pool, lease.JobRuns, ids[i])
			if err != nil {
				t.Fatal(err)
			}
			var runs []lease.Outcome
			for _, a := range atts {
				runs = append(runs, lease.Outcome(a.Outcome))
			}
			if fmt.Sprint(runs) != fmt.Sprint(got) {
				t.Fatalf("runs.outcome %v, events %v: they should agree", runs, got)
			}
		})
	}
}

// TestClaimedJobWithoutHandler checks docs/go.md: a job of a kind no
// handler is registered for, in a queue the Client works, is claimed and
// retried with an error naming the kind until its attempts are used up,
// then failed; the work middleware never sees it.
func TestClaimedJobWithoutHandler(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	var log resultLog
	var mu sync.Mutex
	var seen []string
	workers := workq.NewWorkers()
	workq.AddWorker[outcomeArgs](workers, &outcomeWorker{})
	client, err := workq.NewClient(pool, fastRetries(workq.Config{Workers: workers,
		Maintenance: workq.MaintenanceConfig{Disabled: true}, SkipUnknownKindCheck: true,
		WorkMiddleware: []workq.WorkMiddleware{func(ctx context.Context, info workq.WorkInfo, next func(context.Context) error) error {
			mu.Lock()
			seen = append(seen, info.Kind)
			mu.Unlock()
			return next(ctx)
		}}}))
	if err != nil {
		t.Fatal(err)
	}
	log.subscribe(client)
	res, err := client.Enqueue(ctx, workq.RawArgs{KindName: "nobody.handles.this"}, &workq.EnqueueOpts{MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer client.Stop(ctx)
	rs := log.wait(t, res.ID, 3)
	var got []lease.Outcome
	for _, r := range rs {
		got = append(got, outcomeOf[r.Kind])
		if !strings.Contains(r.Error, `no handler registered for kind "nobody.handles.this"`) {
			t.Errorf("attempt error %q does not name the kind", r.Error)
		}
	}
	if want := []lease.Outcome{lease.Retry, lease.Retry, lease.Failed}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("outcomes %v, want %v", got, want)
	}
	it, err := admin.Get(ctx, pool, lease.JobRuns, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	if it.Status != "failed" || it.Attempts != 3 || !strings.Contains(it.LastError, "nobody.handles.this") {
		t.Fatalf("job %s after %d attempts, last error %q; want failed after 3, naming the kind", it.Status, it.Attempts, it.LastError)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 0 {
		t.Fatalf("the work middleware saw %v; it runs only around handlers", seen)
	}
}
