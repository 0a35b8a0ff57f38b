package shardlimit_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	neturl "net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/shardlimit"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/testutil"
)

const queue = "lim"

func openPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 12
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// viaProxy returns url through a TCP proxy that the test can cut.
func viaProxy(t *testing.T, raw string) (*testutil.Proxy, string) {
	t.Helper()
	u, err := neturl.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if u.Port() == "" || strings.HasPrefix(u.Hostname(), "/") {
		t.Fatalf("the partition test cuts a TCP connection; the test server must be at host:port, not %q (set TEST_DATABASE_URL)", u.Host)
	}
	px := testutil.NewProxy(t, u.Host)
	u.Host = px.Addr()
	t.Cleanup(px.Restore)
	return px, u.String()
}

func enqueue(t *testing.T, db *pgxpool.Pool, n int) {
	t.Helper()
	if _, err := db.Exec(context.Background(),
		`insert into workq.job_runs (queue, kind) select $1, 'sleep' from generate_series(1, $2)`, queue, n); err != nil {
		t.Fatal(err)
	}
}

func backlog(t *testing.T, db *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), `select count(*) from workq.job_runs_all where queue = $1 and status < 2`, queue).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func budgetOf(ctx context.Context, db *pgxpool.Pool) (int, error) {
	var b int
	err := db.QueryRow(ctx, `select coalesce((select max_in_progress from workq.queue_limits where work_table = 'job_runs' and queue = $1), -1)`, queue).Scan(&b)
	return b, err
}

// work runs n workers on db until ctx ends: each claims one item, works it
// for 30 to 90 ms and acks it.
func work(ctx context.Context, wg *sync.WaitGroup, db *pgxpool.Pool, name string, n int) {
	e := lease.New(db, lease.JobRuns)
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("%s-%d", name, w)
			for ctx.Err() == nil {
				c, err := e.Claim(ctx, lease.ClaimParams{Queue: queue, Max: 1, Lease: 5 * time.Second, WorkerID: id})
				if err != nil || len(c.Items) == 0 {
					sleep(ctx, 20*time.Millisecond)
					continue
				}
				sleep(ctx, time.Duration(30+rand.IntN(60))*time.Millisecond)
				_ = e.Ack(context.WithoutCancel(ctx), c.Token, c.Items[0].ID)
			}
		}()
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// sampler reads the in-progress rows of both shards over and over and
// keeps the largest sum it could prove held at one instant. Both databases
// are on one server, so they share a clock: it counts shard x's unexpired
// in-progress rows at the instant t its statement began, then shard y's
// rows that are in progress now and were claimed before t. A lease that is
// valid now and began before t was valid at t (an expired lease is never
// revived), so the sum is a lower bound of the count at t: a sum above W
// is a real breach. The order of the two shards alternates.
type sampler struct {
	max, samples, errs atomic.Int64
}

func (s *sampler) run(ctx context.Context, dbs [2]*pgxpool.Pool) {
	for i := 0; ctx.Err() == nil; i++ {
		x, y := dbs[i%2], dbs[(i+1)%2]
		var at time.Time
		var a, b int64
		err := x.QueryRow(ctx, `select statement_timestamp(), count(*) from workq.job_runs_all
			where queue = $1 and status = 1 and locked_until > statement_timestamp()`, queue).Scan(&at, &a)
		if err == nil {
			err = y.QueryRow(ctx, `select count(*) from workq.job_runs_all
				where queue = $1 and status = 1 and locked_until > statement_timestamp() and claimed_at <= $2`, queue, at).Scan(&b)
		}
		if err != nil {
			if ctx.Err() == nil {
				s.errs.Add(1)
			}
			continue
		}
		s.samples.Add(1)
		for {
			m := s.max.Load()
			if a+b <= m || s.max.CompareAndSwap(m, a+b) {
				break
			}
		}
	}
}

// budgetSampler reads the budget rows of both shards over and over and
// keeps the largest sum that held at one instant, and a's largest budget.
// The two shards are separate databases, so no snapshot covers both: it
// reads shard y's row, then shard x's, then y's again, and counts the pair
// only when both reads of y returned the same row version (the same xmin):
// no write to y committed between the two reads, so y's budget was the
// same throughout the read of x. A sum above W is then a real breach.
// (Comparing y's updated_at with the time of x's read is not exact:
// updated_at is now(), the writing transaction's start, and a write that
// began before that time may commit after it.) The order alternates.
type budgetSampler struct {
	maxA, maxSum, samples, skipped atomic.Int64
}

