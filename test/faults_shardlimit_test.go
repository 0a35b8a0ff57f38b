package test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
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

// Scenario: the global limit W across two shards (issue 22, item 8; docs/
// scale-out.md). Two databases hold one logical queue, 80% of the backlog
// on shard a; a shardlimit.Rebalancer (W=4, every 200ms, leader lock on a)
// moves the per-shard budgets. Two `workq worker` processes work shard a
// and one works shard b, each through a proxy of its own; the leader
// reaches b through a proxy too. The faults: kill -9 of a worker holding
// leases, a cut of an a worker's link for longer than its lease, and a cut of
// the leader's link to b while both shards have work (b keeps its budget
// and its workers go on under it; a stays within W minus it). The two
// histories, merged (both databases share the server's clock), have at
// most W valid leases and W handlers running at any instant; a sampler of
// both shards' in-progress rows and of both budgets never sees more than
// W; every item ends done.
func testFaultShardLimit(t *testing.T, bin string) {
	const queue, w, lease_ = "slim", 4, 3 * time.Second
	nA, nB := scaled(240, 2400), scaled(60, 600)
	ctx := context.Background()
	urls := [2]string{testdb.URL(t), testdb.URL(t)}
	dbs := [2]*pgxpool.Pool{openTestPool(t, urls[0]), openTestPool(t, urls[1])}
	var rcs [2]*receiver
	for i, db := range dbs {
		installHistory(t, db)
		if err := lease.SetLimit(ctx, db, lease.JobRuns, queue, 0); err != nil {
			t.Fatal(err)
		}
		rcs[i] = startReceiver(t, func(delivery) reaction { return reaction{Delay: time.Duration(30+rand.IntN(40)) * time.Millisecond} })
	}
	off := measureClockOffset(t, dbs[0])
	enqueueWebhooks(t, dbs[0], rcs[0], queue, nA, map[string]any{"scenario": "shard-limit"})
	enqueueWebhooks(t, dbs[1], rcs[1], queue, nB, map[string]any{"scenario": "shard-limit"})
	n := [2]int{nA, nB}

	// The leader: a directly (the coordinator), b through a proxy.
	leaderPx, leaderURL := proxied(t, urls[1], "slim-leader")
	leaderB := openTestPool(t, leaderURL)
	var logOut *slog.Logger = slog.New(slog.DiscardHandler)
	if testing.Verbose() {
		logOut = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	r, err := shardlimit.New([]shardlimit.Shard{{Name: "a", DB: dbs[0]}, {Name: "b", DB: leaderB}}, shardlimit.Options{
		Limits:       []shardlimit.Limit{{Table: lease.JobRuns, Queue: queue, W: w}},
		Interval:     200 * time.Millisecond,
		ShardTimeout: 500 * time.Millisecond,
		LockTTL:      3 * time.Second,
		Logger:       logOut,
	})
	if err != nil {
		t.Fatal(err)
	}
	var bg sync.WaitGroup
	bgCtx, stopBg := context.WithCancel(ctx)
	defer func() { stopBg(); bg.Wait() }()
	bg.Add(1)
	go func() { defer bg.Done(); _ = r.Run(bgCtx) }()

	// The samplers. Both databases are on one server, so one clock: a
	// sample counts shard x's rows (or budget) at the instant t its
	// statement began and shard y's rows that are valid now and were
	// claimed before t (a budget written before t), a lower bound of the
	// sum at t, so a sum above W is a real breach.
	var maxIP, maxBudgets, samples, sampleErrs atomic.Int64
	bump := func(m *atomic.Int64, v int64) {
		for c := m.Load(); v > c && !m.CompareAndSwap(c, v); c = m.Load() {
		}
	}
	bg.Add(1)
	go func() {
		defer bg.Done()
		for i := 0; bgCtx.Err() == nil; i++ {
			x, y := dbs[i%2], dbs[(i+1)%2]
			var at time.Time
			var a, b, ba, bb int64
			var before bool
			err := x.QueryRow(bgCtx, `select statement_timestamp(), count(*),
				(select max_in_progress from workq.queue_limits where work_table = 'job_runs' and queue = $1)
				from workq.job_runs_all where queue = $1 and status = 1 and locked_until > statement_timestamp()`, queue).Scan(&at, &a, &ba)
			if err == nil {
				err = y.QueryRow(bgCtx, `select count(r.id), l.max_in_progress, l.updated_at <= $2
					from workq.queue_limits l left join workq.job_runs_all r
					  on r.queue = l.queue and r.status = 1 and r.locked_until > statement_timestamp() and r.claimed_at <= $2
					where l.work_table = 'job_runs' and l.queue = $1 group by l.max_in_progress, l.updated_at`, queue, at).Scan(&b, &bb, &before)
			}
			if err != nil {
				if bgCtx.Err() == nil {
					sampleErrs.Add(1)
				}
				continue
			}
			samples.Add(1)
			bump(&maxIP, a+b)
			if before {
				bump(&maxBudgets, ba+bb)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()

	// The workers: a1 and a2 on shard a, b1 on shard b, each through a
	// proxy of its own.
	slots := []string{"a1", "a2", "b1"}
	shardOf := func(slot string) int { return strings.IndexByte("ab", slot[0]) }
	proxies := map[string]*testutil.Proxy{}
	f := newFleet(t, bin)
	for _, slot := range slots {
		var u string
		proxies[slot], u = proxied(t, urls[shardOf(slot)], "slim-"+slot)
		args := append([]string{"worker", "--jobs", "--queues", queue, "--lease", lease_.String(), "--concurrency", "4",
			"--poll", "100ms", "--log-format", "json", "--log-level", "warn"}, rcs[shardOf(slot)].workerArgs("unused")...)
		f.start(slot, procEnv(u), args...)
	}
	started := time.Now()
	deadline := started.Add(scaled(2*time.Minute, 10*time.Minute))
	done := func() (int, int) {
		da, _ := statusCounts(t, dbs[0], queue)
		db, _ := statusCounts(t, dbs[1], queue)
		return da, db
	}
	// holding returns a worker id among the slots' holding leases of the
	// queue now (empty: none does).
	holding := func(slots ...string) string {
		var ids []string
		for _, s := range slots {
			ids = append(ids, f.id(s))
		}
		var by []string
		for _, db := range dbs {
			by = append(by, holders(t, db, queue, ids)...)
		}
		return anyHolder(by)
	}
	budget := func(i int) int {
		return queryScalar[int](t, dbs[i], `select max_in_progress from workq.queue_limits where work_table = 'job_runs' and queue = $1`, queue)
	}
	type fault struct {
		victim string
		at     time.Time
	}
	var killed, cut []fault
	var leaderCutChecks, frozen int
	for round := range scaled(5, 20) {
		// Keep work waiting on both shards, 80/20.
		if da, db := done(); n[0]-da < 80 || n[1]-db < 20 {
			enqueueWebhooks(t, dbs[0], rcs[0], queue, 80, map[string]any{"scenario": "shard-limit"})
			enqueueWebhooks(t, dbs[1], rcs[1], queue, 20, map[string]any{"scenario": "shard-limit"})
			n[0] += 80
			n[1] += 20
		}
		if time.Now().After(deadline) {
			da, db := done()
			t.Fatalf("a: %d of %d done, b: %d of %d, after %s", da, n[0], db, n[1], time.Since(started).Round(time.Second))
		}
		switch round % 3 {
		case 0, 1:
			// A kill hits a worker of either shard; a cut one of shard a,
			// whose other worker reaps the leases the cut one holds (b has
			// one worker: with it cut, nobody would reap them, and its late
			// completions would be accepted, so the cut would cost nothing).
			candidates := slots
			if round%3 == 1 {
				candidates = []string{"a1", "a2"}
			}
			var victim string
			awaitCond(t, 30*time.Second, "a worker holding leases", func() (bool, string) {
				victim = holding(candidates...)
				return victim != "", "none"
			})
			slot, _, _ := strings.Cut(victim, "-")
			if round%3 == 1 {
				cut = append(cut, fault{victim, time.Now()})
				proxies[slot].Cut()
				time.Sleep(lease_ + time.Second)
				proxies[slot].Restore()
			} else {
				_, at := f.kill(slot)
				killed = append(killed, fault{victim, at})
				time.Sleep(100 * time.Millisecond)
				f.restart(slot)
			}
		case 2:
			// The leader loses b while both shards have work: b's budget
			// stays in force, a gets at most W minus it.
			frozen = budget(1)
			leaderPx.Cut()
			end := time.Now().Add(3 * time.Second)
			for time.Now().Before(end) {
				ba, bb := budget(0), budget(1)
				if bb != frozen || ba > w-frozen {
					t.Fatalf("the leader's link to b cut: a's budget %d, b's %d; b's must stay %d and a's at most %d", ba, bb, frozen, w-frozen)
				}
				leaderCutChecks++
				time.Sleep(20 * time.Millisecond)
			}
			leaderPx.Restore()
		}
		time.Sleep(time.Duration(300+rand.IntN(500)) * time.Millisecond)
	}
	awaitCond(t, time.Until(deadline), "every item done on both shards", func() (bool, string) {
		da, db := done()
		return da == n[0] && db == n[1], fmt.Sprintf("a %d of %d, b %d of %d", da, n[0], db, n[1])
	})
	took := time.Since(started)
	f.stopAll()
	stopBg()
	bg.Wait()

	// One history of both shards: shard b's item ids moved out of a's way.
	h := loadHistory(t, dbs[0], rcs[0], off)
	hb := loadHistory(t, dbs[1], rcs[1], off)
	const shift = int64(1) << 40
	for k, it := range hb.Items {
		it.ID += shift
		h.Items[itemKey{k.Table, k.ID + shift}] = it
	}
	h.Statements = append(h.Statements, hb.Statements...)
	h.check(t, historyOpts{AllDone: true, Limits: map[string]int{"job_runs/" + queue: w}})
	cost := func(fs []fault) int {
		c := 0
		for _, fl := range fs {
			at := off.toDB(fl.at)
			for _, it := range h.Items {
				for _, l := range it.Leases {
					if l.Outcome == "expired" && l.By == fl.victim && l.Claim.Before(at) && l.End.After(at) {
						c++
					}
				}
			}
		}
		return c
	}
	byKill, byCut := cost(killed), cost(cut)
	t.Logf("%d+%d jobs under W=%d over two shards done in %s with %d kill -9s (%d leases expired), %d worker cuts of %s (%d leases expired) "+
		"and the leader's link to b cut with b's budget at %d (%d checks); the sampler read %d times (%d errors), at most %d valid leases at one instant, budgets summing to at most %d; %s",
		n[0], n[1], w, took.Round(100*time.Millisecond), len(killed), byKill, len(cut), lease_+time.Second, byCut,
		frozen, leaderCutChecks, samples.Load(), sampleErrs.Load(), maxIP.Load(), maxBudgets.Load(), h.summary())
	if byKill == 0 || byCut == 0 {
		t.Errorf("the kills cost %d leases and the cuts %d: a fault hit nothing", byKill, byCut)
	}
	if maxIP.Load() > w {
		t.Errorf("the sampler saw %d valid leases over both shards at one instant; W is %d", maxIP.Load(), w)
	}
	if maxBudgets.Load() > w {
		t.Errorf("the budgets summed to %d; W is %d", maxBudgets.Load(), w)
	}
	if maxIP.Load() < w-1 {
		t.Errorf("the sampler never saw more than %d valid leases: the budgets were never what held the workers back", maxIP.Load())
	}
	if samples.Load() < 1000 {
		t.Errorf("the sampler read only %d times", samples.Load())
	}
}
