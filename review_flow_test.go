package workq_test

// Flow control tried as a River Pro / Oban Pro user migrating a
// multi-tenant service would (docs/notes-rev.md): the root package only,
// real PostgreSQL, a real Client with its workers started.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq"
	"github.com/workq/workq/inbox"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/migrate"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/timers"
)

type revTenantArgs struct {
	Tenant string `json:"tenant"`
	N      int    `json:"n"`
}

func (revTenantArgs) Kind() string { return "rev.tenant" }

// LimitKey makes the tenant the job's limit key (ArgsWithLimitKey).
func (a revTenantArgs) LimitKey() string { return a.Tenant }

// revStart starts c and stops it at the end of the test.
func revStart(t *testing.T, ctx context.Context, c *workq.Client) {
	t.Helper()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = c.Stop(sctx)
	})
}

// revWait waits (at most a minute) until done says so.
func revWait(t *testing.T, what string, done func() bool) {
	t.Helper()
	end := time.Now().Add(time.Minute)
	for !done() {
		if time.Now().After(end) {
			t.Fatalf("a minute passed before %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// tenantGauge counts, in the handler, the jobs of each tenant running now,
// and remembers the most of one tenant and the most tenants at once.
type tenantGauge struct {
	mu          sync.Mutex
	now         map[string]int
	maxOne      int
	maxTenants  int
	done        int
	startsAfter map[string][]time.Time
}

func newTenantGauge() *tenantGauge {
	return &tenantGauge{now: map[string]int{}, startsAfter: map[string][]time.Time{}}
}

func (g *tenantGauge) enter(tenant string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.now[tenant]++
	g.maxOne = max(g.maxOne, g.now[tenant])
	n := 0
	for _, v := range g.now {
		if v > 0 {
			n++
		}
	}
	g.maxTenants = max(g.maxTenants, n)
	g.startsAfter[tenant] = append(g.startsAfter[tenant], time.Now())
}

func (g *tenantGauge) leave(tenant string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.now[tenant]--
	g.done++
}

func (g *tenantGauge) doneCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.done
}

// Per-tenant concurrency 1 (a rule per key, declared in code with
// Config.FlowLimits and the args' LimitKey method), 3 tenants, 5 workers:
// never two jobs of one tenant at once in the handlers, and the tenants do
// run side by side.
func TestReviewPerTenantConcurrencyOne(t *testing.T) {
	pool := testdb.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	g := newTenantGauge()
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, j *workq.Job[revTenantArgs]) error {
		if j.LimitKey != j.Args.Tenant {
			return fmt.Errorf("job's LimitKey %q, want %q", j.LimitKey, j.Args.Tenant)
		}
		g.enter(j.LimitKey)
		defer g.leave(j.LimitKey)
		time.Sleep(100 * time.Millisecond) // long enough for the tenants' jobs to overlap at load
		return nil
	}))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers,
		Queues:            map[string]workq.QueueConfig{"tenants": {MaxWorkers: 5}},
		FlowLimits:        []workq.FlowLimit{{Table: workq.TableJobRuns, Queue: "tenants", PerKey: true, Concurrency: 1}},
		FetchPollInterval: 100 * time.Millisecond, Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	var params []workq.EnqueueParams
	for i := range 8 {
		for _, tenant := range []string{"acme", "globex", "initech"} {
			params = append(params, workq.EnqueueParams{Args: revTenantArgs{Tenant: tenant, N: i}, Opts: &workq.EnqueueOpts{Queue: "tenants"}})
		}
	}
	if _, err := client.EnqueueMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	revStart(t, ctx, client)
	revWait(t, "every tenant job ran", func() bool { return g.doneCount() == len(params) })
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.maxOne != 1 {
		t.Errorf("%d jobs of one tenant ran at once under a concurrency of 1 per key", g.maxOne)
	}
	if g.maxTenants < 2 {
		t.Errorf("at most %d tenant ran at once with 5 workers: the keys did not run side by side", g.maxTenants)
	}
}

