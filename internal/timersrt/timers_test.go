package timersrt_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/workq/workq/internal/timersrt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/config"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/worker"
	"github.com/workq/workq/timers"
	"github.com/workq/workq/workqtype"
)

func countTimers(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), "select count(*) from workq.timers").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func claim(t *testing.T, pool *pgxpool.Pool, queue string) []lease.Item {
	t.Helper()
	c, err := lease.New(pool, lease.Timers).Claim(context.Background(), lease.ClaimParams{Queue: queue, Max: 10, Lease: time.Minute, WorkerID: "test"})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return c.Items
}

func TestScheduleRejectsBadInputAndWritesNothing(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	c := timersrt.NewClient(timersrt.ClientOptions{MaxPayloadBytes: 64})
	ok := timers.Timer{Topic: "t", Delay: time.Second}
	cases := []struct {
		name string
		mod  func(*timers.Timer)
		want string
	}{
		{"no topic", func(x *timers.Timer) { x.Topic = "" }, "topic"},
		{"topic with control character", func(x *timers.Timer) { x.Topic = "a\nb" }, "topic"},
		{"topic with a C1 control character", func(x *timers.Timer) { x.Topic = "a\u0085b" }, "topic"},
		{"topic too long", func(x *timers.Timer) { x.Topic = strings.Repeat("t", 257) }, "topic"},
		{"bad queue", func(x *timers.Timer) { x.Queue = "no spaces" }, "queue"},
		{"no time", func(x *timers.Timer) { x.Delay = 0 }, "set DueTime or Delay"},
		{"both times", func(x *timers.Timer) { x.DueTime = time.Now() }, "not both"},
		{"negative delay", func(x *timers.Timer) { x.Delay = -time.Second }, "negative"},
		{"array payload", func(x *timers.Timer) { x.Payload = json.RawMessage(`[1]`) }, "JSON object"},
		{"invalid JSON", func(x *timers.Timer) { x.Payload = []byte(`{`) }, "not valid JSON"},
		{"payload over the limit", func(x *timers.Timer) { x.Payload = map[string]string{"k": strings.Repeat("x", 100)} }, "limit"},
		{"max attempts", func(x *timers.Timer) { x.MaxAttempts = 1001 }, "max attempts"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bad := ok
			tc.mod(&bad)
			_, err := c.Schedule(ctx, pool, bad)
			if !errors.Is(err, workqtype.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Schedule: %v, want ErrInvalid mentioning %q", err, tc.want)
			}
			if err := c.Validate(bad); !errors.Is(err, workqtype.ErrInvalid) {
				t.Fatalf("Validate: %v, want workqtype.ErrInvalid", err)
			}
			// One bad timer among good ones: the batch writes nothing.
			_, err = c.ScheduleMany(ctx, pool, []timers.Timer{ok, ok, bad, ok})
			if !errors.Is(err, workqtype.ErrInvalid) || !strings.Contains(err.Error(), "timer 2") {
				t.Fatalf("ScheduleMany: %v, want ErrInvalid naming timer 2", err)
			}
			if n := countTimers(t, pool); n != 0 {
				t.Fatalf("%d timers written, want none", n)
			}
		})
	}
}

