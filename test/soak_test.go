package test

// Issue 11 scenario 8: a soak with autovacuum on. The machine's shared
// PostgreSQL runs with autovacuum off (a CI setting), which hides the
// classic failure of a PostgreSQL queue: dead tuples and index bloat that
// slow every claim down. The soak starts its own cluster (pgembed: initdb
// defaults, so autovacuum on with the default thresholds) and puts a steady
// load, at a fixed offered rate well below capacity, on all four work
// tables while worker processes are killed and restarted.
//
// WORKQ_SOAK (a duration, default 60s; `make soak` sets 10m) sets the
// length. The first and last segments (a third each in short runs, a
// minute each in long ones) are compared; a long transaction is held open
// over the middle.

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/workq/workq/internal/inboxrt"
	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/outboxrt"
	"github.com/workq/workq/internal/timersrt"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/workq/workq/inbox"
	"github.com/workq/workq/internal/config"
	"github.com/workq/workq/internal/db"
	"github.com/workq/workq/internal/pgembed"
	"github.com/workq/workq/internal/worker"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/timers"
)

// soakTables are the work tables under load and the run archive.
var soakTables = []string{"job_runs", "outbox", "inbox", "timers", "runs"}

// soakSample is what the sampler saw at one tick: the items finished since
// the previous tick, their latency (run_at to finished_at, database clock),
// and the state of the tables and of this process.
type soakSample struct {
	at         time.Duration // since the load started
	offered    int64         // items enqueued since the previous tick
	done       int64         // items finished (done) since the previous tick
	p95        time.Duration // of those items' run_at -> finished_at
	inProgress int64
	ready      int64 // due and not claimed
	dead       map[string]int64
	size       map[string]int64 // pg_total_relation_size
	heap       uint64           // this process's HeapAlloc
	goroutines int
	longTx     bool // the long transaction was open
}

type soakPlan struct {
	total, segment, tick        time.Duration
	rate                        int // items per second per table
	killEvery, restartEvery     time.Duration
	longTxFrom, longTxUntil     time.Duration
	leaseTTL, retain, retention time.Duration
	naptime                     string // autovacuum_naptime; "" keeps the default (1min)
}

func newSoakPlan(t *testing.T) soakPlan {
	total := 60 * time.Second
	if s := os.Getenv("WORKQ_SOAK"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 30*time.Second {
			t.Fatalf("WORKQ_SOAK=%q: want a duration of at least 30s", s)
		}
		total = d
	}
	p := soakPlan{total: total, tick: time.Second, rate: 20,
		leaseTTL: 5 * time.Second, retain: 30 * time.Second, retention: 5 * time.Second}
	if total >= 5*time.Minute {
		p.segment = time.Minute
		p.killEvery, p.restartEvery = 30*time.Second, 45*time.Second
		p.longTxFrom, p.longTxUntil = total/2-time.Minute, total/2+time.Minute // 2 minutes
	} else {
		p.segment = total / 3
		p.killEvery, p.restartEvery = 10*time.Second, 15*time.Second
		p.longTxFrom, p.longTxUntil = total*2/5, total*3/5
		p.naptime = "10s"
	}
	return p
}