// A kind paused mid-run stops starting (the other kind goes on); resumed,
// it runs the rest.
func TestReviewPauseKindMidRun(t *testing.T) {
	pool := testdb.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var big, small atomic.Int64
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, j *workq.Job[revBigArgs]) error {
		big.Add(1)
		time.Sleep(20 * time.Millisecond)
		return nil
	}))
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, j *workq.Job[revSmallArgs]) error {
		small.Add(1)
		time.Sleep(20 * time.Millisecond)
		return nil
	}))
	const maxWorkers = 2
	client, err := workq.NewClient(pool, workq.Config{Workers: workers,
		Queues:            map[string]workq.QueueConfig{"mixed": {MaxWorkers: maxWorkers}},
		FetchPollInterval: 100 * time.Millisecond, Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	var params []workq.EnqueueParams
	for i := range 40 {
		params = append(params, workq.EnqueueParams{Args: revBigArgs{N: i}, Opts: &workq.EnqueueOpts{Queue: "mixed"}},
			workq.EnqueueParams{Args: revSmallArgs{N: i}, Opts: &workq.EnqueueOpts{Queue: "mixed"}})
	}
	if _, err := client.EnqueueMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	revStart(t, ctx, client)
	revWait(t, "3 jobs of rev.big ran", func() bool { return big.Load() >= 3 })
	kind := workq.KindRef{Table: workq.TableJobRuns, Queue: "mixed", Kind: "rev.big"}
	changed, err := client.PauseKind(ctx, kind, &workq.ActionOpts{Actor: "review", Reason: "downstream down"})
	if err != nil || !changed {
		t.Fatalf("PauseKind: %v, %v", changed, err)
	}
	atPause := big.Load()
	revWait(t, "every rev.small ran", func() bool { return small.Load() == 40 })
	// Those claimed before the pause may still start (at most a claim).
	if got := big.Load(); got > atPause+maxWorkers || got == 40 {
		t.Fatalf("rev.big ran %d jobs after its pause (had %d when paused)", got, atPause)
	}
	st, err := client.FlowStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.PausedKinds) != 1 || st.PausedKinds[0].Kind != "rev.big" || st.PausedKinds[0].PausedBy != "review" {
		t.Fatalf("FlowStatus.PausedKinds: %+v", st.PausedKinds)
	}
	if w := st.WaitsFor(workq.TableJobRuns, "mixed", "", "rev.big", ""); len(w) == 0 {
		t.Errorf("WaitsFor of a paused kind says nothing")
	}
	if changed, err := client.ResumeKind(ctx, kind); err != nil || !changed {
		t.Fatalf("ResumeKind: %v, %v", changed, err)
	}
	revWait(t, "every rev.big ran after the resume", func() bool { return big.Load() == 40 })
	if st, err = client.FlowStatus(ctx); err != nil || len(st.Queues) != 0 {
		t.Fatalf("after the resume the queue should leave flow control: %+v, %v", st.Queues, err)
	}
}

