package lease_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/workqtype"
)

// flowEnv is a database with job runs to claim under flow control.
type flowEnv struct {
	t    *testing.T
	ctx  context.Context
	pool *pgxpool.Pool
}

func newFlowEnv(t *testing.T, conns int32) *flowEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return &flowEnv{t: t, ctx: ctx, pool: testdb.PoolWith(t, conns)}
}

func (f *flowEnv) exec(sql string, args ...any) {
	f.t.Helper()
	if _, err := f.pool.Exec(f.ctx, sql, args...); err != nil {
		f.t.Fatalf("%s: %v", sql, err)
	}
}

// jobs enqueues n job runs of queue, kind and limit key (nil: none).
func (f *flowEnv) jobs(queue, kind string, key *string, n int) {
	f.t.Helper()
	f.exec(`insert into workq.job_runs (queue, kind, limit_key) select $1, $2, $3 from generate_series(1, $4)`, queue, kind, key, n)
}

func (f *flowEnv) rule(r lease.FlowRule) {
	f.t.Helper()
	if err := lease.SetFlowRule(f.ctx, f.pool, r); err != nil {
		f.t.Fatalf("set %+v: %v", r, err)
	}
}

func (f *flowEnv) claim(queue string, max int, cur *lease.FlowCursor) lease.Claim {
	f.t.Helper()
	c, err := lease.New(f.pool, lease.JobRuns).Claim(f.ctx, lease.ClaimParams{Queue: queue, Max: max, Lease: time.Minute, WorkerID: "t", Flow: cur})
	if err != nil {
		f.t.Fatalf("claim %s: %v", queue, err)
	}
	return c
}