func TestScheduleInRolledBackTransactionLeavesNothing(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	c := timersrt.NewClient(timersrt.ClientOptions{})
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Schedule(ctx, tx, timers.Timer{Topic: "t", DueTime: time.Now().Add(-time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ScheduleMany(ctx, tx, []timers.Timer{{Topic: "t", Delay: time.Millisecond}, {Topic: "u", Delay: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n := countTimers(t, pool); n != 0 {
		t.Fatalf("%d timers after rollback, want none", n)
	}
	if items := claim(t, pool, "default"); len(items) != 0 {
		t.Fatalf("claimed %d timers after rollback", len(items))
	}
	if err := c.Cancel(ctx, pool, s.ID); !errors.Is(err, timers.ErrNotFound) {
		t.Fatalf("cancel of a rolled-back timer: %v, want ErrNotFound", err)
	}
}

// A timer is claimed only once it is due by the database clock. Due times
// are moved with SQL instead of waiting for them.
func TestTimerClaimedOnlyWhenDue(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	c := timersrt.NewClient(timersrt.ClientOptions{})
	future, err := c.Schedule(ctx, pool, timers.Timer{Topic: "later", Delay: time.Hour, Payload: map[string]int{"n": 1}})
	if err != nil {
		t.Fatal(err)
	}
	if future.DueNow {
		t.Fatal("a timer an hour out says it is due now")
	}
	if items := claim(t, pool, "default"); len(items) != 0 {
		t.Fatalf("claimed %d timers before they were due", len(items))
	}
	// The database's clock decided the due time: an hour after now() there.
	var off time.Duration
	if err := pool.QueryRow(ctx, "select extract(epoch from ($1 - now()))::float8 * 1e9", future.DueTime).Scan(&off); err != nil {
		t.Fatal(err)
	}
	if off < 59*time.Minute || off > time.Hour {
		t.Fatalf("due time is %s from the database's now, want just under 1h", off)
	}
	wait, ok, err := timersrt.NextDue(ctx, pool, "default")
	if err != nil || !ok || wait < 59*time.Minute || wait > time.Hour+time.Millisecond {
		t.Fatalf("NextDue = %s, %v, %v; want about 1h", wait, ok, err)
	}
	// Make it due one millisecond ago.
	if _, err := pool.Exec(ctx, "update workq.timers set due_time = now() - interval '1 ms', run_at = now() - interval '1 ms' where id = $1", future.ID); err != nil {
		t.Fatal(err)
	}
	items := claim(t, pool, "default")
	if len(items) != 1 || items[0].ID != future.ID || items[0].Topic != "later" || items[0].DueTime.IsZero() {
		t.Fatalf("claimed %+v, want the now-due timer with its topic and due time", items)
	}

	// A due time in the past is due now.
	past, err := c.Schedule(ctx, pool, timers.Timer{Queue: "p", Topic: "t", DueTime: time.Now().Add(-time.Hour)})
	if err != nil || !past.DueNow {
		t.Fatalf("schedule in the past: %+v, %v; want due now", past, err)
	}
	if items := claim(t, pool, "p"); len(items) != 1 || !items[0].DueTime.Equal(past.DueTime) {
		t.Fatalf("claimed %+v, want the past-due timer with its own due time %s", items, past.DueTime)
	}
	if _, ok, _ := timersrt.NextDue(ctx, pool, "p"); ok {
		t.Fatal("NextDue reports a ready timer in a queue with none")
	}
}

func TestScheduleManyKeepsOrder(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	c := timersrt.NewClient(timersrt.ClientOptions{})
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	var in []timers.Timer
	for i := range 50 {
		x := timers.Timer{Queue: fmt.Sprintf("q%d", i%3), Topic: fmt.Sprintf("t%d", i), Payload: map[string]int{"i": i}}
		if i%2 == 0 {
			x.DueTime = at.Add(time.Duration(i) * time.Second)
		} else {
			x.Delay = time.Duration(i) * time.Minute
		}
		in = append(in, x)
	}
	out, err := c.ScheduleMany(ctx, pool, in)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range out {
		info, err := admin.Get(ctx, pool, lease.Timers, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		var p struct{ I int }
		_ = json.Unmarshal(info.Payload, &p)
		if info.Kind != in[i].Topic || p.I != i || info.Queue != in[i].Queue || !dueTime(info).Equal(s.DueTime) || info.State != timersrt.StateReady {
			t.Fatalf("result %d is timer %+v, want input %d", i, info, i)
		}
		if i%2 == 0 && !s.DueTime.Equal(at.Add(time.Duration(i)*time.Second)) {
			t.Fatalf("timer %d due %s, want %s", i, s.DueTime, at.Add(time.Duration(i)*time.Second))
		}
	}
}

func TestCancelOutcomes(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	c := timersrt.NewClient(timersrt.ClientOptions{})
	e := lease.New(pool, lease.Timers)
	sched := func(queue string, due bool) int64 {
		t.Helper()
		x := timers.Timer{Queue: queue, Topic: "t", Delay: time.Hour}
		if due {
			x = timers.Timer{Queue: queue, Topic: "t", DueTime: time.Now().Add(-time.Second)}
		}
		s, err := c.Schedule(ctx, pool, x)
		if err != nil {
			t.Fatal(err)
		}
		return s.ID
	}
	ready := sched("ready", false)
	claimed := sched("claimed", true)
	done := sched("done", true)
	failed := sched("failed", true)
	for _, q := range []string{"claimed", "done", "failed"} {
		items := claim(t, pool, q)
		if len(items) != 1 {
			t.Fatalf("claim %s: %d items", q, len(items))
		}
		switch q {
		case "done":
			if err := e.Ack(ctx, items[0].OwnerToken, items[0].ID); err != nil {
				t.Fatal(err)
			}
		case "failed":
			if err := e.Fail(ctx, items[0].OwnerToken, items[0].ID, "boom"); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := []struct {
		name  string
		id    int64
		want  error
		state string
	}{
		{"ready", ready, nil, timersrt.StateCancelled},
		{"cancelled again (idempotent)", ready, nil, timersrt.StateCancelled},
		{"claimed", claimed, timers.ErrClaimed, timersrt.StateInProgress},
		{"done", done, timers.ErrFinished, timersrt.StateDone},
		{"failed", failed, timers.ErrFinished, timersrt.StateFailed},
		{"unknown", 987654, timers.ErrNotFound, ""},
	}
	for _, tc := range cases {
		err := c.Cancel(ctx, pool, tc.id)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: Cancel = %v, want %v", tc.name, err, tc.want)
		}
		if tc.state == "" {
			continue
		}
		info, err := admin.Get(ctx, pool, lease.Timers, tc.id)
		if err != nil {
			t.Fatal(err)
		}
		if info.State != tc.state {
			t.Errorf("%s: state %q after cancel, want %q", tc.name, info.State, tc.state)
		}
	}
	// The cancelled timer is never claimed, even once due.
	if _, err := pool.Exec(ctx, "update workq.timers set run_at = now() - interval '1 s' where id = $1", ready); err != nil {
		t.Fatal(err)
	}
	if items := claim(t, pool, "ready"); len(items) != 0 {
		t.Fatalf("claimed a cancelled timer: %+v", items)
	}
	// Listed as cancelled, and apart from the timer that failed.
	for state, want := range map[string]int64{timersrt.StateCancelled: ready, timersrt.StateFailed: failed, timersrt.StateInProgress: claimed} {
		page, err := admin.List(ctx, pool, lease.Timers, admin.Filter{Status: state})
		got := page.Items
		if err != nil || len(got) != 1 || got[0].ID != want {
			t.Errorf("List(state %s) = %+v, %v; want timer %d", state, got, err, want)
		}
	}
	// A revived cancelled timer is ready again, and if it then fails it is failed, not cancelled.
	if got, err := e.Revive(ctx, "test", "changed my mind", ready); err != nil || len(got) != 1 {
		t.Fatalf("revive: %v %v", got, err)
	}
	if info, _ := admin.Get(ctx, pool, lease.Timers, ready); info.State != timersrt.StateReady {
		t.Fatalf("revived cancelled timer is %q, want ready", info.State)
	}
	items := claim(t, pool, "ready")
	if len(items) != 1 {
		t.Fatalf("revived timer not claimed: %+v", items)
	}
	if err := e.Fail(ctx, items[0].OwnerToken, ready, "boom"); err != nil {
		t.Fatal(err)
	}
	if info, _ := admin.Get(ctx, pool, lease.Timers, ready); info.State != timersrt.StateFailed {
		t.Fatalf("revived timer that failed is %q, want failed", info.State)
	}
}

// Cancel and the real claim race on the same due timer many times: exactly
// one wins each time. Either Cancel returned nil, the claim did not get the
// timer and it is cancelled; or the claim got it and Cancel returned
// ErrClaimed (the attempt is still in progress when Cancel runs, or it was
// not yet claimed... which the claim's win rules out).
func TestCancelVersusClaimRace(t *testing.T) {
	pool := testdb.PoolWith(t, 20)
	ctx := context.Background()
	c := timersrt.NewClient(timersrt.ClientOptions{NotifyDebounce: -1})
	e := lease.New(pool, lease.Timers)
	const rounds, parallel = 200, 4
	var (
		mu                    sync.Mutex
		cancelWins, claimWins int
	)
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i := range rounds {
		queue := fmt.Sprintf("race%d", i)
		s, err := c.Schedule(ctx, pool, timers.Timer{Queue: queue, Topic: "t", DueTime: time.Now().Add(-time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			start := make(chan struct{})
			var cancelErr, claimErr error
			var got lease.Claim
			var inner sync.WaitGroup
			inner.Add(2)
			go func() {
				defer inner.Done()
				<-start
				cancelErr = c.Cancel(ctx, pool, s.ID)
			}()
			go func() {
				defer inner.Done()
				<-start
				got, claimErr = e.Claim(ctx, lease.ClaimParams{Queue: queue, Max: 1, Lease: time.Minute, WorkerID: "race"})
			}()
			close(start)
			inner.Wait()
			if claimErr != nil {
				t.Errorf("round %d: claim: %v", i, claimErr)
				return
			}
			info, err := admin.Get(ctx, pool, lease.Timers, s.ID)
			if err != nil {
				t.Errorf("round %d: %v", i, err)
				return
			}
			claimed := len(got.Items) == 1
			switch {
			case cancelErr == nil && !claimed && info.State == timersrt.StateCancelled && info.Attempts == 0:
				mu.Lock()
				cancelWins++
				mu.Unlock()
			case claimed && errors.Is(cancelErr, timers.ErrClaimed) && info.State == timersrt.StateInProgress && info.Attempts == 1:
				mu.Lock()
				claimWins++
				mu.Unlock()
				if err := e.Ack(ctx, got.Token, s.ID); err != nil {
					t.Errorf("round %d: ack: %v", i, err)
				}
			default:
				t.Errorf("round %d: both or neither won: cancel %v, claimed %v, state %s, attempts %d", i, cancelErr, claimed, info.State, info.Attempts)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d rounds: cancel won %d, claim won %d", rounds, cancelWins, claimWins)
	if cancelWins+claimWins != rounds {
		t.Fatalf("%d + %d outcomes for %d rounds", cancelWins, claimWins, rounds)
	}
	// A cancel after the claim's ack finds it finished.
	var doneID int64
	if err := pool.QueryRow(ctx, "select id from workq.timers where status = 2 limit 1").Scan(&doneID); err == nil {
		if err := c.Cancel(ctx, pool, doneID); !errors.Is(err, timers.ErrFinished) {
			t.Fatalf("cancel of a handled timer: %v, want ErrFinished", err)
		}
	}
}

func testConfig() config.Config {
	cfg := config.Default()
	cfg.WorkerID = "timers-test"
	cfg.Concurrency = 4
	cfg.Batch = 10
	cfg.Lease = 5 * time.Second
	cfg.BackoffBase = 5 * time.Millisecond
	cfg.BackoffCap = 20 * time.Millisecond
	cfg.DrainTimeout = time.Second
	return cfg
}

func startWorker(t *testing.T, pool *pgxpool.Pool, cfg config.Config, src worker.Source) {
	t.Helper()
	w, err := worker.New(pool, cfg.Worker(), worker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AddSource(src); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := w.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
}

func waitState(t *testing.T, pool *pgxpool.Pool, id int64, state string) admin.Item {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := admin.Get(context.Background(), pool, lease.Timers, id)
		if err != nil {
			t.Fatal(err)
		}
		if info.State == state {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("timer %d is %s after 30s, want %s (%+v)", id, info.State, state, info)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A failing handler is retried with the worker's backoff and sees the
// timer's own due time on every attempt; a timer that keeps failing is
// failed after MaxAttempts; a permanent error fails at once.
func TestTimerRetriesThroughWorker(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	c := timersrt.NewClient(timersrt.ClientOptions{})
	p := timersrt.NewProcessor()
	var mu sync.Mutex
	seen := map[int64][]time.Time{}
	record := func(job *worker.Job) int {
		mu.Lock()
		defer mu.Unlock()
		seen[job.ID] = append(seen[job.ID], job.DueTime)
		return len(seen[job.ID])
	}
	must(t, p.Handle("flaky", func(ctx context.Context, job *worker.Job) error {
		if record(job) < 3 {
			return errors.New("not yet")
		}
		return nil
	}))
	must(t, p.Handle("broken", func(ctx context.Context, job *worker.Job) error {
		record(job)
		return errors.New("always")
	}))
	p.HandleDefault(func(ctx context.Context, job *worker.Job) error {
		record(job)
		return worker.Permanent(errors.New("unknown topic"))
	})
	due := time.Now().Add(-time.Minute).Truncate(time.Microsecond)
	flaky, err := c.Schedule(ctx, pool, timers.Timer{Topic: "flaky", DueTime: due, MaxAttempts: 5})
	must(t, err)
	broken, err := c.Schedule(ctx, pool, timers.Timer{Topic: "broken", DueTime: due, MaxAttempts: 2})
	must(t, err)
	other, err := c.Schedule(ctx, pool, timers.Timer{Topic: "other", DueTime: due})
	must(t, err)
	startWorker(t, pool, testConfig(), p.Source())

	info := waitState(t, pool, flaky.ID, timersrt.StateDone)
	if info.Attempts != 3 {
		t.Errorf("flaky timer done after %d attempts, want 3", info.Attempts)
	}
	if !dueTime(info).Equal(due) {
		t.Errorf("due time changed by retries: %s, want %s", dueTime(info), due)
	}
	if info = waitState(t, pool, broken.ID, timersrt.StateFailed); info.Attempts != 2 || info.LastError != "always" {
		t.Errorf("broken timer: %d attempts, last error %q; want 2, always", info.Attempts, info.LastError)
	}
	if info = waitState(t, pool, other.ID, timersrt.StateFailed); info.Attempts != 1 {
		t.Errorf("permanently failed timer took %d attempts, want 1", info.Attempts)
	}
	mu.Lock()
	for id, dues := range seen {
		for _, d := range dues {
			if !d.Equal(due) {
				t.Errorf("timer %d: handler saw due time %s, want %s", id, d, due)
			}
		}
	}
	mu.Unlock()
	// The run archive has every attempt.
	var outcomes []string
	deadline := time.Now().Add(30 * time.Second)
	for len(outcomes) < 3 && time.Now().Before(deadline) {
		as, err := admin.Attempts(ctx, pool, lease.Timers, flaky.ID)
		must(t, err)
		outcomes = outcomes[:0]
		for _, a := range as {
			outcomes = append(outcomes, a.Outcome)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if strings.Join(outcomes, ",") != "retry,retry,done" {
		t.Errorf("flaky timer's archived attempts: %v, want retry, retry, done", outcomes)
	}
}

// A timer due in the future starts at its due time, not at the worker's
// next poll: the poll interval here is an hour, so only the runtime's
// next-due wake-up (Source.NextDue) can start these timers within the
// test's deadline. One timer exists before the worker starts, one is
// scheduled while it runs (its NOTIFY tells the worker, which then waits
// for the due time). Neither is claimed before it is due.
func TestFutureTimerStartsAtItsDueTimeNotAtThePoll(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	c := timersrt.NewClient(timersrt.ClientOptions{NotifyWithin: time.Hour})
	p := timersrt.NewProcessor()
	handled := make(chan int64, 2)
	p.HandleDefault(func(ctx context.Context, job *worker.Job) error {
		handled <- job.ID
		return nil
	})
	first, err := c.Schedule(ctx, pool, timers.Timer{Topic: "t", Delay: 300 * time.Millisecond})
	must(t, err)
	cfg := testConfig()
	cfg.Poll = time.Hour
	startWorker(t, pool, cfg, p.Source())
	second, err := c.Schedule(ctx, pool, timers.Timer{Topic: "t", Delay: 500 * time.Millisecond})
	must(t, err)
	got := map[int64]bool{}
	timeout := time.After(30 * time.Second)
	for len(got) < 2 {
		select {
		case id := <-handled:
			got[id] = true
		case <-timeout:
			t.Fatalf("handled %v after 30s with a 1h poll: future timers wait for the poll", got)
		}
	}
	for _, id := range []int64{first.ID, second.ID} {
		info := waitState(t, pool, id, timersrt.StateDone)
		if info.ClaimedAt == nil || info.ClaimedAt.Before(dueTime(info)) {
			t.Errorf("timer %d claimed at %v, before its due time %s", id, info.ClaimedAt, dueTime(info))
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// dueTime is a timer's due time as admin reads it (its kind's due_time
// detail).
func dueTime(it admin.Item) time.Time {
	d, _ := it.Details["due_time"].(time.Time)
	return d
}