// A handler's Throttle for a keyed job: only that key waits (no other job
// of the key starts before the retry-after), the other keys go on.
func TestReviewThrottleKeyedJobOnlyThatKey(t *testing.T) {
	pool := testdb.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const retry = 4 * time.Second
	g := newTenantGauge()
	var throttledAt atomic.Int64
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, j *workq.Job[revTenantArgs]) error {
		g.enter(j.LimitKey)
		defer g.leave(j.LimitKey)
		if j.LimitKey == "slow" && throttledAt.CompareAndSwap(0, time.Now().UnixNano()) {
			return workq.Throttle(retry)
		}
		return nil
	}))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers,
		Queues:            map[string]workq.QueueConfig{"tenants": {MaxWorkers: 4}},
		FetchPollInterval: 100 * time.Millisecond, Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	// One at a time per key, so the throttled key has no job in flight.
	if err := client.SetFlowLimit(ctx, workq.FlowLimit{Table: workq.TableJobRuns, Queue: "tenants", PerKey: true, Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	var params []workq.EnqueueParams
	for i := range 3 {
		params = append(params, workq.EnqueueParams{Args: revTenantArgs{Tenant: "slow", N: i}, Opts: &workq.EnqueueOpts{Queue: "tenants"}})
	}
	for i := range 10 {
		params = append(params, workq.EnqueueParams{Args: revTenantArgs{Tenant: "fast", N: i}, Opts: &workq.EnqueueOpts{Queue: "tenants"}})
	}
	if _, err := client.EnqueueMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	revStart(t, ctx, client)
	revWait(t, "every job ran", func() bool { return g.doneCount() == len(params)+1 })
	at := time.Unix(0, throttledAt.Load())
	g.mu.Lock()
	defer g.mu.Unlock()
	slow := g.startsAfter["slow"]
	if len(slow) != 4 {
		t.Fatalf("%d attempts of key slow, want 4 (one throttled)", len(slow))
	}
	for _, s := range slow {
		if s.After(at) && s.Before(at.Add(retry)) {
			t.Errorf("key slow started a job %s after its throttle of %s", s.Sub(at), retry)
		}
	}
	fastDuring := 0
	for _, s := range g.startsAfter["fast"] {
		if s.After(at) && s.Before(at.Add(retry)) {
			fastDuring++
		}
	}
	if last := g.startsAfter["fast"][len(g.startsAfter["fast"])-1]; fastDuring == 0 && last.After(at.Add(retry)) {
		t.Errorf("key fast did not go on during key slow's throttle")
	}
}

// Fairness: a big tenant's backlog enqueued first does not starve small
// tenants enqueued after it.
func TestReviewFairnessBigTenantDoesNotStarveSmall(t *testing.T) {
	pool := testdb.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var mu sync.Mutex
	bigDone, smallDone, bigAtSmallEnd := 0, 0, -1
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, j *workq.Job[revTenantArgs]) error {
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		if j.LimitKey == "big" {
			bigDone++
		} else if smallDone++; smallDone == 9 {
			bigAtSmallEnd = bigDone
		}
		return nil
	}))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers,
		Queues:            map[string]workq.QueueConfig{"tenants": {MaxWorkers: 2}},
		FetchPollInterval: 100 * time.Millisecond, Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.SetFairness(ctx, workq.QueueRef{Table: workq.TableJobRuns, Queue: "tenants"}, true); err != nil {
		t.Fatal(err)
	}
	var params []workq.EnqueueParams
	for i := range 300 {
		params = append(params, workq.EnqueueParams{Args: revTenantArgs{Tenant: "big", N: i}, Opts: &workq.EnqueueOpts{Queue: "tenants"}})
	}
	if _, err := client.EnqueueMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	params = nil
	for i := range 3 {
		for _, tenant := range []string{"s1", "s2", "s3"} {
			params = append(params, workq.EnqueueParams{Args: revTenantArgs{Tenant: tenant, N: i}, Opts: &workq.EnqueueOpts{Queue: "tenants"}})
		}
	}
	if _, err := client.EnqueueMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	revStart(t, ctx, client)
	revWait(t, "the small tenants ran", func() bool { mu.Lock(); defer mu.Unlock(); return smallDone == 9 })
	mu.Lock()
	defer mu.Unlock()
	if bigAtSmallEnd > 60 {
		t.Fatalf("the 9 small-tenant jobs ended after %d of the big tenant's: not fair", bigAtSmallEnd)
	}
}

// Removing a rule while workers run: the queue leaves flow control and its
// backlog runs at once.
func TestReviewRemoveRuleWhileRunning(t *testing.T) {
	pool := testdb.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var ran atomic.Int64
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, j *workq.Job[flowArgs]) error {
		ran.Add(1)
		return nil
	}))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers,
		Queues:            map[string]workq.QueueConfig{"slowq": {MaxWorkers: 5}},
		FetchPollInterval: 200 * time.Millisecond, Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	rule := workq.FlowLimit{Table: workq.TableJobRuns, Queue: "slowq", Rate: 1, Period: time.Hour}
	if err := client.SetFlowLimit(ctx, rule); err != nil {
		t.Fatal(err)
	}
	params := make([]workq.EnqueueParams, 20)
	for i := range params {
		params[i] = workq.EnqueueParams{Args: flowArgs{N: i}, Opts: &workq.EnqueueOpts{Queue: "slowq"}}
	}
	if _, err := client.EnqueueMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	revStart(t, ctx, client)
	revWait(t, "the first job ran", func() bool { return ran.Load() >= 1 })
	time.Sleep(300 * time.Millisecond)
	if n := ran.Load(); n != 1 {
		t.Fatalf("%d jobs ran under 1 per hour", n)
	}
	if removed, err := client.RemoveFlowLimit(ctx, rule); err != nil || !removed {
		t.Fatalf("RemoveFlowLimit: %v, %v", removed, err)
	}
	revWait(t, "the backlog ran after the rule was removed", func() bool { return ran.Load() == 20 })
	st, err := client.FlowStatus(ctx)
	if err != nil || len(st.Queues) != 0 || len(st.Limits) != 0 {
		t.Fatalf("FlowStatus after the removal: %+v, %v", st, err)
	}
}

