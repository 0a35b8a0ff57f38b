package workq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
)

type DigestArgs struct {
	To string `json:"to"`
}

func (DigestArgs) Kind() string { return "periodic.digest" }

// declared is what the deploy tests check of a schedule.
func declared(t *testing.T, ctx context.Context, c *workq.Client) map[string]string {
	t.Helper()
	all, err := c.ListSchedules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, s := range all {
		v := s.Cron
		if !s.Enabled {
			v += " (disabled)"
		}
		if !s.Declared {
			v += " (operator's)"
		}
		out[s.Name] = v
	}
	return out
}

// periodicClient returns a started Client (maintenance off: the tests
// check the stored schedules, not their runs) declaring jobs; ttl is its
// LeaderTTL, which paces the reconcile loop (every ttl/3) and the set's
// alive window (2*ttl).
func periodicClient(t *testing.T, pool *pgxpool.Pool, ttl time.Duration, jobs ...*workq.PeriodicJob) *workq.Client {
	t.Helper()
	if jobs == nil {
		jobs = []*workq.PeriodicJob{}
	}
	c, err := workq.NewClient(pool, workq.Config{PeriodicJobs: jobs,
		Maintenance: workq.MaintenanceConfig{Disabled: true, LeaderTTL: ttl}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return c
}

// A rolling deploy: the old process keeps running (and reconciling every
// LeaderTTL/3) with the old declarations while the new one starts with a
// changed cron, an added and a removed declaration. The stored schedules
// end as the new process declares; the old process, and an old replica
// restarted during the deploy, do not flip them back; the operator's
// schedule is never touched.
func TestPeriodicJobsRollingDeploy(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	old := periodicClient(t, pool, time.Second,
		workq.NewPeriodicJob("digest", "@hourly", DigestArgs{To: "ops"}, nil),
		workq.NewPeriodicJob("report", "@daily", DigestArgs{To: "boss"}, nil))
	if _, err := old.CreateSchedule(ctx, workq.ScheduleSpec{Name: "adhoc", Cron: "@weekly", Kind: "periodic.adhoc"}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"digest": "@hourly", "report": "@daily", "adhoc": "@weekly (operator's)"}
	if got := declared(t, ctx, old); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the old process started: %v, want %v", got, want)
	}

	newer := periodicClient(t, pool, 15*time.Second,
		workq.NewPeriodicJob("digest", "*/5 * * * *", DigestArgs{To: "ops"}, nil),
		workq.NewPeriodicJob("cleanup", "@hourly", DigestArgs{To: "janitor"}, &workq.PeriodicJobOpts{Queue: "maint", Overlap: workq.OverlapSkip}))
	want = map[string]string{"digest": "*/5 * * * *", "report": "@daily (disabled)", "cleanup": "@hourly", "adhoc": "@weekly (operator's)"}
	if got := declared(t, ctx, newer); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the new process started: %v, want %v", got, want)
	}
	if s, err := newer.GetSchedule(ctx, "cleanup"); err != nil || s.Queue != "maint" || s.Overlap != workq.OverlapSkip || s.Kind != "periodic.digest" ||
		string(s.Payload) != `{"to": "janitor"}` {
		t.Fatalf("cleanup: %+v, %v", s, err)
	}

	// The old process's loop reconciles every ~333ms: wait until it has
	// renewed its set twice since the new one started.
	var since time.Time
	if err := pool.QueryRow(ctx, "select now()").Scan(&since); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 60*time.Second, "the old process reconciled twice", func() bool {
		var renewed bool // the old set is the first seen
		err := pool.QueryRow(ctx, `select alive_until > $1::timestamptz + interval '2.7 seconds'
			from workq.periodic_job_sets order by first_seen_at limit 1`, since).Scan(&renewed)
		return err == nil && renewed
	})
	restarted := periodicClient(t, pool, time.Second, // an old replica restarted mid-deploy
		workq.NewPeriodicJob("digest", "@hourly", DigestArgs{To: "ops"}, nil),
		workq.NewPeriodicJob("report", "@daily", DigestArgs{To: "boss"}, nil))
	if got := declared(t, ctx, restarted); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("with the old processes still running: %v, want %v", got, want)
	}
	for _, c := range []*workq.Client{old, restarted} {
		if err := c.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := declared(t, ctx, newer); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the old processes stopped: %v, want %v", got, want)
	}
}

// A rollback: the new processes stop and the old declarations run again;
// once the new set has not been renewed for its alive window (2*LeaderTTL)
// the running old process applies its declarations.
func TestPeriodicJobsRollback(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	old := periodicClient(t, pool, time.Second, workq.NewPeriodicJob("digest", "@hourly", DigestArgs{}, nil))
	newer := periodicClient(t, pool, time.Second, workq.NewPeriodicJob("digest", "@daily", DigestArgs{}, nil),
		workq.NewPeriodicJob("extra", "@daily", DigestArgs{}, nil))
	if got := fmt.Sprint(declared(t, ctx, old)); got != "map[digest:@daily extra:@daily]" {
		t.Fatalf("after the new deploy: %s", got)
	}
	if err := newer.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 60*time.Second, "the old declarations applied again", func() bool {
		return fmt.Sprint(declared(t, ctx, old)) == "map[digest:@hourly extra:@daily (disabled)]"
	})
}