func (f *flowEnv) ack(c lease.Claim) {
	f.t.Helper()
	ids := make([]int64, len(c.Items))
	for i, it := range c.Items {
		ids[i] = it.ID
	}
	if len(ids) == 0 {
		return
	}
	if err := lease.New(f.pool, lease.JobRuns).Ack(f.ctx, c.Token, ids...); err != nil {
		f.t.Fatalf("ack: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

// starts reads the run archive's start times of queue's attempts (and
// their limit keys), oldest first.
func (f *flowEnv) starts(queue string) (at []time.Time, keys []string) {
	f.t.Helper()
	rows, err := f.pool.Query(f.ctx, `select r.started_at, coalesce(j.limit_key, '') from workq.runs_all r join workq.job_runs_all j on j.id = r.item_id
		where r.work_table = 'job_runs' and r.queue = $1 order by r.started_at`, queue)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var t time.Time
		var k string
		if err := rows.Scan(&t, &k); err != nil {
			f.t.Fatal(err)
		}
		at, keys = append(at, t), append(keys, k)
	}
	if err := rows.Err(); err != nil {
		f.t.Fatal(err)
	}
	return at, keys
}

// maxInWindow is the most starts in any window [s, s+period) (every window
// that starts at a start: no other window holds more).
func maxInWindow(at []time.Time, period time.Duration) int {
	most, j := 0, 0
	for i := range at {
		for j < len(at) && at[j].Sub(at[i]) < period {
			j++
		}
		most = max(most, j-i)
	}
	return most
}

// A rate limit holds in every sliding window under many concurrent
// claimers, and a backlog reaches it.
func TestFlowRateNeverAboveLimitUnderConcurrency(t *testing.T) {
	const (
		rate     = 40
		period   = 400 * time.Millisecond
		claimers = 8
		runFor   = 2 * time.Second
	)
	f := newFlowEnv(t, claimers+2)
	f.jobs("limited", "k", nil, 2000)
	f.rule(lease.FlowRule{Table: lease.JobRuns, Queue: "limited", Rate: rate, Period: period})

	ctx, stop := context.WithTimeout(f.ctx, runFor)
	defer stop()
	var wg sync.WaitGroup
	errs := make(chan error, claimers)
	for w := 0; w < claimers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var cur lease.FlowCursor
			e := lease.New(f.pool, lease.JobRuns)
			for ctx.Err() == nil {
				c, err := e.Claim(f.ctx, lease.ClaimParams{Queue: "limited", Max: 7, Lease: time.Minute, WorkerID: fmt.Sprint(w), Flow: &cur})
				if err != nil {
					errs <- err
					return
				}
				if len(c.Items) == 0 {
					time.Sleep(2 * time.Millisecond)
					continue
				}
				ids := make([]int64, len(c.Items))
				for i, it := range c.Items {
					ids[i] = it.ID
				}
				if err := e.Ack(f.ctx, c.Token, ids...); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	at, _ := f.starts("limited")
	if got := maxInWindow(at, period); got != rate {
		t.Fatalf("most starts in a window of %s: %d, want exactly the rate %d (never more; a backlog reaches it)", period, got, rate)
	}
	if len(at) < rate*2 {
		t.Fatalf("%d starts in %s at %d per %s: the limit held the queue back for good", len(at), runFor, rate, period)
	}
}

// Concurrency 1 per key: two items of one key are never in progress at
// once, whichever claimer takes them; other keys go on meanwhile.
func TestFlowKeyConcurrencyOneAtATime(t *testing.T) {
	const claimers = 6
	f := newFlowEnv(t, claimers+2)
	for k := 0; k < 12; k++ {
		f.jobs("keyed", "k", ptr(fmt.Sprintf("tenant-%02d", k)), 15)
	}
	f.rule(lease.FlowRule{Table: lease.JobRuns, Queue: "keyed", PerKey: true, Concurrency: 1})

	var (
		mu   sync.Mutex
		busy = map[string]bool{}
		done int
		wg   sync.WaitGroup
	)
	errs := make(chan error, claimers)
	for w := 0; w < claimers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var cur lease.FlowCursor
			e := lease.New(f.pool, lease.JobRuns)
			for idle := 0; idle < 200; {
				c, err := e.Claim(f.ctx, lease.ClaimParams{Queue: "keyed", Max: 5, Lease: time.Minute, WorkerID: fmt.Sprint(w), Flow: &cur})
				if err != nil {
					errs <- err
					return
				}
				if len(c.Items) == 0 {
					mu.Lock()
					finished := done == 12*15
					mu.Unlock()
					if finished {
						return
					}
					idle++
					time.Sleep(5 * time.Millisecond)
					continue
				}
				mu.Lock()
				for _, it := range c.Items {
					if busy[it.LimitKey] {
						mu.Unlock()
						errs <- fmt.Errorf("key %s claimed while in progress", it.LimitKey)
						return
					}
					busy[it.LimitKey] = true
				}
				mu.Unlock()
				time.Sleep(time.Millisecond)
				ids := make([]int64, len(c.Items))
				mu.Lock()
				for i, it := range c.Items {
					ids[i] = it.ID
					busy[it.LimitKey] = false // before the ack commits: no later claim can see it free earlier
				}
				done += len(ids)
				mu.Unlock()
				if err := e.Ack(f.ctx, c.Token, ids...); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if done != 12*15 {
		t.Fatalf("ran %d of %d jobs", done, 12*15)
	}
	// The archive agrees: per key, each attempt started after the one
	// before it finished.
	var overlaps int
	if err := f.pool.QueryRow(f.ctx, `select count(*) from workq.runs_all a join workq.job_runs_all ja on ja.id = a.item_id,
		workq.runs_all b join workq.job_runs_all jb on jb.id = b.item_id
		where ja.limit_key = jb.limit_key and a.run_id <> b.run_id and a.queue = 'keyed' and b.queue = 'keyed'
		  and b.started_at >= a.started_at and b.started_at < a.finished_at`).Scan(&overlaps); err != nil {
		t.Fatal(err)
	}
	if overlaps != 0 {
		t.Fatalf("%d attempts started before the previous attempt of their key finished (run archive)", overlaps)
	}
}

// Fair claims take keys in turn: a key with a big backlog gets one share
// of a claim, not the claim.
func TestFlowFairClaimsTakeKeysInTurn(t *testing.T) {
	f := newFlowEnv(t, 4)
	f.jobs("fair", "k", ptr("big"), 500) // enqueued first: first in claim order
	for k := 0; k < 4; k++ {
		f.jobs("fair", "k", ptr(fmt.Sprintf("small-%d", k)), 5)
	}
	if err := lease.SetFair(f.ctx, f.pool, lease.JobRuns, "fair", true); err != nil {
		t.Fatal(err)
	}
	var cur lease.FlowCursor
	c := f.claim("fair", 10, &cur)
	per := map[string]int{}
	for _, it := range c.Items {
		per[it.LimitKey]++
	}
	if len(c.Items) != 10 || per["big"] > 2 {
		t.Fatalf("a fair claim of 10 over 5 keys took %v", per)
	}
	// Without fairness the same claim takes the big key's head.
	if err := lease.SetFair(f.ctx, f.pool, lease.JobRuns, "fair", false); err != nil {
		t.Fatal(err)
	}
	c = f.claim("fair", 10, &cur)
	for _, it := range c.Items {
		if it.LimitKey != "big" {
			t.Fatalf("an unfair claim took %q before the big key's older jobs", it.LimitKey)
		}
	}
	if cur.On() {
		t.Fatal("the queue is still under flow control with nothing set")
	}
}

// A paused kind is passed over; the queue's other kinds go on; resuming
// lets it run, and the queue leaves flow control.
func TestFlowPauseKind(t *testing.T) {
	f := newFlowEnv(t, 4)
	f.jobs("mixed", "slow", nil, 3)
	f.jobs("mixed", "fast", nil, 3)
	if ok, err := lease.PauseKind(f.ctx, f.pool, lease.JobRuns, "mixed", "slow", "test", "incident"); err != nil || !ok {
		t.Fatalf("pause: %v %v", ok, err)
	}
	c := f.claim("mixed", 10, nil)
	if len(c.Items) != 3 || slices.ContainsFunc(c.Items, func(it lease.Item) bool { return it.Kind != "fast" }) {
		t.Fatalf("claimed %d items with a paused kind among them", len(c.Items))
	}
	if ok, err := lease.ResumeKind(f.ctx, f.pool, lease.JobRuns, "mixed", "slow"); err != nil || !ok {
		t.Fatalf("resume: %v %v", ok, err)
	}
	if c = f.claim("mixed", 10, nil); len(c.Items) != 3 {
		t.Fatalf("after resume claimed %d, want the 3 slow ones", len(c.Items))
	}
	var n int
	if err := f.pool.QueryRow(f.ctx, `select count(*) from workq.flow_queues`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("flow_queues has %d rows after the last setting went (%v)", n, err)
	}
}

// A kind's concurrency holds within a queue of several kinds.
func TestFlowKindConcurrency(t *testing.T) {
	f := newFlowEnv(t, 4)
	f.jobs("kinds", "heavy", nil, 10)
	f.jobs("kinds", "light", nil, 10)
	f.rule(lease.FlowRule{Table: lease.JobRuns, Queue: "kinds", Kind: "heavy", Concurrency: 2})
	c := f.claim("kinds", 20, nil)
	per := map[string]int{}
	for _, it := range c.Items {
		per[it.Kind]++
	}
	if per["heavy"] != 2 || per["light"] != 10 {
		t.Fatalf("claimed %v, want 2 heavy (its concurrency) and all 10 light", per)
	}
	if c2 := f.claim("kinds", 20, nil); len(c2.Items) != 0 {
		t.Fatalf("claimed %d more with heavy at its concurrency", len(c2.Items))
	}
	st, err := lease.ReadFlow(f.ctx, f.pool)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Rules) != 1 || st.Rules[0].InProgress != 2 {
		t.Fatalf("the rule's use: %+v, want 2 in progress", st.Rules)
	}
	f.ack(c)
	if c3 := f.claim("kinds", 20, nil); len(c3.Items) != 2 {
		t.Fatalf("after the heavy ones finished claimed %d, want 2", len(c3.Items))
	}
}

// A throttle of a key stops its claims until it ends, other keys go on,
// and afterwards the key starts at an adapted rate.
func TestFlowThrottleKey(t *testing.T) {
	f := newFlowEnv(t, 4)
	f.jobs("api", "call", ptr("acme"), 50)
	f.jobs("api", "call", ptr("globex"), 5)
	until, err := lease.Throttle(f.ctx, f.pool, lease.JobRuns, "api", "", "acme", 700*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	var cur lease.FlowCursor
	c := f.claim("api", 100, &cur)
	for _, it := range c.Items {
		if it.LimitKey == "acme" {
			t.Fatalf("claimed a job of the throttled key %v before %v", it.LimitKey, until)
		}
	}
	if len(c.Items) != 5 || !cur.Limited() {
		t.Fatalf("claimed %d (limited %v), want globex's 5 and a limited claim", len(c.Items), cur.Limited())
	}
	time.Sleep(time.Until(until) + 50*time.Millisecond)
	c = f.claim("api", 100, &cur)
	if len(c.Items) == 0 || len(c.Items) >= 50 {
		t.Fatalf("after the throttle claimed %d of acme's 50: want some, at an adapted rate, not all", len(c.Items))
	}
}

// Bad rules are refused with ErrInvalid and write nothing.
func TestFlowRuleValidation(t *testing.T) {
	f := newFlowEnv(t, 2)
	bad := []lease.FlowRule{
		{Table: lease.JobRuns, Queue: "q"},
		{Table: lease.JobRuns, Queue: "q", Rate: -1},
		{Table: lease.JobRuns, Queue: "q", Rate: 1, Period: time.Microsecond},
		{Table: lease.JobRuns, Queue: "q", Rate: 1, Period: 25 * time.Hour},
		{Table: lease.JobRuns, Queue: "q", Concurrency: 1, Period: time.Second},
		{Table: lease.JobRuns, Queue: "q", Kind: "k", PerKey: true, Rate: 1},
		{Table: lease.Inbox, Queue: "q", PerKey: true, Rate: 1},
		{Table: lease.Outbox, Queue: "q", Kind: "topic", Rate: 1},
		{Table: "nope", Queue: "q", Rate: 1},
		{Table: lease.JobRuns, Queue: "", Rate: 1},
	}
	for _, r := range bad {
		if err := lease.SetFlowRule(f.ctx, f.pool, r); !errors.Is(err, workqtype.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", r, err)
		}
	}
	var n int
	if err := f.pool.QueryRow(f.ctx, `select (select count(*) from workq.flow_limits) + (select count(*) from workq.flow_queues)`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("refused rules wrote %d rows (%v)", n, err)
	}
}

// The outbox's flow claim: a queue rate limits its ordered claim.
func TestFlowOutboxQueueRate(t *testing.T) {
	f := newFlowEnv(t, 4)
	f.exec(`insert into workq.outbox (queue, topic, payload) select 'relay', 'hook', '{}' from generate_series(1, 30)`)
	f.rule(lease.FlowRule{Table: lease.Outbox, Queue: "relay", Rate: 10, Period: time.Hour})
	var cur lease.FlowCursor
	e := lease.New(f.pool, lease.Outbox)
	c, err := e.Claim(f.ctx, lease.ClaimParams{Queue: "relay", Max: 25, Lease: time.Minute, WorkerID: "t", Flow: &cur})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Items) != 10 {
		t.Fatalf("claimed %d, want the rate's 10", len(c.Items))
	}
	c, err = e.Claim(f.ctx, lease.ClaimParams{Queue: "relay", Max: 25, Lease: time.Minute, WorkerID: "t", Flow: &cur})
	if err != nil || len(c.Items) != 0 || !cur.Limited() || cur.Wait() < 50*time.Minute {
		t.Fatalf("second claim: %d items, limited %v, wait %s, err %v; want none, limited, about an hour", len(c.Items), cur.Limited(), cur.Wait(), err)
	}
}

// The outbox's flow claim logs its starts at the time they happened: a
// claim whose transaction began long before it claimed (here it waits for
// the queue's flow lock, as it does for another claimer's on a loaded
// machine) counts that late start, so the next claim waits a full period
// after it. Logged at the transaction's start, the log was a wait earlier
// than the run archive's started_at, and the next batch started inside the
// same window (10 starts in a window of 1 s at a rate of 5).
func TestFlowOutboxLogsTheClaimTime(t *testing.T) {
	const (
		rate   = 5
		period = time.Second
		hold   = 400 * time.Millisecond
	)
	f := newFlowEnv(t, 4)
	f.exec(`insert into workq.outbox (queue, topic, payload) select 'relay', 'hook', '{}' from generate_series(1, 2 * $1::int)`, rate)
	f.rule(lease.FlowRule{Table: lease.Outbox, Queue: "relay", Rate: rate, Period: period})
	e := lease.New(f.pool, lease.Outbox)

	holder, err := f.pool.Begin(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(context.WithoutCancel(f.ctx)) }()
	if _, err := holder.Exec(f.ctx, `select 1 from workq.flow_queues where work_table = 'outbox' and queue = 'relay' for update`); err != nil {
		t.Fatal(err)
	}
	type result struct {
		c   lease.Claim
		err error
	}
	first := make(chan result, 1)
	var cur lease.FlowCursor
	go func() {
		c, err := e.Claim(f.ctx, lease.ClaimParams{Queue: "relay", Max: 2 * rate, Lease: time.Minute, WorkerID: "t", Flow: &cur})
		first <- result{c, err}
	}()
	// The claim's transaction has begun once it waits for the lock.
	for waiting := false; !waiting; {
		if err := f.pool.QueryRow(f.ctx, `select exists (select 1 from pg_stat_activity
			where datname = current_database() and wait_event_type = 'Lock' and query like '%workq_flow_grant%')`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(hold)
	if err := holder.Commit(f.ctx); err != nil {
		t.Fatal(err)
	}
	r := <-first
	if r.err != nil || len(r.c.Items) != rate {
		t.Fatalf("first claim: %d items, err %v; want the rate's %d", len(r.c.Items), r.err, rate)
	}
	claims := []lease.Claim{r.c}
	for n := rate; n < 2*rate; {
		c, err := e.Claim(f.ctx, lease.ClaimParams{Queue: "relay", Max: 2 * rate, Lease: time.Minute, WorkerID: "t", Flow: &cur})
		if err != nil {
			t.Fatal(err)
		}
		n += len(c.Items)
		claims = append(claims, c)
		if len(c.Items) == 0 {
			time.Sleep(max(cur.Wait(), 2*time.Millisecond))
		}
	}
	for _, c := range claims {
		ids := make([]int64, len(c.Items))
		for i, it := range c.Items {
			ids[i] = it.ID
		}
		if len(ids) > 0 {
			if err := e.Ack(f.ctx, c.Token, ids...); err != nil {
				t.Fatal(err)
			}
		}
	}
	rows, err := f.pool.Query(f.ctx, `select started_at from workq.runs where work_table = 'outbox' and queue = 'relay' order by started_at`)
	if err != nil {
		t.Fatal(err)
	}
	at, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	if err != nil {
		t.Fatal(err)
	}
	if len(at) != 2*rate {
		t.Fatalf("%d attempts in the run archive, want %d", len(at), 2*rate)
	}
	if got := maxInWindow(at, period); got > rate {
		t.Fatalf("%d outbox starts in a window of %s, above the rate %d (starts %v)", got, period, rate, at)
	}
}