func TestSoak(t *testing.T) {
	// Registered first, so it runs after every other cleanup: the
	// in-process workers, producers, pools and process waiters are gone.
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	plan := newSoakPlan(t)
	bin := buildWorkq(t)
	ctx := context.Background()

	srv, err := pgembed.Start(ctx)
	if err != nil {
		t.Fatalf("start a throwaway PostgreSQL for the soak: %v", err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	url := srv.URL("postgres")
	if _, err := db.MigrateUp(ctx, url); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	pool := openTestPool(t, url)
	if av := queryScalar[string](t, pool, "show autovacuum"); av != "on" {
		t.Fatalf("autovacuum is %s on the soak's cluster, want on", av)
	}
	if plan.naptime != "" {
		// The one tuning: a short run would end before the default
		// naptime (1min) let autovacuum look at the tables more than once.
		if _, err := pool.Exec(ctx, "alter system set autovacuum_naptime = '"+plan.naptime+"'"); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, "select pg_reload_conf()"); err != nil {
			t.Fatal(err)
		}
		awaitCond(t, 10*time.Second, "the naptime applies", func() (bool, string) {
			v := queryScalar[string](t, pool, "show autovacuum_naptime")
			return v == plan.naptime, v
		})
	}

	t.Logf("soak: %s, %d items/s offered per table, segments of %s, kill -9 every %s, in-process restart every %s, long transaction %s-%s; autovacuum on (naptime %s, vacuum scale factor %s)",
		plan.total, plan.rate, plan.segment, plan.killEvery, plan.restartEvery, plan.longTxFrom, plan.longTxUntil,
		queryScalar[string](t, pool, "show autovacuum_naptime"), queryScalar[string](t, pool, "show autovacuum_vacuum_scale_factor"))

	// Maintenance (reaper, retention) and two job-run worker processes.
	env := procEnv(url)
	maint := startProc(t, "maintain", bin, env, "maintain", "--reap-interval", "1s",
		"--retain-finished", plan.retain.String(), "--retain-runs", plan.retain.String(),
		"--retention-interval", plan.retention.String(), "--inbox-window", "1m")
	workerArgs := []string{"worker", "--jobs", "--lease", plan.leaseTTL.String()}
	workers := []*proc{startProc(t, "worker-0", bin, env, workerArgs...), startProc(t, "worker-1", bin, env, workerArgs...)}

	// The outbox, the inbox and timers: an in-process worker, restarted.
	inproc := newSoakWorker(t, url, plan.leaseTTL)

	var offered atomic.Int64
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		soakProduce(loadCtx, t, pool, plan.rate, &offered)
	}()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			stopLoad()
			wg.Wait()
		}
	}
	t.Cleanup(stop)

	var longTx *longTxHolder
	var samples []soakSample
	start := time.Now()
	prevDB := dbClock(t, pool)
	var prevOffered int64
	nextKill, nextRestart, killed := plan.killEvery, plan.restartEvery, 0
	for time.Since(start) < plan.total {
		time.Sleep(plan.tick)
		at := time.Since(start)
		switch {
		case longTx == nil && at >= plan.longTxFrom && at < plan.longTxUntil:
			longTx = holdLongTx(t, pool)
		case longTx != nil && !longTx.released && at >= plan.longTxUntil:
			longTx.release()
		}
		if at >= nextKill {
			nextKill += plan.killEvery
			i := killed % len(workers)
			killed++
			_ = syscall.Kill(-workers[i].cmd.Process.Pid, syscall.SIGKILL)
			workers[i].wait(t, 10*time.Second)
			workers[i] = startProc(t, fmt.Sprintf("worker-%d.%d", i, killed), bin, env, workerArgs...)
		}
		if at >= nextRestart {
			nextRestart += plan.restartEvery
			inproc.restart(t)
		}
		now := dbClock(t, pool)
		s := sampleSoak(t, pool, prevDB, now)
		prevDB = now
		o := offered.Load()
		s.at, s.offered, prevOffered = at, o-prevOffered, o
		s.longTx = longTx != nil && !longTx.released
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		s.heap, s.goroutines = ms.HeapAlloc, runtime.NumGoroutine()
		samples = append(samples, s)
	}
	stop()
	inproc.stop(t)
	select {
	case <-maint.done:
		t.Fatalf("workq maintain exited during the soak: %s", maint.stderr.String())
	default:
	}
	if longTx != nil && !longTx.released {
		longTx.release()
	}
	reportSoak(t, plan, samples)
	checkSoak(t, plan, samples)
	// Autovacuum did its work during the run, on the work tables.
	// runs: the sums over its partitions (the partitioned parent has none).
	rows, err := pool.Query(ctx, `select t.name, coalesce(sum(s.autovacuum_count), 0)::bigint, coalesce(sum(s.autoanalyze_count), 0)::bigint,
			coalesce(sum(s.n_live_tup), 0)::bigint, coalesce(sum(s.n_dead_tup), 0)::bigint
		from unnest($1::text[]) t (name)
		cross join lateral (select relid from pg_partition_tree(('workq.' || t.name)::regclass)
		                    union select ('workq.' || t.name)::regclass) p
		left join pg_stat_user_tables s on s.relid = p.relid
		group by t.name order by t.name`, soakTables)
	if err != nil {
		t.Fatal(err)
	}
	var runs int64
	for rows.Next() {
		var name string
		var vac, an, live, dead int64
		if err := rows.Scan(&name, &vac, &an, &live, &dead); err != nil {
			t.Fatal(err)
		}
		runs += vac
		t.Logf("soak end: %-8s autovacuum %d times, autoanalyze %d times, %d live and %d dead tuples", name, vac, an, live, dead)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if runs == 0 {
		t.Errorf("autovacuum never ran on the work tables during the soak")
	}
}

