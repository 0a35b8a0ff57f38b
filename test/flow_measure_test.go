//go:build measure

package test

// The flow-control measurements of issue 30 (docs/throughput.md, "Flow
// control"): not part of make test (build tag measure). Each runs real
// `workq worker` processes built from this tree against the package's own
// PostgreSQL (testdb.MainOwnCluster) and prints its numbers:
//
//	go test -tags=measure -count=1 -timeout 30m -v -run 'TestFlowMeasure/accuracy' ./test/
//	go test -tags=measure -count=1 -timeout 30m -v -run 'TestFlowMeasure/fairness' ./test/
//	go test -tags=measure -count=1 -timeout 30m -v -run 'TestFlowMeasure/adaptive' ./test/
//
// WORKQ_MEASURE_SQL=file runs the SQL in file on the adaptive
// measurement's database before its relay starts (to try a change to
// workq_flow_throttle without a migration).
//
// (make measure-flow runs the three, one after the other). A run fails
// when a hard bound is broken (a limit exceeded, a message lost or
// delivered twice, an attempt used by a throttle); the targets that depend
// on the machine (achieved rate, fairness ratio, settling time) are
// reported, not asserted.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
)

func TestFlowMeasure(t *testing.T) {
	bin := buildWorkq(t)
	t.Run("accuracy", func(t *testing.T) { measureAccuracy(t, bin) })
	t.Run("fairness", func(t *testing.T) { measureFairness(t, bin) })
	t.Run("adaptive", func(t *testing.T) { measureAdaptive(t, bin) })
}

// maxInWindow is the most times in any window [s, s+period) that starts at
// one of them (the window with the most always does); times sorted.
func maxInWindow(times []time.Time, period time.Duration) (most int, at time.Time) {
	j := 0
	for i, s := range times {
		for j < len(times) && times[j].Before(s.Add(period)) {
			j++
		}
		if j-i > most {
			most, at = j-i, s
		}
	}
	return most, at
}