func waitUntil(t *testing.T, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, bound)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A sharded Client reconciles each shard's own: a schedule lives on the
// shard of its name, and a declaration removed from one shard's set is
// disabled there.
func TestPeriodicJobsSharded(t *testing.T) {
	ctx := context.Background()
	pools := map[string]*pgxpool.Pool{"a": testdb.Pool(t), "b": testdb.Pool(t)}
	shards := []workq.Shard{{Name: "a", Pool: pools["a"]}, {Name: "b", Pool: pools["b"]}}
	var jobs []*workq.PeriodicJob
	for i := range 8 {
		jobs = append(jobs, workq.NewPeriodicJob(fmt.Sprint("p-", i), "@hourly", DigestArgs{}, nil))
	}
	start := func(jobs []*workq.PeriodicJob) *workq.Client {
		c, err := workq.NewShardedClient(shards, workq.Config{PeriodicJobs: jobs, Maintenance: workq.MaintenanceConfig{Disabled: true}})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Stop(ctx) })
		return c
	}
	v1 := start(jobs)
	onShard := map[string]bool{}
	for i := range 8 {
		name := fmt.Sprint("p-", i)
		shard := v1.ShardFor(workq.ScheduleKey(name))
		onShard[shard] = true
		if n := countIn(t, pools[shard], "schedules", "name = $1 and declared and enabled", name); n != 1 {
			t.Fatalf("schedule %s: %d declared rows on its shard %s", name, n, shard)
		}
		if n := countIn(t, pools[map[string]string{"a": "b", "b": "a"}[shard]], "schedules", "name = $1", name); n != 0 {
			t.Fatalf("schedule %s also on the other shard", name)
		}
	}
	if len(onShard) != 2 {
		t.Fatalf("8 names all on one shard: %v", onShard)
	}
	// v2 keeps only p-0: every other schedule, on either shard, is disabled.
	v2 := start(jobs[:1])
	got := declared(t, ctx, v2)
	for i := range 8 {
		name, want := fmt.Sprint("p-", i), "@hourly (disabled)"
		if i == 0 {
			want = "@hourly"
		}
		if got[name] != want {
			t.Errorf("%s after v2: %q, want %q", name, got[name], want)
		}
	}
}

// A declaration naming a schedule an operator created fails Start with
// ErrScheduleExists, and changes nothing; a Client without PeriodicJobs
// (nil) takes no part, so it leaves declared schedules alone.
func TestPeriodicJobsLeaveOperatorsSchedulesAlone(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	plain := periodicClient(t, pool, 0)
	if _, err := plain.CreateSchedule(ctx, workq.ScheduleSpec{Name: "nightly", Cron: "@daily", Kind: "periodic.digest"}); err != nil {
		t.Fatal(err)
	}
	c, err := workq.NewClient(pool, workq.Config{PeriodicJobs: []*workq.PeriodicJob{
		workq.NewPeriodicJob("nightly", "@hourly", DigestArgs{}, nil)}, Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Start(ctx)
	if !errors.Is(err, workq.ErrScheduleExists) || !strings.Contains(err.Error(), "workq schedules remove nightly") {
		t.Fatalf("Start: %v, want ErrScheduleExists naming the fix", err)
	}
	if got := fmt.Sprint(declared(t, ctx, plain)); got != "map[nightly:@daily (operator's)]" {
		t.Fatalf("after the refused Start: %s", got)
	}
	// plain declared none ([]): a producer-only Client (nil) leaves it all.
	producer, err := workq.NewClient(pool, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := producer.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer producer.Stop(ctx)
	if got := fmt.Sprint(declared(t, ctx, plain)); got != "map[nightly:@daily (operator's)]" {
		t.Fatalf("after a Client without PeriodicJobs: %s", got)
	}
}

func TestPeriodicJobsInvalid(t *testing.T) {
	pool := testdb.Pool(t)
	for _, tc := range []struct {
		name string
		jobs []*workq.PeriodicJob
		want string
	}{
		{"nil job", []*workq.PeriodicJob{nil}, "must not be nil"},
		{"bad cron", []*workq.PeriodicJob{workq.NewPeriodicJob("a", "every day", DigestArgs{}, nil)}, "cron"},
		{"nil args", []*workq.PeriodicJob{workq.NewPeriodicJob("a", "@daily", nil, nil)}, "args"},
		{"bad name", []*workq.PeriodicJob{workq.NewPeriodicJob("a b", "@daily", DigestArgs{}, nil)}, "name"},
		{"twice", []*workq.PeriodicJob{workq.NewPeriodicJob("a", "@daily", DigestArgs{}, nil),
			workq.NewPeriodicJob("a", "@hourly", DigestArgs{}, nil)}, "declared twice"},
		{"bad policy", []*workq.PeriodicJob{workq.NewPeriodicJob("a", "@daily", DigestArgs{}, &workq.PeriodicJobOpts{Misfire: "later"})}, "misfire"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := workq.NewClient(pool, workq.Config{PeriodicJobs: tc.jobs})
			if !errors.Is(err, workq.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewClient: %v, want ErrInvalid mentioning %q", err, tc.want)
			}
		})
	}
}