func (s *budgetSampler) run(ctx context.Context, t *testing.T, w int64, dbs [2]*pgxpool.Pool) {
	const q = `select max_in_progress, xmin::text, updated_at from workq.queue_limits where work_table = 'job_runs' and queue = $1`
	for i := 0; ctx.Err() == nil; i++ {
		x, y := i%2, (i+1)%2
		var bx, by, by2 int64
		var vy, vx, vy2 string
		var ux, uy time.Time
		var at time.Time
		err := dbs[y].QueryRow(ctx, q, queue).Scan(&by, &vy, &uy)
		if err == nil {
			err = dbs[x].QueryRow(ctx, `select max_in_progress, xmin::text, updated_at, statement_timestamp() from workq.queue_limits where work_table = 'job_runs' and queue = $1`, queue).Scan(&bx, &vx, &ux, &at)
		}
		if err == nil {
			err = dbs[y].QueryRow(ctx, q, queue).Scan(&by2, &vy2, new(time.Time))
		}
		if err != nil {
			time.Sleep(2 * time.Millisecond)
			continue
		}
		exact := vy == vy2
		if exact && bx+by > w {
			// Enough to tell, from the leader's log, which writes these were.
			t.Logf("budgets summed above W at %s: shard %d budget %d (xmin %s, updated_at %s), shard %d budget %d (xmin %s, updated_at %s)",
				at.Format("15:04:05.000000"), x, bx, vx, ux.Format("15:04:05.000000"), y, by, vy, uy.Format("15:04:05.000000"))
		}
		if !exact {
			s.skipped.Add(1)
			time.Sleep(2 * time.Millisecond)
			continue
		}
		s.samples.Add(1)
		ba := bx
		if x == 1 {
			ba = by
		}
		for v := s.maxA.Load(); ba > v && !s.maxA.CompareAndSwap(v, ba); v = s.maxA.Load() {
		}
		for v := s.maxSum.Load(); bx+by > v && !s.maxSum.CompareAndSwap(v, bx+by); v = s.maxSum.Load() {
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func logger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.DiscardHandler)
}

func await(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: still not %s (%s)", d, what, state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRebalancerTwoShards runs a Rebalancer with W=4 over two shard
// databases, shard b reached by the leader through a proxy, and four
// workers on each shard (each shard alone could take all of W). The
// backlog is 80/20. A sampler that sums both shards' in-progress rows never
// sees more than W; both backlogs drain. Then, with a new backlog on both,
// the leader's link to b is cut: b's budget stays in force and its workers
// go on under it, and a's budget never rises above W - b's budget; after
// the link is restored, b (drained) gives its budget back to a.
func TestRebalancerTwoShards(t *testing.T) {
	const w = 4
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	urlA, urlB := testdb.URL(t), testdb.URL(t)
	a, b := openPool(t, urlA), openPool(t, urlB)
	px, proxiedB := viaProxy(t, urlB)
	leaderB := openPool(t, proxiedB)
	// Budgets start at 0: nothing is claimed before the leader allots.
	for _, db := range []*pgxpool.Pool{a, b} {
		if err := lease.SetLimit(ctx, db, lease.JobRuns, queue, 0); err != nil {
			t.Fatal(err)
		}
	}
	enqueue(t, a, 80)
	enqueue(t, b, 20)

	r, err := shardlimit.New([]shardlimit.Shard{{Name: "a", DB: a}, {Name: "b", DB: leaderB}}, shardlimit.Options{
		Limits:       []shardlimit.Limit{{Table: lease.JobRuns, Queue: queue, W: w}},
		Interval:     100 * time.Millisecond,
		ShardTimeout: 500 * time.Millisecond,
		LockTTL:      3 * time.Second,
		Logger:       logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	rctx, stopR := context.WithCancel(ctx)
	defer stopR()
	wg.Add(1)
	go func() { defer wg.Done(); _ = r.Run(rctx) }()

	var s sampler
	sctx, stopS := context.WithCancel(ctx)
	defer stopS()
	wg.Add(1)
	go func() { defer wg.Done(); s.run(sctx, [2]*pgxpool.Pool{a, b}) }()

	// The budgets' sum, read straight from both shards, and a's largest
	// budget: see budgetSampler.
	var bs budgetSampler
	wg.Add(1)
	go func() { defer wg.Done(); bs.run(sctx, t, w, [2]*pgxpool.Pool{a, b}) }()
	wctx, stopW := context.WithCancel(ctx)
	defer stopW()
	work(wctx, &wg, a, "a", 4)
	work(wctx, &wg, b, "b", 4)

	await(t, 60*time.Second, "drained", func() (bool, string) {
		na, nb := backlog(t, a), backlog(t, b)
		return na == 0 && nb == 0, fmt.Sprintf("a %d, b %d left", na, nb)
	})
	if bs.maxA.Load() < 3 {
		t.Errorf("a's budget never rose above %d: b's share was not moved to the hot shard", bs.maxA.Load())
	}

	// The partition: the leader cannot reach b, whose workers go on
	// under the budget b had; a must stay within W - that budget.
	enqueue(t, b, 60)
	var frozen int
	await(t, 10*time.Second, "b's budget raised for its backlog", func() (bool, string) {
		ba, _ := budgetOf(ctx, a)
		bb, _ := budgetOf(ctx, b)
		frozen = bb
		return bb >= w-1, fmt.Sprintf("a %d, b %d", ba, bb)
	})
	px.Cut()
	time.Sleep(time.Second) // several rounds: the leader now finds b unreachable
	if bb, err := budgetOf(ctx, b); err != nil || bb != frozen {
		t.Fatalf("b's budget moved to %d (err %v) while the leader could not reach it; it was %d", bb, err, frozen)
	}
	enqueue(t, a, 60)
	cutRounds := 0
	await(t, 60*time.Second, "drained during the cut", func() (bool, string) {
		ba, errA := budgetOf(ctx, a)
		bb, errB := budgetOf(ctx, b)
		if errA != nil || errB != nil {
			t.Fatal(errA, errB)
		}
		if bb != frozen || ba > w-frozen {
			t.Fatalf("during the cut: a's budget %d, b's %d; b's must stay %d and a's at most %d", ba, bb, frozen, w-frozen)
		}
		cutRounds++
		na, nb := backlog(t, a), backlog(t, b)
		return na == 0 && nb == 0, fmt.Sprintf("a %d, b %d left", na, nb)
	})
	px.Restore()
	// b is idle again: the leader gives a everything but b's floor of 1.
	enqueue(t, a, 60)
	await(t, 20*time.Second, "a raised to W-1 after the link came back", func() (bool, string) {
		ba, _ := budgetOf(ctx, a)
		bb, _ := budgetOf(ctx, b)
		return ba == w-1 && bb == 1, fmt.Sprintf("a %d, b %d", ba, bb)
	})
	await(t, 60*time.Second, "drained", func() (bool, string) {
		n := backlog(t, a)
		return n == 0, fmt.Sprintf("a %d left", n)
	})
	stopW()
	stopR()
	stopS()
	wg.Wait()
	t.Logf("W=%d over two shards: the sampler read %d times (%d errors), at most %d in progress at one instant; the budgets summed to at most %d (%d pairs read, %d skipped as torn); a's budget reached %d; b's stayed %d through %d checks of the cut",
		w, s.samples.Load(), s.errs.Load(), s.max.Load(), bs.maxSum.Load(), bs.samples.Load(), bs.skipped.Load(), bs.maxA.Load(), frozen, cutRounds)
	if s.max.Load() > w {
		t.Errorf("the sampler saw %d items in progress at one instant; W is %d", s.max.Load(), w)
	}
	if bs.maxSum.Load() > w {
		t.Errorf("the budgets summed to %d; W is %d", bs.maxSum.Load(), w)
	}
	if s.max.Load() < w-1 {
		t.Errorf("the sampler never saw more than %d in progress: the budgets were never what held the workers back", s.max.Load())
	}
}

// A budget of 0 claims nothing (a shard without demand when W is smaller
// than the number of shards), and a budget lowered below the in-progress
// count claims nothing until the count is below it: the Rebalancer relies
// on both.
func TestZeroBudgetClaimsNothing(t *testing.T) {
	ctx := context.Background()
	db := openPool(t, testdb.URL(t))
	if err := lease.SetLimit(ctx, db, lease.JobRuns, queue, 0); err != nil {
		t.Fatal(err)
	}
	enqueue(t, db, 5)
	e := lease.New(db, lease.JobRuns)
	c, err := e.Claim(ctx, lease.ClaimParams{Queue: queue, Max: 5, Lease: time.Minute, WorkerID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Items) != 0 {
		t.Fatalf("budget 0: claimed %d items", len(c.Items))
	}
	if err := lease.SetLimit(ctx, db, lease.JobRuns, queue, 2); err != nil {
		t.Fatal(err)
	}
	if c, err = e.Claim(ctx, lease.ClaimParams{Queue: queue, Max: 5, Lease: time.Minute, WorkerID: "t"}); err != nil || len(c.Items) != 2 {
		t.Fatalf("budget 2: claimed %d items, err %v", len(c.Items), err)
	}
	// Lowered below the in-progress count: nothing more until it is below.
	if err := lease.SetLimit(ctx, db, lease.JobRuns, queue, 1); err != nil {
		t.Fatal(err)
	}
	if c2, err := e.Claim(ctx, lease.ClaimParams{Queue: queue, Max: 5, Lease: time.Minute, WorkerID: "t"}); err != nil || len(c2.Items) != 0 {
		t.Fatalf("budget 1 with 2 in progress: claimed %d items, err %v", len(c2.Items), err)
	}
}

// The Rebalancer reads and writes the budgets of every work table: one
// shard, a limit on each table, every budget becomes W.
func TestRebalancerEveryTable(t *testing.T) {
	db := openPool(t, testdb.URL(t))
	var limits []shardlimit.Limit
	for _, tb := range []lease.Table{lease.JobRuns, lease.Outbox, lease.Inbox, lease.Timers} {
		limits = append(limits, shardlimit.Limit{Table: tb, Queue: queue, W: 3})
	}
	var logs strings.Builder
	var mu sync.Mutex
	r, err := shardlimit.New([]shardlimit.Shard{{Name: "only", DB: db}}, shardlimit.Options{
		Limits: limits, Interval: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			return logs.Write(p)
		}), &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	await(t, 20*time.Second, "every budget 3", func() (bool, string) {
		got := r.Budgets()
		for _, b := range got {
			if !b.Known || b.Budget != 3 {
				return false, fmt.Sprintf("%+v", got)
			}
		}
		return true, ""
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if logs.Len() > 0 {
		t.Errorf("warnings:\n%s", logs.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestNewRejects(t *testing.T) {
	db := openPool(t, testdb.URL(t))
	ok := []shardlimit.Limit{{Table: lease.JobRuns, Queue: queue, W: 1}}
	for _, tc := range []struct {
		name   string
		shards []shardlimit.Shard
		o      shardlimit.Options
	}{
		{"no shards", nil, shardlimit.Options{Limits: ok}},
		{"no limits", []shardlimit.Shard{{Name: "a", DB: db}}, shardlimit.Options{}},
		{"no database", []shardlimit.Shard{{Name: "a"}}, shardlimit.Options{Limits: ok}},
		{"duplicate shard names", []shardlimit.Shard{{Name: "a", DB: db}, {Name: "a", DB: db}}, shardlimit.Options{Limits: ok}},
		{"negative W", []shardlimit.Shard{{Name: "a", DB: db}}, shardlimit.Options{Limits: []shardlimit.Limit{{Table: lease.JobRuns, Queue: queue, W: -1}}}},
		{"bad queue", []shardlimit.Shard{{Name: "a", DB: db}}, shardlimit.Options{Limits: []shardlimit.Limit{{Table: lease.JobRuns, Queue: "a b", W: 1}}}},
		{"bad table", []shardlimit.Shard{{Name: "a", DB: db}}, shardlimit.Options{Limits: []shardlimit.Limit{{Table: "nope", Queue: queue, W: 1}}}},
		{"limit twice", []shardlimit.Shard{{Name: "a", DB: db}}, shardlimit.Options{Limits: append(ok, ok...)}},
		{"negative interval", []shardlimit.Shard{{Name: "a", DB: db}}, shardlimit.Options{Limits: ok, Interval: -time.Second}},
	} {
		if _, err := shardlimit.New(tc.shards, tc.o); !errors.Is(err, shardlimit.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", tc.name, err)
		}
	}
}

// A genuinely newer leader still fences out an older one. The leader's
// lock is taken over behind its back (as when it stalls past its TTL and
// another process acquires), and the newer leader has read both shards,
// raising their fences to its token. The old leader writes nothing more
// and cannot advance past the fences, since it no longer holds the lock:
// it steps down and waits for the lock. Once the newer leader is gone, it
// leads again with a greater token and moves the budgets.
func TestRebalancerFenced(t *testing.T) {
	ctx := context.Background()
	a, b := openPool(t, testdb.URL(t)), openPool(t, testdb.URL(t))
	r, _ := runRebalancer(t, []shardlimit.Shard{{Name: "a", DB: a}, {Name: "b", DB: b}}, 4, "old")
	await(t, 20*time.Second, "idle budgets 2 and 2", func() (bool, string) {
		ba, _ := budgetOf(ctx, a)
		bb, _ := budgetOf(ctx, b)
		return ba == 2 && bb == 2, fmt.Sprintf("a %d, b %d", ba, bb)
	})
	oldToken, _ := r.Leading()
	var newer int64
	if err := a.QueryRow(ctx, `update workq.workq_locks set token = token + 1, owner = 'newer', expires_at = now() + interval '1 hour'
		where name = 'workq.shardlimit' returning token`).Scan(&newer); err != nil {
		t.Fatal(err)
	}
	for _, db := range []*pgxpool.Pool{a, b} {
		if _, err := db.Exec(ctx, `update workq.workq_locks set token = $1, owner = 'newer' where name = 'workq.shardlimit.fence'`, newer); err != nil {
			t.Fatal(err)
		}
	}
	// Demand the old leader would act on: b's backlog.
	enqueue(t, b, 10)
	await(t, 10*time.Second, "the old leader stepping down", func() (bool, string) {
		tok, ok := r.Leading()
		return !ok, fmt.Sprintf("still leading with token %d", tok)
	})
	// It cannot lead again while the newer leader holds the lock, so what
	// is on the shards now is final until then.
	for name, db := range map[string]*pgxpool.Pool{"a": a, "b": b} {
		if got := queryInt(t, db, `select max_in_progress from workq.queue_limits`); got != 2 {
			t.Errorf("the fenced-out leader (token %d) set %s's budget to %d", oldToken, name, got)
		}
		if f := tokenOf(t, db, "workq.shardlimit.fence"); f != newer {
			t.Errorf("%s's fence is %d; the fenced-out leader must not move it from the newer leader's %d", name, f, newer)
		}
	}
	if lt := tokenOf(t, a, "workq.shardlimit"); lt != newer {
		t.Fatalf("the lock token is %d: the fenced-out leader advanced it from the newer leader's %d", lt, newer)
	}
	if _, err := a.Exec(ctx, `update workq.workq_locks set expires_at = now() where name = 'workq.shardlimit'`); err != nil {
		t.Fatal(err)
	}
	await(t, 20*time.Second, "budgets moved once the newer leader is gone", func() (bool, string) {
		ba, _ := budgetOf(ctx, a)
		bb, _ := budgetOf(ctx, b)
		return ba == 1 && bb == 3, fmt.Sprintf("a %d, b %d", ba, bb)
	})
	if tok, ok := r.Leading(); !ok || tok <= newer {
		t.Fatalf("leading %v with token %d; want a token above the newer leader's %d", ok, tok, newer)
	}
}

func queryInt(t *testing.T, db *pgxpool.Pool, sql string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), sql).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Two Rebalancers over the same shards: one leads; when it stops, the
// other takes over and moves the budgets.
func TestRebalancerFailover(t *testing.T) {
	ctx := context.Background()
	a, b := openPool(t, testdb.URL(t)), openPool(t, testdb.URL(t))
	shards := []shardlimit.Shard{{Name: "a", DB: a}, {Name: "b", DB: b}}
	var rs [2]*shardlimit.Rebalancer
	var stops [2]context.CancelFunc
	var dones [2]chan error
	for i := range rs {
		r, err := shardlimit.New(shards, shardlimit.Options{
			Limits: []shardlimit.Limit{{Table: lease.JobRuns, Queue: queue, W: 4}}, Interval: 50 * time.Millisecond,
			LockTTL: 2 * time.Second, Owner: fmt.Sprintf("r%d", i),
		})
		if err != nil {
			t.Fatal(err)
		}
		rs[i] = r
		var rctx context.Context
		rctx, stops[i] = context.WithCancel(ctx)
		dones[i] = make(chan error, 1)
		go func() { dones[i] <- r.Run(rctx) }()
	}
	leader := -1
	await(t, 10*time.Second, "a leader", func() (bool, string) {
		for i, r := range rs {
			if _, ok := r.Leading(); ok {
				leader = i
				return true, ""
			}
		}
		return false, "none"
	})
	await(t, 10*time.Second, "idle budgets 2 and 2", func() (bool, string) {
		ba, _ := budgetOf(ctx, a)
		bb, _ := budgetOf(ctx, b)
		return ba == 2 && bb == 2, fmt.Sprintf("a %d, b %d", ba, bb)
	})
	stops[leader]()
	if err := <-dones[leader]; err != nil {
		t.Fatal(err)
	}
	other := rs[1-leader]
	await(t, 10*time.Second, "the other leading", func() (bool, string) {
		_, ok := other.Leading()
		return ok, "not yet"
	})
	enqueue(t, b, 10)
	await(t, 10*time.Second, "b raised for its backlog by the new leader", func() (bool, string) {
		ba, _ := budgetOf(ctx, a)
		bb, _ := budgetOf(ctx, b)
		return ba == 1 && bb == 3, fmt.Sprintf("a %d, b %d", ba, bb)
	})
	stops[1-leader]()
	if err := <-dones[1-leader]; err != nil {
		t.Fatal(err)
	}
}

// runRebalancer runs a Rebalancer of one limit W on queue over shards
// until the returned stop is called (stop waits for Run to return).
func runRebalancer(t *testing.T, shards []shardlimit.Shard, w int, owner string) (*shardlimit.Rebalancer, func()) {
	t.Helper()
	r, err := shardlimit.New(shards, shardlimit.Options{
		Limits:   []shardlimit.Limit{{Table: lease.JobRuns, Queue: queue, W: w}},
		Interval: 50 * time.Millisecond, ShardTimeout: 500 * time.Millisecond, LockTTL: 2 * time.Second,
		Owner: owner, Logger: logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(stop)
	return r, stop
}

func tokenOf(t *testing.T, db *pgxpool.Pool, name string) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRow(context.Background(), `select coalesce((select token from workq.workq_locks where name = $1), 0)`, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// The coordinator changes: a Rebalancer led over [a, b], then one runs
// over [b, a, c] (b first, as when DrainFirst puts the shard being emptied
// first; c a new shard whose budget ZeroUnset set to 0). b's workq_locks
// has no leader lock, so the new leader's lock token starts at 1 while
// the fences on a and b remember the old leader's tokens, in the
// thousands or, after a failover of the old coordinator, above 2^32. The
// new leader advances its token past them and moves the budgets within a
// few rounds; without that it was refused on every shard and stepped down
// once per interval, a token higher each time, for about the old token
// times two intervals (for ever above 2^32).
func TestRebalancerCoordinatorChange(t *testing.T) {
	const w = 6
	const big = int64(3)<<32 + 6 // an old coordinator's token after a failover: the epoch in the high bits
	for _, tc := range []struct {
		name string
		// oldLock is the old coordinator's lock token before the first
		// Rebalancer acquires (0: no row); fence, when not 0, is then set
		// by SQL on a's fence row.
		oldLock, fence int64
		// cut: a is unreachable while the new leader starts (it catches
		// up with b's fence only), and a's higher fence is caught up with
		// in the round that reaches a again.
		cut bool
	}{
		{name: "after many leaderships", oldLock: 999},
		{name: "old coordinator failed over", oldLock: big},
		{name: "fence above 2^32 set by SQL", fence: int64(5) << 32},
		{name: "old coordinator unreachable at the start", oldLock: big, fence: int64(5) << 32, cut: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			urlA := testdb.URL(t)
			a, b, c := openPool(t, urlA), openPool(t, testdb.URL(t)), openPool(t, testdb.URL(t))
			if tc.oldLock > 0 {
				if _, err := a.Exec(ctx, `insert into workq.workq_locks (name, owner, token, expires_at, acquired_at, renewed_at)
					values ('workq.shardlimit', 'old', $1, now(), now(), now())`, tc.oldLock); err != nil {
					t.Fatal(err)
				}
			}
			// The old list, [a, b]: a is the coordinator.
			r1, stop1 := runRebalancer(t, []shardlimit.Shard{{Name: "a", DB: a}, {Name: "b", DB: b}}, w, "r1")
			await(t, 20*time.Second, "budgets 3 and 3 under the old coordinator", func() (bool, string) {
				ba, _ := budgetOf(ctx, a)
				bb, _ := budgetOf(ctx, b)
				return ba == 3 && bb == 3, fmt.Sprintf("a %d, b %d", ba, bb)
			})
			old, _ := r1.Leading()
			stop1()
			if tc.oldLock > 0 && old != tc.oldLock+1 {
				t.Fatalf("the old leader's token is %d; want %d", old, tc.oldLock+1)
			}
			if tc.fence > 0 {
				if _, err := a.Exec(ctx, `update workq.workq_locks set token = $1 where name = 'workq.shardlimit.fence'`, tc.fence); err != nil {
					t.Fatal(err)
				}
			}
			highest := max(tokenOf(t, a, "workq.shardlimit.fence"), tokenOf(t, b, "workq.shardlimit.fence"), tokenOf(t, a, "workq.shardlimit"))
			if err := shardlimit.ZeroUnset(ctx, c, []shardlimit.Limit{{Table: lease.JobRuns, Queue: queue, W: w}}); err != nil {
				t.Fatal(err)
			}
			enqueue(t, b, 10)

			// The new list, [b, a, c]: b is the coordinator.
			dbA := a
			var px *testutil.Proxy
			if tc.cut {
				var proxied string
				px, proxied = viaProxy(t, urlA)
				dbA = openPool(t, proxied)
				px.Cut()
			}
			start := time.Now()
			r2, _ := runRebalancer(t, []shardlimit.Shard{{Name: "b", DB: b}, {Name: "a", DB: dbA}, {Name: "c", DB: c}}, w, "r2")
			if tc.cut {
				await(t, 10*time.Second, "the new leader leading while a is unreachable", func() (bool, string) {
					tok, ok := r2.Leading()
					return ok, fmt.Sprintf("token %d", tok)
				})
				time.Sleep(300 * time.Millisecond) // a few rounds without a: a's budget is unknown, nothing moves
				if ba, bb := queryInt(t, a, `select max_in_progress from workq.queue_limits`), queryInt(t, b, `select max_in_progress from workq.queue_limits`); ba != 3 || bb != 3 {
					t.Fatalf("budgets moved while a's was unknown: a %d, b %d", ba, bb)
				}
				px.Restore()
				start = time.Now()
			}
			await(t, 10*time.Second, "the new leader moving the budgets to a 1, b 4, c 1", func() (bool, string) {
				ba, _ := budgetOf(ctx, a)
				bb, _ := budgetOf(ctx, b)
				bc, _ := budgetOf(ctx, c)
				tok, ok := r2.Leading()
				return ba == 1 && bb == 4 && bc == 1, fmt.Sprintf("a %d, b %d, c %d; leading %v with token %d", ba, bb, bc, ok, tok)
			})
			took := time.Since(start)
			tok, ok := r2.Leading()
			if !ok || tok <= highest {
				t.Fatalf("new leader: leading %v with token %d; want a token above %d", ok, tok, highest)
			}
			if lt := tokenOf(t, b, "workq.shardlimit"); lt != tok {
				t.Fatalf("b's lock row has token %d; the leader's is %d", lt, tok)
			}
			for name, db := range map[string]*pgxpool.Pool{"a": a, "b": b, "c": c} {
				if f := tokenOf(t, db, "workq.shardlimit.fence"); f != tok {
					t.Errorf("%s's fence is %d; want the new leader's token %d", name, f, tok)
				}
			}
			t.Logf("old token %d, highest token seen %d: the new leader's token is %d; budgets moved %s after it could reach every shard", old, highest, tok, took.Round(time.Millisecond))
		})
	}
}