// perSecond counts times in each second [t0+i s, t0+(i+1) s) for i < n.
func perSecond(times []time.Time, t0 time.Time, n int) []int {
	out := make([]int, n)
	for _, x := range times {
		if i := int(x.Sub(t0) / time.Second); i >= 0 && i < n {
			out[i]++
		}
	}
	return out
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func durQuantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// startWorkers starts `workq worker --jobs --queues queue` processes, n per
// URL, at their default settings; stop sends them SIGTERM and waits.
func startWorkers(t *testing.T, bin string, urls []string, n int, extra ...string) (stop func()) {
	var ps []*proc
	for i, u := range urls {
		for k := range n {
			id := fmt.Sprintf("m%d-%d", i, k)
			ps = append(ps, startProc(t, id, bin, procEnv(u), append([]string{"worker", "--log-format", "json", "--log-level", "warn", "--worker-id", id}, extra...)...))
		}
	}
	return func() {
		for _, p := range ps {
			p.signal(t, syscall.SIGTERM)
		}
		for _, p := range ps {
			if code := p.wait(t, 60*time.Second); code != 0 {
				t.Errorf("%s exited %d: %s", p.name, code, p.stderr.String())
			}
		}
	}
}

// (a) Accuracy: 4 worker processes over 2 shards, one queue with a rate of
// 200 starts/s (a sharded Client's SetFlowLimit splits it: 100 per shard)
// and 20/s per limit key, 50 keys (key i on shard i mod 2). The backlog is
// shaped so that both limits bind: 10 hot keys (5 per shard) of 1,500
// jobs each, whose 5 x 20/s per shard is the shard's 100/s, and 40 cold
// keys of 20 jobs each (drained in the first seconds). 60 s from the first
// start; then the run archives of both shards are read.
func measureAccuracy(t *testing.T, bin string) {
	const queue, rate, keyRate, hot, cold, hotJobs, coldJobs = "acc", 200, 20, 10, 40, 1500, 20
	const span = 60 * time.Second
	ctx := context.Background()
	urls := []string{testdb.URL(t), testdb.URL(t)}
	dbs := []*pgxpool.Pool{openTestPool(t, urls[0]), openTestPool(t, urls[1])}
	c, err := workq.NewShardedClient([]workq.Shard{{Name: "a", Pool: dbs[0]}, {Name: "b", Pool: dbs[1]}}, workq.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetFlowLimit(ctx, workq.FlowLimit{Table: workq.TableJobRuns, Queue: queue, Rate: rate}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetFlowLimit(ctx, workq.FlowLimit{Table: workq.TableJobRuns, Queue: queue, PerKey: true, Rate: keyRate}); err != nil {
		t.Fatal(err)
	}
	for k := range hot + cold {
		n := coldJobs
		if k < hot {
			n = hotJobs
		}
		if _, err := dbs[k%2].Exec(ctx, `insert into workq.job_runs (queue, kind, payload, limit_key)
			select $1, 'noop', '{}', $2 from generate_series(1, $3::int)`, queue, fmt.Sprintf("k%02d", k), n); err != nil {
			t.Fatal(err)
		}
	}
	stop := startWorkers(t, bin, urls, 2, "--jobs", "--queues", queue)
	var t0 time.Time
	awaitCond(t, time.Minute, "a first start", func() (bool, string) {
		for _, db := range dbs {
			var at *time.Time
			if err := db.QueryRow(ctx, `select min(claimed_at) from workq.job_runs_all where queue = $1`, queue).Scan(&at); err != nil {
				t.Fatal(err)
			}
			if at != nil && (t0.IsZero() || at.Before(t0)) {
				t0 = *at
			}
		}
		return !t0.IsZero(), "none"
	})
	time.Sleep(span + 2*time.Second)
	stop()

	var all []time.Time
	byKey := map[string][]time.Time{}
	for _, db := range dbs {
		rows, err := db.Query(ctx, `select r.started_at, j.limit_key from workq.runs_all r join workq.job_runs_all j on j.id = r.item_id
			where r.work_table = 'job_runs' and r.queue = $1 order by r.started_at`, queue)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var at time.Time
			var key string
			if err := rows.Scan(&at, &key); err != nil {
				t.Fatal(err)
			}
			all = append(all, at)
			byKey[key] = append(byKey[key], at)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	slices.SortFunc(all, func(a, b time.Time) int { return a.Compare(b) })
	in := func(ts []time.Time) []time.Time {
		var out []time.Time
		for _, x := range ts {
			if !x.Before(t0) && x.Before(t0.Add(span)) {
				out = append(out, x)
			}
		}
		return out
	}
	most, at := maxInWindow(all, time.Second)
	sec := perSecond(all, t0, int(span/time.Second))
	t.Logf("accuracy: queue %s, %d starts/s over 2 shards (%d per shard), %d/s per key; %d starts in the %s from the first (%.1f/s, %.3f of the limit); most in any 1-s window %d (from %s); per second: %v",
		queue, rate, rate/2, keyRate, len(in(all)), span, float64(len(in(all)))/span.Seconds(), float64(len(in(all)))/span.Seconds()/rate, most, ts(at), sec)
	if most > rate {
		t.Errorf("%d starts of the queue in a 1-s window, limit %d", most, rate)
	}
	// The cold keys share the queue's 200/s at first; after the last cold
	// start the hot keys alone fill it, each at its own limit.
	var coldEnd time.Time
	for k, ts := range byKey {
		var i int
		if _, err := fmt.Sscanf(k, "k%d", &i); err == nil && i >= hot {
			for _, x := range ts {
				coldEnd = later(coldEnd, x)
			}
		}
	}
	var hotRates, hotAfter []float64
	worstKey, worstN := "", 0
	for k, ts := range byKey {
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
		n, _ := maxInWindow(ts, time.Second)
		if n > worstN {
			worstKey, worstN = k, n
		}
		if n > keyRate {
			t.Errorf("key %s: %d starts in a 1-s window, limit %d", k, n, keyRate)
		}
		var i int
		if _, err := fmt.Sscanf(k, "k%d", &i); err == nil && i < hot {
			hotRates = append(hotRates, float64(len(in(ts)))/span.Seconds())
			after := 0
			for _, x := range ts {
				if x.After(coldEnd) && x.Before(t0.Add(span)) {
					after++
				}
			}
			hotAfter = append(hotAfter, float64(after)/t0.Add(span).Sub(coldEnd).Seconds())
		}
	}
	sort.Float64s(hotRates)
	sort.Float64s(hotAfter)
	t.Logf("accuracy: most starts of one key in any 1-s window %d (key %s); hot keys' achieved rates over the %s (/s, sorted): %.1f; after the cold keys' last start (%s after the first): %.2f",
		worstN, worstKey, span, hotRates, coldEnd.Sub(t0).Round(time.Millisecond), hotAfter)
}

// runFair runs one fairness run on a fresh database: bigJobs jobs of key
// "big" written first, then smallKeys keys of smallJobs each; one `workq
// worker` at its default settings until every small job is done.
func runFair(t *testing.T, bin string, fair bool, bigJobs, smallKeys, smallJobs int) (lastSmall map[string]time.Duration, pickSmall, pickBig []time.Duration, took time.Duration) {
	const queue = "fair"
	ctx := context.Background()
	url := testdb.URL(t)
	db := openTestPool(t, url)
	c, err := workq.NewClient(db, workq.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if fair {
		if err := c.SetFairness(ctx, workq.QueueRef{Table: workq.TableJobRuns, Queue: queue}, true); err != nil {
			t.Fatal(err)
		}
	}
	if bigJobs > 0 {
		if _, err := db.Exec(ctx, `insert into workq.job_runs (queue, kind, payload, limit_key)
			select $1, 'noop', '{}', 'big' from generate_series(1, $2::int)`, queue, bigJobs); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(ctx, `insert into workq.job_runs (queue, kind, payload, limit_key)
		select $1, 'noop', '{}', 'small-' || k from generate_series(1, $2::int) k, generate_series(1, $3::int) g`, queue, smallKeys, smallJobs); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `vacuum analyze workq.job_runs`); err != nil {
		t.Fatal(err)
	}
	want := smallKeys * smallJobs
	stop := startWorkers(t, bin, []string{url}, 1, "--jobs", "--queues", queue)
	started := time.Now()
	awaitCond(t, 10*time.Minute, "every small job done", func() (bool, string) {
		n := queryScalar[int](t, db, `select count(*)::int from workq.job_runs_all where queue = $1 and limit_key like 'small-%' and status = 2`, queue)
		return n == want, fmt.Sprintf("%d of %d", n, want)
	})
	took = time.Since(started)
	stop()
	var t0 time.Time
	if err := db.QueryRow(ctx, `select min(started_at) from workq.runs_all where work_table = 'job_runs' and queue = $1`, queue).Scan(&t0); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query(ctx, `select j.limit_key, r.started_at, r.finished_at from workq.runs_all r join workq.job_runs_all j on j.id = r.item_id
		where r.work_table = 'job_runs' and r.queue = $1 and r.outcome = 'done'`, queue)
	if err != nil {
		t.Fatal(err)
	}
	lastSmall = map[string]time.Duration{}
	for rows.Next() {
		var key string
		var s, f time.Time
		if err := rows.Scan(&key, &s, &f); err != nil {
			t.Fatal(err)
		}
		// pickup: how long the job waited after the worker began (all were
		// ready before it did)
		if key == "big" {
			pickBig = append(pickBig, s.Sub(t0))
			continue
		}
		pickSmall = append(pickSmall, s.Sub(t0))
		lastSmall[key] = max(lastSmall[key], f.Sub(t0))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return lastSmall, pickSmall, pickBig, took
}

// (b) Fairness: one fair queue, a key of 100,000 ready jobs and 20 keys of
// 100, no-op handlers, one worker at its default settings: each small
// key's last finish (from the run's first start) against the same run
// without the big key; and, for contrast, the run with the big key and
// fairness off.
func measureFairness(t *testing.T, bin string) {
	const big, keys, each = 100_000, 20, 100
	report := func(name string, last map[string]time.Duration, ps, pb []time.Duration, took time.Duration) time.Duration {
		var worst time.Duration
		for _, d := range last {
			worst = max(worst, d)
		}
		t.Logf("fairness %s: small keys' last finish %s after the first start (latest key); small pickup p50 %s p99 %s (%d jobs); big pickup p50 %s p99 %s (%d started while the small keys ran); wall %s",
			name, worst.Round(time.Millisecond), durQuantile(ps, .5).Round(time.Millisecond), durQuantile(ps, .99).Round(time.Millisecond), len(ps),
			durQuantile(pb, .5).Round(time.Millisecond), durQuantile(pb, .99).Round(time.Millisecond), len(pb), took.Round(time.Millisecond))
		return worst
	}
	l0, ps0, pb0, took0 := runFair(t, bin, true, 0, keys, each)
	alone := report("fair, small keys alone", l0, ps0, pb0, took0)
	l1, ps1, pb1, took1 := runFair(t, bin, true, big, keys, each)
	with := report("fair, with the big key", l1, ps1, pb1, took1)
	var ratios []float64
	for k, d := range l1 {
		ratios = append(ratios, float64(d)/float64(max(l0[k], time.Millisecond)))
	}
	sort.Float64s(ratios)
	t.Logf("fairness: latest small finish with/without the big key %.2f (target <= 2); per key ratios min %.2f median %.2f max %.2f",
		float64(with)/float64(max(alone, time.Millisecond)), ratios[0], ratios[len(ratios)/2], ratios[len(ratios)-1])
	l2, ps2, pb2, took2 := runFair(t, bin, false, big, keys, each)
	report("NOT fair, with the big key", l2, ps2, pb2, took2)
}

// throttler is the adaptive measurement's receiver: it accepts at most
// limit requests in any sliding second and answers 429 with Retry-After:
// 2 above that.
type throttler struct {
	limit    int
	mu       sync.Mutex
	recent   []time.Time     // accepted in the last second
	accepted map[string]int  // message id -> times accepted
	acceptAt []time.Time     // every accepted request
	rejectAt []time.Time     // every 429
	attempts map[string]bool // attempt headers seen on accepted requests
}

func (h *throttler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get("Workq-Message-Id")
	now := time.Now()
	h.mu.Lock()
	i := 0
	for i < len(h.recent) && !h.recent[i].After(now.Add(-time.Second)) {
		i++
	}
	h.recent = h.recent[i:]
	if len(h.recent) >= h.limit {
		h.rejectAt = append(h.rejectAt, now)
		h.mu.Unlock()
		w.Header().Set("Retry-After", "2")
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	h.recent = append(h.recent, now)
	h.accepted[id]++
	h.acceptAt = append(h.acceptAt, now)
	h.attempts[r.Header.Get("Workq-Attempt")] = true
	h.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// (c) Adaptive: a receiver that takes 100 requests in any second and
// answers 429 with Retry-After: 2 above it; a relay (one `workq worker
// --outbox`, default settings) with the webhook publisher and a backlog of
// 20,000 messages, for 75 s from the first delivery.
func measureAdaptive(t *testing.T, bin string) {
	const topic, backlog, limit = "adapt.msg", 20_000, 100
	const span = 75 * time.Second
	ctx := context.Background()
	url := testdb.URL(t)
	db := openTestPool(t, url)
	h := &throttler{limit: limit, accepted: map[string]int{}, attempts: map[string]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	if f := os.Getenv("WORKQ_MEASURE_SQL"); f != "" {
		// An experiment: SQL run on the measurement's database before the
		// relay starts (a proposed workq_flow_throttle, say).
		sql, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(ctx, string(sql)); err != nil {
			t.Fatalf("WORKQ_MEASURE_SQL %s: %v", f, err)
		}
		t.Logf("adaptive: ran %s first", f)
	}
	sendMessages(t, db, "default", topic, backlog, 0)
	stop := startWorkers(t, bin, []string{url}, 1, "--outbox", "--queues", "default",
		"--webhook-allow", ln.Addr().String(), "--outbox-webhook", topic+"=http://"+ln.Addr().String()+"/in", "--outbox-webhook-secret", "measure-secret")
	awaitCond(t, time.Minute, "a first delivery", func() (bool, string) {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.acceptAt) > 0, "none"
	})
	time.Sleep(span)
	stop()
	_ = srv.Close()

	h.mu.Lock()
	defer h.mu.Unlock()
	t0 := h.acceptAt[0]
	n := int(span / time.Second)
	acc, rej := perSecond(h.acceptAt, t0, n), perSecond(h.rejectAt, t0, n)
	sent := make([]int, n)
	for i := range sent {
		sent[i] = acc[i] + rej[i]
	}
	// settled: every second from then on had at most limit requests
	// (delivered ones cannot exceed it: the receiver refuses the rest)
	settle := 0
	for i := n - 1; i >= 0; i-- {
		if sent[i] > limit {
			settle = i + 1
			break
		}
	}
	minute, minuteSent := 0, 0
	for i := range 60 {
		minute += acc[i]
		minuteSent += sent[i]
	}
	most, at := maxInWindow(h.acceptAt, time.Second)
	dups := 0
	for _, k := range h.accepted {
		if k > 1 {
			dups += k - 1
		}
	}
	t.Logf("adaptive: requests per second:  %v", sent)
	t.Logf("adaptive: delivered per second: %v", acc)
	t.Logf("adaptive: 429s per second:      %v", rej)
	t.Logf("adaptive: requests at or below %d/s in every second from second %d on; over the first minute %.1f requests/s, %.1f delivered/s (%.0f%% of the receiver's %d/s); %d accepted (%d distinct, %d duplicates), %d answered 429; most accepted in any sliding second %d (at %s); attempt headers on accepted requests %v",
		limit, settle, float64(minuteSent)/60, float64(minute)/60, float64(minute)/60/limit*100, limit, len(h.acceptAt), len(h.accepted), dups, len(h.rejectAt), most, at.Format("15:04:05.000"), h.attempts)

	var done, maxAttempts, retries, throttled, doneNotAccepted int
	if err := db.QueryRow(ctx, `select count(*) filter (where status = 2), coalesce(max(attempts) filter (where status = 2), 0) from workq.outbox`).
		Scan(&done, &maxAttempts); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(ctx, `select count(*) filter (where outcome = 'retry'), count(*) filter (where outcome = 'snoozed' and error like 'throttled for%')
		from workq.runs where work_table = 'outbox'`).Scan(&retries, &throttled); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query(ctx, `select message_id::text from workq.outbox where status = 2`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		if h.accepted[id] == 0 {
			doneNotAccepted++
		}
	}
	t.Logf("adaptive: %d done in the outbox (max attempts of a done message %d), %d runs retried, %d runs snoozed as throttled; done but never accepted %d; accepted but not done %d",
		done, maxAttempts, retries, throttled, doneNotAccepted, len(h.accepted)-done+doneNotAccepted)
	if dups > 0 || doneNotAccepted > 0 || maxAttempts > 1 || retries > 0 {
		t.Errorf("lost, duplicated or counted: %d duplicates, %d done but never accepted, max attempts %d, %d retries", dups, doneNotAccepted, maxAttempts, retries)
	}
}