// A sharded Client (two databases) with a rule per key: each key's jobs go
// to its shard, one at a time per key over both.
func TestReviewShardedPerKeyLimit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	g := newTenantGauge()
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, j *workq.Job[revTenantArgs]) error {
		g.enter(j.LimitKey)
		defer g.leave(j.LimitKey)
		time.Sleep(20 * time.Millisecond)
		return nil
	}))
	client, err := workq.NewShardedClient([]workq.Shard{{Name: "a", Pool: testdb.Pool(t)}, {Name: "b", Pool: testdb.Pool(t)}},
		workq.Config{Workers: workers, Queues: map[string]workq.QueueConfig{"tenants": {MaxWorkers: 4}},
			FetchPollInterval: 100 * time.Millisecond, Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.SetFlowLimit(ctx, workq.FlowLimit{Table: workq.TableJobRuns, Queue: "tenants", PerKey: true, Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	var params []workq.EnqueueParams
	for i := range 5 {
		for k := range 6 {
			params = append(params, workq.EnqueueParams{Args: revTenantArgs{Tenant: fmt.Sprintf("t%d", k), N: i}, Opts: &workq.EnqueueOpts{Queue: "tenants"}})
		}
	}
	if _, err := client.EnqueueMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	revStart(t, ctx, client)
	revWait(t, "every job ran", func() bool { return g.doneCount() == len(params) })
	st, err := client.FlowStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Limits) != 2 {
		t.Errorf("FlowStatus.Limits: %d, want the rule on each of 2 shards: %+v", len(st.Limits), st.Limits)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.maxOne != 1 {
		t.Fatalf("%d jobs of one key ran at once on a sharded Client", g.maxOne)
	}
}

// A Client in another schema (Config.Schema): rules, fairness, pauses and
// the flow claim all live in its schema; the default schema holds none.
func TestReviewFlowInOtherSchema(t *testing.T) {
	pool := testdb.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	m, err := migrate.New(pool, migrate.Options{Schema: "wq_flowrev"})
	if err == nil {
		_, err = m.Up(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	g := newTenantGauge()
	throttled := atomic.Bool{}
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, j *workq.Job[revTenantArgs]) error {
		g.enter(j.LimitKey)
		defer g.leave(j.LimitKey)
		if j.LimitKey == "t0" && throttled.CompareAndSwap(false, true) {
			return workq.Throttle(100 * time.Millisecond)
		}
		time.Sleep(10 * time.Millisecond)
		return nil
	}))
	client, err := workq.NewClient(pool, workq.Config{Schema: "wq_flowrev", Workers: workers,
		Queues:            map[string]workq.QueueConfig{"tenants": {MaxWorkers: 4}},
		FlowLimits:        []workq.FlowLimit{{Table: workq.TableJobRuns, Queue: "tenants", PerKey: true, Concurrency: 1, Rate: 50}},
		FetchPollInterval: 100 * time.Millisecond, Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.PauseKind(ctx, workq.KindRef{Table: workq.TableJobRuns, Queue: "other", Kind: "x"}, &workq.ActionOpts{Actor: "review"}); err != nil {
		t.Fatal(err)
	}
	var params []workq.EnqueueParams
	for i := range 4 {
		for k := range 3 {
			params = append(params, workq.EnqueueParams{Args: revTenantArgs{Tenant: fmt.Sprintf("t%d", k), N: i}, Opts: &workq.EnqueueOpts{Queue: "tenants"}})
		}
	}
	if _, err := client.EnqueueMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	revStart(t, ctx, client)
	revWait(t, "every job ran", func() bool { return g.doneCount() == len(params)+1 })
	var inDefault, inOwn int
	if err := pool.QueryRow(ctx, `select (select count(*) from workq.flow_queues) + (select count(*) from workq.flow_limits)
		+ (select count(*) from workq.flow_state) + (select count(*) from workq.flow_kind_pauses)`).Scan(&inDefault); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `select (select count(*) from wq_flowrev.flow_limits) + (select count(*) from wq_flowrev.flow_kind_pauses)`).Scan(&inOwn); err != nil {
		t.Fatal(err)
	}
	if inDefault != 0 || inOwn != 2 {
		t.Fatalf("flow rows: %d in schema workq (want 0), %d rules and pauses in wq_flowrev (want 2)", inDefault, inOwn)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.maxOne != 1 {
		t.Fatalf("%d jobs of one key at once in schema wq_flowrev", g.maxOne)
	}
}

// Bad rules are refused with ErrInvalid and write nothing; the numbers'
// edges (int32, sub-millisecond and 24h+ periods) are checked.
func TestReviewFlowLimitEdges(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	client, err := workq.NewClient(pool, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	q := workq.FlowLimit{Table: workq.TableJobRuns, Queue: "edges"}
	bad := map[string]workq.FlowLimit{}
	l := q
	l.Rate = 1 << 31
	bad["rate above int32"] = l
	l = q
	l.Concurrency = 1 << 31
	bad["concurrency above int32"] = l
	l = q
	l.Rate, l.Period = 1, 500*time.Microsecond
	bad["sub-ms period"] = l
	l = q
	l.Rate, l.Period = 1, 25*time.Hour
	bad["period above a day"] = l
	l = q
	l.Rate = -1
	bad["negative rate"] = l
	l = q
	l.Concurrency, l.Period = 1, time.Second
	bad["period without a rate"] = l
	l = q
	l.PerKey, l.Kind, l.Concurrency = true, "k", 1
	bad["per key and a kind"] = l
	l = q
	l.Table, l.PerKey, l.Concurrency = workq.TableInbox, true, 1
	bad["per key on the inbox"] = l
	l = q
	l.Kind, l.Concurrency = "a\x00b", 1
	bad["NUL in kind"] = l
	for name, l := range bad {
		if err := client.SetFlowLimit(ctx, l); !errors.Is(err, workq.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	st, err := client.FlowStatus(ctx)
	if err != nil || len(st.Queues) != 0 {
		t.Fatalf("refused rules wrote: %+v, %v", st.Queues, err)
	}
	l = q
	l.Rate, l.Concurrency, l.Period = 1<<31-1, 1<<31-1, 24*time.Hour
	if err := client.SetFlowLimit(ctx, l); err != nil {
		t.Fatalf("the largest rule: %v", err)
	}
	if st, err = client.FlowStatus(ctx); err != nil || len(st.Limits) != 1 || st.Limits[0].Rate != 1<<31-1 || st.Limits[0].Period != 24*time.Hour {
		t.Fatalf("FlowStatus of the largest rule: %+v, %v", st.Limits, err)
	}
}

// revMaxInWindow is the most start times (sorted) in any window of period.
func revMaxInWindow(at []time.Time, period time.Duration) int {
	most := 0
	for i := range at {
		n := 0
		for j := i; j < len(at) && at[j].Sub(at[i]) < period; j++ {
			n++
		}
		most = max(most, n)
	}
	return most
}

// revStarts reads the run archive's start times of the items ids.
func revStarts(t *testing.T, ctx context.Context, pool interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, table string, ids []int64) []time.Time {
	t.Helper()
	rows, err := pool.Query(ctx, `select started_at from workq.runs_all where work_table = $1 and item_id = any($2) order by started_at`, table, ids)
	if err != nil {
		t.Fatal(err)
	}
	at, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// A rate per key with a backlog: each key runs close to its rate and never
// above it in any sliding window of the run archive's started_at, and the
// keys are counted apart (two keys together run at twice the rate).
func TestReviewPerKeyRateFromArchive(t *testing.T) {
	const (
		rate   = 4
		period = 400 * time.Millisecond
		each   = 16
	)
	pool := testdb.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var ran atomic.Int64
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, j *workq.Job[revTenantArgs]) error {
		ran.Add(1)
		return nil
	}))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers,
		Queues:            map[string]workq.QueueConfig{"tenants": {MaxWorkers: 8}},
		FetchPollInterval: time.Hour, Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.SetFlowLimit(ctx, workq.FlowLimit{Table: workq.TableJobRuns, Queue: "tenants", PerKey: true, Rate: rate, Period: period}); err != nil {
		t.Fatal(err)
	}
	ids := map[string][]int64{}
	for _, tenant := range []string{"a", "b"} {
		params := make([]workq.EnqueueParams, each)
		for i := range params {
			params[i] = workq.EnqueueParams{Args: revTenantArgs{Tenant: tenant, N: i}, Opts: &workq.EnqueueOpts{Queue: "tenants"}}
		}
		rs, err := client.EnqueueMany(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			ids[tenant] = append(ids[tenant], r.ID)
		}
	}
	begin := time.Now()
	revStart(t, ctx, client)
	revWait(t, "every job ran", func() bool { return ran.Load() == 2*each })
	took := time.Since(begin)
	for tenant, ids := range ids {
		var at []time.Time
		revWait(t, "the archive has every attempt", func() bool { at = revStarts(t, ctx, pool, "job_runs", ids); return len(at) == each })
		if n := revMaxInWindow(at, period); n > rate {
			t.Errorf("key %s: %d starts in a window of %s, above its rate %d", tenant, n, period, rate)
		}
	}
	// Serially the 16 of one key need at least 3 full windows; both keys
	// together would need 7 if they shared one count.
	if floor := 3 * period; took < floor {
		t.Errorf("the run took %s, less than the rate allows (%s)", took, floor)
	}
	if took > 20*period {
		t.Logf("slow: %s for what the rate allows in about %s (a loaded machine?)", took, 4*period)
	}
}

// The outbox with a queue rate limit: the relay delivers at the rate,
// never above it in any window of the archive.
func TestReviewOutboxQueueRate(t *testing.T) {
	const (
		rate   = 5
		period = 500 * time.Millisecond
		n      = 20
	)
	pool := testdb.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var got atomic.Int64
	workers := workq.NewWorkers()
	if err := workq.HandleOutbox(workers, "rev.out", func(ctx context.Context, m *workq.Message[revSmallArgs]) error {
		got.Add(1)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	client, err := workq.NewClient(pool, workq.Config{Workers: workers, FetchPollInterval: time.Hour,
		Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.SetFlowLimit(ctx, workq.FlowLimit{Table: workq.TableOutbox, Queue: "default", Rate: rate, Period: period}); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for i := range n {
		s, err := client.Send(ctx, outbox.Message{Topic: "rev.out", Payload: revSmallArgs{N: i}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID)
	}
	revStart(t, ctx, client)
	revWait(t, "every message was delivered", func() bool { return got.Load() >= n })
	var at []time.Time
	revWait(t, "the archive has every attempt", func() bool { at = revStarts(t, ctx, pool, "outbox", ids); return len(at) == n })
	if m := revMaxInWindow(at, period); m > rate {
		t.Fatalf("%d outbox deliveries in a window of %s, above the rate %d", m, period, rate)
	}
	if span := at[len(at)-1].Sub(at[0]); span < 3*period {
		t.Fatalf("%d deliveries in %s: faster than %d per %s", n, span, rate, period)
	}
}

// Two Clients (two processes) claim one queue with a rule per key and a
// rule per kind at once: the flow claims take turns, so neither limit is
// ever exceeded across them (seen in the handlers of both).
func TestReviewTwoClientsShareLimits(t *testing.T) {
	pool := testdb.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	g := newTenantGauge()
	var bigNow, bigMax atomic.Int64
	var bigDone atomic.Int64
	newClient := func() *workq.Client {
		workers := workq.NewWorkers()
		workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, j *workq.Job[revTenantArgs]) error {
			g.enter(j.LimitKey)
			defer g.leave(j.LimitKey)
			time.Sleep(5 * time.Millisecond)
			return nil
		}))
		workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, j *workq.Job[revBigArgs]) error {
			n := bigNow.Add(1)
			for m := bigMax.Load(); n > m && !bigMax.CompareAndSwap(m, n); m = bigMax.Load() {
			}
			time.Sleep(5 * time.Millisecond)
			bigNow.Add(-1)
			bigDone.Add(1)
			return nil
		}))
		c, err := workq.NewClient(pool, workq.Config{Workers: workers,
			Queues:            map[string]workq.QueueConfig{"shared": {MaxWorkers: 6}},
			FetchPollInterval: 100 * time.Millisecond, Maintenance: workq.MaintenanceConfig{Disabled: true}})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := newClient(), newClient()
	if err := a.SetFlowLimit(ctx, workq.FlowLimit{Table: workq.TableJobRuns, Queue: "shared", PerKey: true, Concurrency: 2}); err != nil {
		t.Fatal(err)
	}
	if err := a.SetFlowLimit(ctx, workq.FlowLimit{Table: workq.TableJobRuns, Queue: "shared", Kind: "rev.big", Concurrency: 3}); err != nil {
		t.Fatal(err)
	}
	var params []workq.EnqueueParams
	for i := range 40 {
		for k := range 4 {
			params = append(params, workq.EnqueueParams{Args: revTenantArgs{Tenant: fmt.Sprintf("t%d", k), N: i}, Opts: &workq.EnqueueOpts{Queue: "shared"}})
		}
		params = append(params, workq.EnqueueParams{Args: revBigArgs{N: i}, Opts: &workq.EnqueueOpts{Queue: "shared"}})
	}
	if _, err := a.EnqueueMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	revStart(t, ctx, a)
	revStart(t, ctx, b)
	revWait(t, "every job ran", func() bool { return g.doneCount() == 160 && bigDone.Load() == 40 })
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.maxOne > 2 {
		t.Errorf("%d jobs of one key at once over two Clients, limit 2", g.maxOne)
	}
	if m := bigMax.Load(); m > 3 {
		t.Errorf("%d jobs of kind rev.big at once over two Clients, limit 3", m)
	}
}

// Kinds of the other tables: the inbox's is the source (a paused source
// holds only its messages; the handler is chosen by topic), the timers'
// the topic (a topic at concurrency 1 runs one timer at a time).
func TestReviewInboxSourceAndTimerTopic(t *testing.T) {
	pool := testdb.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var crm, shop, timerNow, timerMax, timerDone atomic.Int64
	workers := workq.NewWorkers()
	if err := workq.HandleInbox(workers, "rev.in", func(ctx context.Context, m *workq.Message[revSmallArgs]) error {
		if m.Payload.N < 100 {
			crm.Add(1)
		} else {
			shop.Add(1)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := workq.HandleTimer(workers, "rev.timer", func(ctx context.Context, m *workq.Message[revSmallArgs]) error {
		n := timerNow.Add(1)
		for mx := timerMax.Load(); n > mx && !timerMax.CompareAndSwap(mx, n); mx = timerMax.Load() {
		}
		time.Sleep(10 * time.Millisecond)
		timerNow.Add(-1)
		timerDone.Add(1)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	client, err := workq.NewClient(pool, workq.Config{Workers: workers, MaxWorkers: 4, FetchPollInterval: 100 * time.Millisecond,
		FlowLimits:  []workq.FlowLimit{{Table: workq.TableTimers, Queue: "default", Kind: "rev.timer", Concurrency: 1}},
		Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	src := workq.KindRef{Table: workq.TableInbox, Queue: "default", Kind: "crm"}
	if _, err := client.PauseKind(ctx, src, &workq.ActionOpts{Actor: "review"}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := client.Receive(ctx, inbox.Message{Source: "crm", MessageID: fmt.Sprint("c", i), Topic: "rev.in", Payload: revSmallArgs{N: i}}); err != nil {
			t.Fatal(err)
		}
		if _, err := client.Receive(ctx, inbox.Message{Source: "shop", MessageID: fmt.Sprint("s", i), Topic: "rev.in", Payload: revSmallArgs{N: 100 + i}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 8 {
		if _, err := client.ScheduleTimer(ctx, timers.Timer{Topic: "rev.timer", DueTime: time.Now().Add(-time.Second), Payload: revSmallArgs{N: i}}); err != nil {
			t.Fatal(err)
		}
	}
	revStart(t, ctx, client)
	revWait(t, "the shop's messages and the timers ran", func() bool { return shop.Load() == 5 && timerDone.Load() == 8 })
	if n := crm.Load(); n != 0 {
		t.Fatalf("%d messages of the paused source crm ran", n)
	}
	if m := timerMax.Load(); m != 1 {
		t.Fatalf("%d timers of topic rev.timer at once under concurrency 1", m)
	}
	if _, err := client.ResumeKind(ctx, src); err != nil {
		t.Fatal(err)
	}
	revWait(t, "the crm's messages ran after the resume", func() bool { return crm.Load() == 5 })
}