// soakProduce enqueues rate items per second on each table, in ten batches
// a second, until ctx ends.
func soakProduce(ctx context.Context, t *testing.T, pool *pgxpool.Pool, rate int, offered *atomic.Int64) {
	jobs := jobq.New(jobq.Options{})
	ob := outboxrt.NewClient(outboxrt.ClientOptions{})
	in := inboxrt.NewClient(inboxrt.ClientOptions{})
	tm := timersrt.NewClient(timersrt.ClientOptions{})
	per := max(rate/10, 1)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var seq int
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		js := make([]jobq.Job, per)
		ms := make([]outbox.Message, per)
		is := make([]inbox.Message, per)
		ts := make([]timers.Timer, per)
		for i := range per {
			seq++
			js[i] = jobq.Job{Kind: "noop", Payload: map[string]int{"n": seq}}
			ms[i] = outbox.Message{Topic: "soak", Payload: map[string]int{"n": seq}}
			if seq%2 == 0 { // half of the messages ordered, over 16 keys
				ms[i].PartitionKey = fmt.Sprintf("key-%d", seq%16)
			}
			is[i] = inbox.Message{Source: "soak", MessageID: fmt.Sprintf("m-%d", seq), Payload: map[string]int{"n": seq}}
			ts[i] = timers.Timer{Topic: "soak", Delay: 200 * time.Millisecond, Payload: map[string]int{"n": seq}}
		}
		// A failed write is the shutdown's cancellation or a fault the
		// checks see as missing throughput; it is logged, not fatal.
		var errs []error
		if _, err := jobs.EnqueueMany(ctx, pool, js); err != nil {
			errs = append(errs, err)
		}
		if _, err := ob.SendMany(ctx, pool, ms); err != nil {
			errs = append(errs, err)
		}
		if _, err := in.ReceiveMany(ctx, pool, is); err != nil {
			errs = append(errs, err)
		}
		if _, err := tm.ScheduleMany(ctx, pool, ts); err != nil {
			errs = append(errs, err)
		}
		if ctx.Err() == nil {
			for _, err := range errs {
				t.Logf("soak producer: %v", err)
			}
			offered.Add(int64(4 * per))
		}
	}
}

// soakWorker is an in-process worker of the outbox, the inbox and timers,
// with no-op handlers, that the soak restarts now and then.
type soakWorker struct {
	pool  *pgxpool.Pool
	lease time.Duration
	w     *worker.Worker
	n     int
}

func newSoakWorker(t *testing.T, url string, lease time.Duration) *soakWorker {
	pool := openTestPool(t, url)
	s := &soakWorker{pool: pool, lease: lease}
	s.start(t)
	t.Cleanup(func() { s.stop(t) })
	return s
}

