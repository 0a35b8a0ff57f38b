package schedule_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/workq/workq/internal/schedule"
	"github.com/workq/workq/internal/testdb"
)

// Three schedulers tick concurrently (each on its own goroutine and
// connection, batches of 3 so they split and skip-lock the schedules) while
// the clock walks three minutes in uneven steps: every slot of every
// schedule gets exactly one job run.
func TestRacingSchedulersMaterialiseEachSlotOnce(t *testing.T) {
	ctx := context.Background()
	pool := testdb.PoolWith(t, 10)
	t0 := utc("2030-01-01T00:00:00Z").Add(500 * time.Millisecond)
	c := newClock(t0)
	st := schedule.NewStore(schedule.StoreOptions{Clock: c.Now})
	want := map[string]int{"every-2s": 90, "every-3s": 60, "minutely": 3}
	specs := []schedule.Spec{
		{Name: "every-2s", Cron: "*/2 * * * * *"},
		{Name: "every-3s", Cron: "@every 3s"},
		{Name: "minutely", Cron: "* * * * *"},
	}
	for i := range 9 {
		name := "every-second-" + string(rune('a'+i))
		specs = append(specs, schedule.Spec{Name: name, Cron: "* * * * * *"})
		want[name] = 180
	}
	ids := map[string]int64{}
	for _, sp := range specs {
		sp.Kind, sp.Misfire = "race", schedule.MisfireRunAll
		ids[sp.Name] = mustCreate(t, st, pool, sp).ID
	}
	var scheds []*schedule.Scheduler
	for range 3 {
		s, err := schedule.NewScheduler(pool, schedule.SchedulerOptions{Clock: c.Now, Batch: 3, MisfireGrace: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		scheds = append(scheds, s)
	}
	for elapsed, i := 0, 0; elapsed < 180; i++ {
		step := min([]int{1, 2, 3, 1, 5}[i%5], 180-elapsed)
		elapsed += step
		c.Add(time.Duration(step) * time.Second)
		var wg sync.WaitGroup
		errs := make(chan error, 6)
		for _, s := range scheds {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 2 {
					if _, err := s.Tick(ctx); err != nil {
						errs <- err
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("tick: %v", err)
		}
	}
	var dups int
	if err := pool.QueryRow(ctx, `select count(*) from (select 1 from workq.job_runs_all group by schedule_id, scheduled_time having count(*) > 1) d`).Scan(&dups); err != nil {
		t.Fatal(err)
	}
	if dups != 0 {
		t.Errorf("%d (schedule, scheduled time) pairs have more than one run", dups)
	}
	for name, n := range want {
		got := slots(t, pool, ids[name])
		if len(got) != n {
			t.Errorf("%s: %d runs, want %d", name, len(got), n)
		}
		for _, ts := range got {
			if ts.Before(t0) || ts.After(t0.Add(180*time.Second)) || ts.Nanosecond() != 0 {
				t.Errorf("%s: slot %s outside the window or not on a second", name, ts)
			}
		}
	}
	// A scheduler that acts on a stale next_run_at (rewound here by hand)
	// finds every slot taken: the unique index, not the row lock, is what
	// makes each slot one run.
	if _, err := pool.Exec(ctx, `update workq.schedules s set next_run_at = (select min(scheduled_time) from workq.job_runs_all j where j.schedule_id = s.id)`); err != nil {
		t.Fatal(err)
	}
	if n := tick(t, scheds[0]); n != 0 {
		t.Errorf("rewound schedules: %d new runs, want 0", n)
	}
	if got := slots(t, pool, ids["every-3s"]); len(got) > 0 && !got[0].Equal(utc("2030-01-01T00:00:03Z")) {
		t.Errorf("@every 3s: first slot %s, want 00:00:03 (3s after creation, on a whole second)", got[0])
	}
}

func TestOverlapSkipVersusAllow(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	c := newClock(utc("2030-01-01T00:00:00Z"))
	st := schedule.NewStore(schedule.StoreOptions{Clock: c.Now})
	skip := mustCreate(t, st, pool, schedule.Spec{Name: "skip", Cron: "@every 10s", Kind: "k", Overlap: schedule.OverlapSkip})
	allow := mustCreate(t, st, pool, schedule.Spec{Name: "allow", Cron: "@every 10s", Kind: "k"})
	s := newScheduler(t, pool, c, time.Minute)

	c.Add(10 * time.Second)
	if n := tick(t, s); n != 2 {
		t.Fatalf("first slot: %d runs, want 2", n)
	}
	c.Add(10 * time.Second) // both first runs are still ready (live)
	if n := tick(t, s); n != 1 {
		t.Fatalf("second slot: %d runs, want 1 (allow only)", n)
	}
	got, err := st.Get(ctx, pool, "skip")
	if err != nil {
		t.Fatal(err)
	}
	if got.LastOutcome != "skipped" || got.SkippedRuns != 1 || got.NextRunAt == nil || !got.NextRunAt.Equal(utc("2030-01-01T00:00:30Z")) {
		t.Errorf("skip after a skipped slot: outcome %q, skipped %d, next %v", got.LastOutcome, got.SkippedRuns, got.NextRunAt)
	}
	// Trigger respects the policy unless forced.
	if _, err := st.TriggerNow(ctx, pool, "skip", false); !errors.Is(err, schedule.ErrOverlap) {
		t.Errorf("trigger with a live run under skip: %v, want ErrOverlap", err)
	}
	// The first run of "skip" finishes: the next slot runs again.
	if _, err := pool.Exec(ctx, `update workq.job_runs set status = 2, finished_at = now() where schedule_id = $1`, skip.ID); err != nil {
		t.Fatal(err)
	}
	c.Add(10 * time.Second)
	if n := tick(t, s); n != 2 {
		t.Fatalf("third slot: %d runs, want 2", n)
	}
	if got := fmtTimes(slots(t, pool, skip.ID)); !slices.Equal(got, []string{"2030-01-01T00:00:10Z", "2030-01-01T00:00:30Z"}) {
		t.Errorf("skip slots %v", got)
	}
	if got := slots(t, pool, allow.ID); len(got) != 3 {
		t.Errorf("allow: %d slot runs, want 3", len(got))
	}
	after, err := st.Get(ctx, pool, "skip")
	if err != nil {
		t.Fatal(err)
	}
	if after.LastOutcome != "ready" || after.LastRunAt == nil || !after.LastRunAt.Equal(utc("2030-01-01T00:00:30Z")) {
		t.Errorf("skip after running again: outcome %q, last run at %v", after.LastOutcome, after.LastRunAt)
	}
}

func TestTriggerNow(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	c := newClock(utc("2030-01-01T00:00:00Z"))
	st := schedule.NewStore(schedule.StoreOptions{Clock: c.Now})
	sc := mustCreate(t, st, pool, schedule.Spec{Name: "nightly", Cron: "0 3 * * *", Kind: "report", Payload: map[string]int{"n": 1},
		Overlap: schedule.OverlapSkip, Priority: 5, MaxAttempts: 2, Queue: "reports"})
	tr, err := st.TriggerNow(ctx, pool, "nightly", false)
	if err != nil {
		t.Fatal(err)
	}
	var (
		schedID              *int64
		slot                 *time.Time
		queue, kind, payload string
		prio                 int16
		maxAttempts, status  int32
	)
	err = pool.QueryRow(ctx, `select schedule_id, scheduled_time, queue, kind, payload::text, priority, max_attempts, status from workq.job_runs_all where id = $1`, tr.RunID).
		Scan(&schedID, &slot, &queue, &kind, &payload, &prio, &maxAttempts, &status)
	if err != nil {
		t.Fatal(err)
	}
	if schedID == nil || *schedID != sc.ID || slot != nil || queue != "reports" || kind != "report" || payload != `{"n": 1}` || prio != 5 || maxAttempts != 2 || status != 0 {
		t.Errorf("triggered run: schedule %v slot %v %s/%s %s prio %d attempts %d status %d", schedID, slot, queue, kind, payload, prio, maxAttempts, status)
	}
	// A second trigger meets the live run (overlap skip); force runs anyway.
	if _, err := st.TriggerNow(ctx, pool, "nightly", false); !errors.Is(err, schedule.ErrOverlap) {
		t.Fatalf("second trigger: %v, want ErrOverlap", err)
	}
	if _, err := st.TriggerNow(ctx, pool, "nightly", true); err != nil {
		t.Fatalf("forced trigger: %v", err)
	}
	got, err := st.Get(ctx, pool, "nightly")
	if err != nil {
		t.Fatal(err)
	}
	if got.NextRunAt == nil || !got.NextRunAt.Equal(sc.NextRunAt.UTC()) {
		t.Errorf("trigger moved next run: %v, was %v", got.NextRunAt, sc.NextRunAt)
	}
	if got.LastRunID == nil || *got.LastRunID == tr.RunID || got.LastOutcome != "ready" {
		t.Errorf("last run after forced trigger: %v %q", got.LastRunID, got.LastOutcome)
	}
	if _, err := st.TriggerNow(ctx, pool, "missing", false); !errors.Is(err, schedule.ErrNotFound) {
		t.Errorf("trigger of a missing schedule: %v, want ErrNotFound", err)
	}
}

// After downtime the clock jumps an hour: each misfire policy decides what
// becomes of the missed slots of a five-minute schedule.
func TestMisfirePolicies(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	t0 := utc("2030-01-01T10:00:30Z")
	hm := func(ss ...string) []string {
		out := make([]string, len(ss))
		for i, s := range ss {
			out[i] = "2030-01-01T" + s + ":00Z"
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		misfire schedule.MisfirePolicy
		cap     int
		wake    string
		want    []string
	}{
		{"run once, all late", schedule.MisfireRunOnce, 0, "11:02:00", hm("11:00")},
		{"skip, all late", schedule.MisfireSkip, 0, "11:02:00", nil},
		{"run all, all late", schedule.MisfireRunAll, 0, "11:02:00",
			hm("10:05", "10:10", "10:15", "10:20", "10:25", "10:30", "10:35", "10:40", "10:45", "10:50", "10:55", "11:00")},
		{"run all capped, all late", schedule.MisfireRunAll, 5, "11:02:00", hm("10:40", "10:45", "10:50", "10:55", "11:00")},
		{"run once, one on time", schedule.MisfireRunOnce, 0, "11:00:30", hm("11:00")},
		{"skip, one on time", schedule.MisfireSkip, 0, "11:00:30", hm("11:00")},
		{"run all capped, one on time", schedule.MisfireRunAll, 3, "11:00:30", hm("10:45", "10:50", "10:55", "11:00")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock(t0)
			st := schedule.NewStore(schedule.StoreOptions{Clock: c.Now})
			name := "m" + string(rune('a'+len(tc.name)%26)) + time.Now().Format("150405.000000")
			sc := mustCreate(t, st, pool, schedule.Spec{Name: name, Cron: "*/5 * * * *", Kind: "k", Misfire: tc.misfire, MisfireCap: tc.cap})
			s := newScheduler(t, pool, c, time.Minute)
			c.Set(utc("2030-01-01T" + tc.wake + "Z"))
			if n := tick(t, s); n != len(tc.want) {
				t.Errorf("tick: %d runs, want %d", n, len(tc.want))
			}
			if n := tick(t, s); n != 0 {
				t.Errorf("second tick at the same time: %d runs, want 0", n)
			}
			if got := fmtTimes(slots(t, pool, sc.ID)); !slices.Equal(got, tc.want) && len(got)+len(tc.want) > 0 {
				t.Errorf("slots %v, want %v", got, tc.want)
			}
			got, err := st.Get(ctx, pool, name)
			if err != nil {
				t.Fatal(err)
			}
			if got.NextRunAt == nil || !got.NextRunAt.Equal(utc("2030-01-01T11:05:00Z")) {
				t.Errorf("next run %v, want 11:05", got.NextRunAt)
			}
		})
	}
}

// A daily 02:30 schedule (and an hourly one) across the DST changes,
// ticked every 30 minutes of a clock that walks four days.
func TestDST(t *testing.T) {
	pool := testdb.Pool(t)
	for _, tc := range []struct {
		name, tz, cron, from, to string
		want                     []string // UTC
	}{
		{"Berlin spring forward: 02:30 does not exist, runs at 03:30 CEST", "Europe/Berlin", "30 2 * * *",
			"2026-03-27T12:00:00Z", "2026-03-31T12:00:00Z",
			[]string{"2026-03-28T01:30:00Z", "2026-03-29T01:30:00Z", "2026-03-30T00:30:00Z", "2026-03-31T00:30:00Z"}},
		{"Berlin fall back: 02:30 happens twice, runs once (CEST)", "Europe/Berlin", "30 2 * * *",
			"2026-10-23T12:00:00Z", "2026-10-27T12:00:00Z",
			[]string{"2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z", "2026-10-27T01:30:00Z"}},
		{"New York spring forward", "America/New_York", "30 2 * * *",
			"2026-03-06T12:00:00Z", "2026-03-10T12:00:00Z",
			[]string{"2026-03-07T07:30:00Z", "2026-03-08T07:30:00Z", "2026-03-09T06:30:00Z", "2026-03-10T06:30:00Z"}},
		{"New York fall back: 01:30 runs once (EDT)", "America/New_York", "30 1 * * *",
			"2026-10-30T12:00:00Z", "2026-11-03T12:00:00Z",
			[]string{"2026-10-31T05:30:00Z", "2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z", "2026-11-03T06:30:00Z"}},
		{"Berlin fall back: */30 2 runs 02:00 and 02:30 once each (CEST)", "Europe/Berlin", "*/30 2 * * *",
			"2026-10-24T23:00:00Z", "2026-10-25T03:00:00Z",
			[]string{"2026-10-25T00:00:00Z", "2026-10-25T00:30:00Z"}},
		{"Berlin hourly on the 25-hour day: both 02:00 run", "Europe/Berlin", "0 * * * *",
			"2026-10-25T00:30:00Z", "2026-10-25T02:30:00Z",
			[]string{"2026-10-25T01:00:00Z", "2026-10-25T02:00:00Z"}},
		{"Berlin hourly on the 23-hour day: no 02:00", "Europe/Berlin", "0 * * * *",
			"2026-03-29T00:30:00Z", "2026-03-29T02:30:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-29T02:00:00Z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock(utc(tc.from))
			st := schedule.NewStore(schedule.StoreOptions{Clock: c.Now})
			name := "dst" + time.Now().Format("150405.000000")
			sc := mustCreate(t, st, pool, schedule.Spec{Name: name, Cron: tc.cron, Timezone: tc.tz, Kind: "k"})
			s := newScheduler(t, pool, c, time.Hour)
			for end := utc(tc.to); c.Now().Before(end); {
				c.Add(30 * time.Minute)
				tick(t, s)
			}
			if got := fmtTimes(slots(t, pool, sc.ID)); !slices.Equal(got, tc.want) {
				t.Errorf("slots %v, want %v", got, tc.want)
			}
		})
	}
}

func TestUpdateEnableDisable(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	c := newClock(utc("2030-01-01T00:00:00Z"))
	st := schedule.NewStore(schedule.StoreOptions{Clock: c.Now})
	sc := mustCreate(t, st, pool, schedule.Spec{Name: "u", Cron: "0 * * * *", Kind: "k"})
	if !sc.NextRunAt.Equal(utc("2030-01-01T01:00:00Z")) || !sc.Enabled || sc.Overlap != schedule.OverlapAllow || sc.Misfire != schedule.MisfireRunOnce || sc.MisfireCap != 100 || sc.MaxAttempts != 4 || sc.Queue != "default" || sc.Timezone != "UTC" {
		t.Fatalf("created with defaults: %+v", sc)
	}
	cron, tz, skip := "30 9 * * 1-5", "Europe/Berlin", schedule.OverlapSkip
	up, err := st.Update(ctx, pool, "u", schedule.Changes{Cron: &cron, Timezone: &tz, Overlap: &skip, Payload: []byte(`{"a":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	// 2030-01-01 is a Tuesday; 09:30 in Berlin (CET) is 08:30Z.
	if up.NextRunAt == nil || !up.NextRunAt.Equal(utc("2030-01-01T08:30:00Z")) || up.Overlap != skip || string(up.Payload) != `{"a": 1}` || up.Kind != "k" {
		t.Errorf("updated: next %v overlap %s payload %s kind %s", up.NextRunAt, up.Overlap, up.Payload, up.Kind)
	}
	if d, err := st.Disable(ctx, pool, "u"); err != nil || d.Enabled || d.NextRunAt != nil {
		t.Fatalf("disable: %+v %v", d, err)
	}
	s := newScheduler(t, pool, c, time.Minute)
	c.Set(utc("2030-01-03T12:00:00Z"))
	if n := tick(t, s); n != 0 {
		t.Errorf("disabled schedule materialised %d runs", n)
	}
	e, err := st.Enable(ctx, pool, "u")
	if err != nil {
		t.Fatal(err)
	}
	if e.NextRunAt == nil || !e.NextRunAt.Equal(utc("2030-01-04T08:30:00Z")) {
		t.Errorf("re-enabled: next %v, want the first slot after now (no catch-up)", e.NextRunAt)
	}
	if err := st.Delete(ctx, pool, "u"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(ctx, pool, "u"); !errors.Is(err, schedule.ErrNotFound) {
		t.Errorf("get after delete: %v", err)
	}
	if err := st.Delete(ctx, pool, "u"); !errors.Is(err, schedule.ErrNotFound) {
		t.Errorf("second delete: %v", err)
	}
}

// Start and Stop: the loop runs on the database clock and materialises a
// one-second schedule; Stop returns once the loop has ended.
func TestStartStop(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	st := schedule.NewStore(schedule.StoreOptions{})
	sc := mustCreate(t, st, pool, schedule.Spec{Name: "tick", Cron: "@every 1s", Kind: "k"})
	s, err := schedule.NewScheduler(pool, schedule.SchedulerOptions{Interval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err == nil {
		t.Error("second Start succeeded")
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(slots(t, pool, sc.ID)) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("no two runs materialised within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.Stop(stopCtx); err != nil {
		t.Fatalf("stop: %v", err)
	}
}