func (s *soakWorker) start(t *testing.T) {
	t.Helper()
	s.n++
	cfg := config.Default()
	cfg.WorkerID = fmt.Sprintf("soak-inproc-%d", s.n)
	cfg.Lease = s.lease
	w, err := worker.New(s.pool, cfg.Worker(), worker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	noop := func(context.Context, *worker.Job) error { return nil }
	relay := outboxrt.NewRelay(outbox.RelayOptions{})
	relay.HandleDefault(noop)
	in := inboxrt.NewProcessor()
	in.HandleDefault(noop)
	tp := timersrt.NewProcessor()
	tp.HandleDefault(noop)
	for _, src := range []worker.Source{relay.Source(), in.Source(), tp.Source()} {
		if err := w.AddSource(src); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.w = w
}

func (s *soakWorker) stop(t *testing.T) {
	t.Helper()
	if s.w == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.w.Stop(ctx); err != nil {
		t.Errorf("stop the in-process worker: %v", err)
	}
	s.w = nil
}

func (s *soakWorker) restart(t *testing.T) {
	s.stop(t)
	s.start(t)
}

// longTxHolder is a transaction left open elsewhere in the database: it
// holds back the xmin horizon, so no vacuum can remove the dead tuples
// made while it is open.
type longTxHolder struct {
	conn     *pgxpool.Conn
	released bool
}

func holdLongTx(t *testing.T, pool *pgxpool.Pool) *longTxHolder {
	t.Helper()
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A snapshot that lives as long as the transaction, and an xid.
	if _, err := conn.Exec(ctx, "begin isolation level repeatable read; select txid_current(), count(*) from workq.schedules"); err != nil {
		t.Fatal(err)
	}
	h := &longTxHolder{conn: conn}
	t.Cleanup(h.release)
	return h
}

func (h *longTxHolder) release() {
	if h.released {
		return
	}
	h.released = true
	_, _ = h.conn.Exec(context.Background(), "rollback")
	h.conn.Release()
}

// sampleSoak reads, on the database clock, what finished in (from, to]
// and the tables' state.
func sampleSoak(t *testing.T, pool *pgxpool.Pool, from, to time.Time) soakSample {
	t.Helper()
	ctx := context.Background()
	s := soakSample{dead: map[string]int64{}, size: map[string]int64{}}
	var p95 float64
	err := pool.QueryRow(ctx, `with f as (
			select finished_at - run_at as lat from workq.job_runs_all where status = 2 and finished_at > $1 and finished_at <= $2
			union all select finished_at - run_at from workq.outbox where status = 2 and finished_at > $1 and finished_at <= $2
			union all select finished_at - run_at from workq.inbox where status = 2 and finished_at > $1 and finished_at <= $2
			union all select finished_at - run_at from workq.timers where status = 2 and finished_at > $1 and finished_at <= $2)
		select count(*), coalesce(extract(epoch from percentile_cont(0.95) within group (order by lat)), 0) from f`, from, to).
		Scan(&s.done, &p95)
	if err != nil {
		t.Fatalf("sample: %v", err)
	}
	s.p95 = time.Duration(p95 * float64(time.Second))
	err = pool.QueryRow(ctx, `select
		(select count(*) from workq.job_runs_all where status = 1) + (select count(*) from workq.outbox where status = 1)
		  + (select count(*) from workq.inbox where status = 1) + (select count(*) from workq.timers where status = 1),
		(select count(*) from workq.job_runs_all where status = 0 and run_at <= now()) + (select count(*) from workq.outbox where status = 0 and run_at <= now())
		  + (select count(*) from workq.inbox where status = 0 and run_at <= now()) + (select count(*) from workq.timers where status = 0 and run_at <= now())`).
		Scan(&s.inProgress, &s.ready)
	if err != nil {
		t.Fatalf("sample: %v", err)
	}
	// runs is partitioned (by day): its figures are its partitions'.
	rows, err := pool.Query(ctx, `select t.name, coalesce(sum(s.n_dead_tup), 0)::bigint, coalesce(sum(pg_total_relation_size(p.relid)), 0)::bigint
		from unnest($1::text[]) t (name)
		cross join lateral (select relid from pg_partition_tree(('workq.' || t.name)::regclass)
		                    union select ('workq.' || t.name)::regclass) p
		left join pg_stat_user_tables s on s.relid = p.relid
		group by t.name`, soakTables)
	if err != nil {
		t.Fatalf("sample: %v", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var dead, size int64
		if err := rows.Scan(&name, &dead, &size); err != nil {
			t.Fatal(err)
		}
		s.dead[name], s.size[name] = dead, size
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return s
}

// soakSegment sums the samples taken in [from, to).
type soakSegment struct {
	offered, done          int64
	p95                    time.Duration // the worst tick's
	maxInProgress, maxDead int64
	maxSize                int64
	maxHeap                uint64
	maxGoroutines          int
}

func segmentOf(samples []soakSample, from, to time.Duration) soakSegment {
	var g soakSegment
	for _, s := range samples {
		if s.at <= from || s.at > to {
			continue
		}
		g.offered += s.offered
		g.done += s.done
		g.p95 = max(g.p95, s.p95)
		g.maxInProgress = max(g.maxInProgress, s.inProgress)
		var dead, size int64
		for _, tb := range soakTables {
			dead += s.dead[tb]
			// The run archive grows all day: retention drops it a UTC day
			// at a time (docs/design.md §24), so its size is not bounded
			// within a soak; its dead tuples are (none).
			if tb != "runs" {
				size += s.size[tb]
			}
		}
		g.maxDead = max(g.maxDead, dead)
		g.maxSize = max(g.maxSize, size)
		g.maxHeap = max(g.maxHeap, s.heap)
		g.maxGoroutines = max(g.maxGoroutines, s.goroutines)
	}
	return g
}

// p95Of is the 95th percentile of the ticks' p95 latencies in [from, to):
// one tick's spike (a kill) does not decide it.
func p95Of(samples []soakSample, from, to time.Duration) time.Duration {
	var ls []time.Duration
	for _, s := range samples {
		if s.at > from && s.at <= to && s.done > 0 {
			ls = append(ls, s.p95)
		}
	}
	if len(ls) == 0 {
		return 0
	}
	sort.Slice(ls, func(i, j int) bool { return ls[i] < ls[j] })
	return ls[(len(ls)-1)*95/100]
}

func reportSoak(t *testing.T, plan soakPlan, samples []soakSample) {
	var b strings.Builder
	fmt.Fprintf(&b, "%7s %7s %6s %8s %6s %6s  %s\n", "at", "offered", "done", "p95", "inprog", "ready", "dead tuples / total size (kB) of job_runs outbox inbox timers runs")
	for _, s := range samples {
		mark := ""
		if s.longTx {
			mark = " [long tx open]"
		}
		var cols []string
		for _, tb := range soakTables {
			cols = append(cols, fmt.Sprintf("%d/%d", s.dead[tb], s.size[tb]/1024))
		}
		fmt.Fprintf(&b, "%7s %7d %6d %8s %6d %6d  %s%s\n", s.at.Round(time.Second), s.offered, s.done,
			s.p95.Round(time.Millisecond), s.inProgress, s.ready, strings.Join(cols, " "), mark)
	}
	t.Logf("soak samples:\n%s", b.String())
	first := segmentOf(samples, 0, plan.segment)
	last := segmentOf(samples, plan.total-plan.segment, plan.total)
	during := segmentOf(samples, plan.longTxFrom, plan.longTxUntil)
	for _, x := range []struct {
		name string
		g    soakSegment
		p95  time.Duration
	}{
		{"first", first, p95Of(samples, 0, plan.segment)},
		{"long tx", during, p95Of(samples, plan.longTxFrom, plan.longTxUntil)},
		{"last", last, p95Of(samples, plan.total-plan.segment, plan.total)},
	} {
		t.Logf("soak %-7s: offered %d, done %d (%.2f of offered), latency p95 %s, max in progress %d, max dead tuples %d, max size %d kB, heap %d kB, goroutines %d",
			x.name, x.g.offered, x.g.done, float64(x.g.done)/float64(max(x.g.offered, 1)), x.p95.Round(time.Millisecond),
			x.g.maxInProgress, x.g.maxDead, x.g.maxSize/1024, x.g.maxHeap/1024, x.g.maxGoroutines)
	}
}

// checkSoak is the pass criterion. The offered rate is fixed and well below
// capacity, so on a healthy run every segment finishes about what was
// offered: comparing done counts (and latency) of the first and last
// segments catches a slowdown (bloat) without depending on how busy the
// shared machine is.
func checkSoak(t *testing.T, plan soakPlan, samples []soakSample) {
	first := segmentOf(samples, 0, plan.segment)
	last := segmentOf(samples, plan.total-plan.segment, plan.total)
	if first.done == 0 {
		t.Fatalf("nothing finished in the first segment")
	}
	if r := float64(last.done) / float64(first.done); r < 0.85 {
		t.Errorf("the last segment finished %d items, the first %d: ratio %.2f, want at least 0.85", last.done, first.done, r)
	}
	if r := float64(last.done) / float64(max(last.offered, 1)); r < 0.85 {
		t.Errorf("the last segment finished %d of %d offered items (%.2f): want at least 0.85", last.done, last.offered, r)
	}
	// Latency: a kill costs up to a lease TTL (its items wait to be
	// reaped), so the bound is the first segment's plus that plus slack.
	p1, p2 := p95Of(samples, 0, plan.segment), p95Of(samples, plan.total-plan.segment, plan.total)
	if limit := 2*p1 + plan.leaseTTL + 2*time.Second; p2 > limit {
		t.Errorf("latency p95 rose from %s (first segment) to %s (last): want at most %s", p1, p2, limit)
	}
	// In progress is bounded by what the workers hold: not growing.
	if limit := 2*first.maxInProgress + 100; last.maxInProgress > limit {
		t.Errorf("in-progress rows: at most %d in the first segment, %d in the last: want at most %d", first.maxInProgress, last.maxInProgress, limit)
	}
	// The backlog at the end: what a few seconds of offered load make.
	if end := samples[len(samples)-1]; end.ready > int64(4*plan.rate*10) {
		t.Errorf("%d items ready and unclaimed at the end: the workers fell behind", end.ready)
	}
	// Dead tuples and sizes: retention deletes finished items after
	// plan.retain and autovacuum reclaims them, so both level off; the
	// bound is generous (the long transaction's bloat is in between).
	if limit := 4*first.maxSize + 8<<20; last.maxSize > limit {
		t.Errorf("the work tables grew from %d kB to %d kB: want at most %d kB", first.maxSize/1024, last.maxSize/1024, limit/1024)
	}
	if limit := 4*first.maxDead + int64(4*plan.rate)*int64(plan.retain/time.Second)*4; last.maxDead > limit {
		t.Errorf("dead tuples: at most %d in the first segment, %d in the last: want at most %d", first.maxDead, last.maxDead, limit)
	}
	// This process: goroutines and heap bounded (goleak checks the end).
	if limit := first.maxGoroutines + 50; last.maxGoroutines > limit {
		t.Errorf("goroutines: %d in the first segment, %d in the last: want at most %d", first.maxGoroutines, last.maxGoroutines, limit)
	}
	if limit := 2*first.maxHeap + 32<<20; last.maxHeap > limit {
		t.Errorf("heap: %d kB in the first segment, %d kB in the last: want at most %d kB", first.maxHeap/1024, last.maxHeap/1024, limit/1024)
	}
}
