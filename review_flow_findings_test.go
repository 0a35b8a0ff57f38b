package workq_test

// Findings of the flow-control review (docs/notes-rev.md). Each test here
// FAILS on the reviewed code (branch flow at a031be2): it shows a real
// hole, and passes once the hole is fixed.

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/testutil"
)

type revBigArgs struct {
	N int `json:"n"`
}

func (revBigArgs) Kind() string { return "rev.big" }

type revSmallArgs struct {
	N int `json:"n"`
}

func (revSmallArgs) Kind() string { return "rev.small" }

// FINDING 1 (high): on a queue with a rule per key, jobs WITHOUT a limit
// key are starved by a keyed backlog ahead of them. workq_flow_pick takes
// "rows without a key: one more share, from the head of the queue" by
// reading the first 4*want+256 ready rows of the queue in claim order and
// keeping the keyless ones; when those are all one key's rows (held back
// by its concurrency 1), no keyless job is ever taken until that key's
// backlog drains — here never, since the key's running job waits for the
// keyless one. FlowLimit.PerKey's doc says jobs without a key "are not
// held by it".
func TestReviewFindingKeylessStarvedBehindKeyedBacklog(t *testing.T) {
	pool := testdb.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	keylessRan := make(chan struct{})
	var bigRan atomic.Int64
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, j *workq.Job[revBigArgs]) error {
		bigRan.Add(1)
		select { // the tenant's job waits (at most 15s) for the keyless one
		case <-keylessRan:
		case <-time.After(15 * time.Second):
		case <-ctx.Done():
		}
		return nil
	}))
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, j *workq.Job[revSmallArgs]) error {
		close(keylessRan)
		return nil
	}))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers,
		Queues:            map[string]workq.QueueConfig{"tenants": {MaxWorkers: 5}},
		FetchPollInterval: 100 * time.Millisecond, Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.SetFlowLimit(ctx, workq.FlowLimit{Table: workq.TableJobRuns, Queue: "tenants", PerKey: true, Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	params := make([]workq.EnqueueParams, 400)
	for i := range params {
		params[i] = workq.EnqueueParams{Args: revBigArgs{N: i}, Opts: &workq.EnqueueOpts{Queue: "tenants", LimitKey: "big-tenant"}}
	}
	if _, err := client.EnqueueMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Enqueue(ctx, revSmallArgs{}, &workq.EnqueueOpts{Queue: "tenants"}); err != nil {
		t.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer client.Stop(context.Background())
	select {
	case <-keylessRan:
	case <-time.After(10 * time.Second):
		t.Fatalf("FINDING: a job without a limit key did not start in 10s with 4 of 5 workers idle: "+
			"the keyed backlog ahead of it (400 jobs of one key at concurrency 1, %d started) hides it from the keyless share", bigRan.Load())
	}
}

// FINDING 2 (high): on a fair queue (SetFairness true), a paused kind's
// backlog of jobs without a key stops EVERY other kind's jobs without a
// key: the keyless share reads the head of the queue (4*want+256 rows)
// before it drops the paused kind's rows. On a queue that is not fair the
// same pause holds back only its kind (the control below passes).
func TestReviewFindingFairQueuePausedKindStopsOtherKinds(t *testing.T) {
	for _, fair := range []bool{false, true} {
		name := "not fair (control)"
		if fair {
			name = "fair"
		}
		t.Run(name, func(t *testing.T) {
			pool := testdb.Pool(t)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			smallRan := make(chan struct{})
			var bigRan atomic.Int64
			workers := workq.NewWorkers()
			workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, j *workq.Job[revBigArgs]) error {
				bigRan.Add(1)
				return nil
			}))
			workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, j *workq.Job[revSmallArgs]) error {
				close(smallRan)
				return nil
			}))
			client, err := workq.NewClient(pool, workq.Config{Workers: workers,
				Queues:            map[string]workq.QueueConfig{"mixed": {MaxWorkers: 5}},
				FetchPollInterval: 100 * time.Millisecond, Maintenance: workq.MaintenanceConfig{Disabled: true}})
			if err != nil {
				t.Fatal(err)
			}
			if err := client.SetFairness(ctx, workq.QueueRef{Table: workq.TableJobRuns, Queue: "mixed"}, fair); err != nil {
				t.Fatal(err)
			}
			if _, err := client.PauseKind(ctx, workq.KindRef{Table: workq.TableJobRuns, Queue: "mixed", Kind: "rev.big"},
				&workq.ActionOpts{Actor: "review"}); err != nil {
				t.Fatal(err)
			}
			params := make([]workq.EnqueueParams, 400)
			for i := range params {
				params[i] = workq.EnqueueParams{Args: revBigArgs{N: i}, Opts: &workq.EnqueueOpts{Queue: "mixed"}}
			}
			if _, err := client.EnqueueMany(ctx, params); err != nil {
				t.Fatal(err)
			}
			if _, err := client.Enqueue(ctx, revSmallArgs{}, &workq.EnqueueOpts{Queue: "mixed"}); err != nil {
				t.Fatal(err)
			}
			if err := client.Start(ctx); err != nil {
				t.Fatal(err)
			}
			defer client.Stop(context.Background())
			select {
			case <-smallRan:
			case <-time.After(10 * time.Second):
				t.Fatalf("FINDING: kind rev.small (not paused) did not run in 10s on a fair=%v queue: kind rev.big's paused backlog of 400 hides it", fair)
			}
			if n := bigRan.Load(); n != 0 {
				t.Fatalf("%d jobs of the paused kind ran", n)
			}
		})
	}
}

// FINDING 5 (medium): a queue put under flow control by a handler's
// Throttle alone never leaves it. flow_queues.auto is documented "made by
// a throttle alone, removed when the adaptation ends" and concepts.md says
// "a queue with nothing left under flow control (no rule, not fair, no
// paused kind, no throttle) leaves it", but FlowTidy runs only on
// RemoveFlowLimit, SetFairness and ResumeKind: after a throttle, the queue
// stays on the (serialised, slower) flow path forever, FlowStatus lists it
// for good, and each throttled key's flow_state row is never deleted (one
// row per tenant ever throttled). The adaptation is aged here in SQL (an
// hour ago) rather than waited for (about 20 s).
func TestReviewFindingThrottledQueueNeverLeavesFlowControl(t *testing.T) {
	pool := testdb.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var ran atomic.Int64
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, j *workq.Job[revSmallArgs]) error {
		if ran.Add(1) == 1 {
			return workq.Throttle(50 * time.Millisecond)
		}
		return nil
	}))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers,
		Queues:            map[string]workq.QueueConfig{"calls": {MaxWorkers: 2}},
		FetchPollInterval: 100 * time.Millisecond, Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Enqueue(ctx, revSmallArgs{N: 1}, &workq.EnqueueOpts{Queue: "calls"}); err != nil {
		t.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer client.Stop(context.Background())
	for ran.Load() < 2 {
		if ctx.Err() != nil {
			t.Fatal("the throttled job did not run again")
		}
		time.Sleep(20 * time.Millisecond)
	}
	st, err := client.FlowStatus(ctx)
	if err != nil || len(st.Queues) != 1 || !st.Queues[0].Auto {
		t.Fatalf("after the throttle: %+v, %v (want the queue under flow control, auto)", st.Queues, err)
	}
	// The throttle and its adaptation are over (aged by an hour).
	if _, err := pool.Exec(ctx, `update workq.flow_state set throttled_until = now() - interval '1 hour',
		adapt_at = now() - interval '1 hour', log_at = '{}', log_n = '{}'`); err != nil {
		t.Fatal(err)
	}
	// More work runs through the queue, so any claim-time tidy would run.
	for i := range 5 {
		if _, err := client.Enqueue(ctx, revSmallArgs{N: 2 + i}, &workq.EnqueueOpts{Queue: "calls"}); err != nil {
			t.Fatal(err)
		}
	}
	for ran.Load() < 7 {
		if ctx.Err() != nil {
			t.Fatal("the later jobs did not run")
		}
		time.Sleep(20 * time.Millisecond)
	}
	end := time.Now().Add(5 * time.Second)
	for {
		st, err = client.FlowStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Queues) == 0 && len(st.Throttles) == 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("FINDING: the queue is still under flow control (%+v) with no rule, no pause, not fair and its throttle and adaptation over", st.Queues)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// FINDING 6 (low-medium): a lock-order inversion between a flow claim and
// a throttle deadlocks (PostgreSQL aborts one after deadlock_timeout).
// workq_flow_pick locks the queue's flow_queues row FOR UPDATE, then
// upserts the flow_state rows of the keys it took (under a rate per key).
// workq_flow_throttle inserts a key's flow_state row first (a new row: a
// key throttled before its first flow-logged start, e.g. right after an
// operator sets a rate per key because the service answers 429), whose
// foreign-key check then takes KEY SHARE on that same flow_queues row.
// The claim waits for the throttle's new row, the throttle for the
// claim's row lock. The test plays the claim's two steps with the
// migration's own functions on one connection and the throttle on
// another. Proposed fix: workq_flow_throttle locks the flow_queues row
// (FOR KEY SHARE or FOR UPDATE) before it inserts into flow_state.
func TestReviewFindingThrottleDeadlocksWithFlowClaim(t *testing.T) {
	pool := testdb.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := workq.NewClient(pool, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.SetFlowLimit(ctx, workq.FlowLimit{Table: workq.TableJobRuns, Queue: "dl", PerKey: true, Rate: 10}); err != nil {
		t.Fatal(err)
	}
	claim, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer claim.Rollback(context.Background())
	// The flow claim's first step: its queue's row.
	if _, err := claim.Exec(ctx, `select 1 from workq.flow_queues where work_table = 'job_runs' and queue = 'dl' for update`); err != nil {
		t.Fatal(err)
	}
	thr := make(chan error, 1)
	go func() {
		_, err := pool.Exec(ctx, `select workq.workq_flow_throttle('job_runs', 'dl', '', 'tenant-1', 1000)`)
		thr <- err
	}()
	// Wait until the throttle is blocked on a lock.
	for {
		var n int
		if err := pool.QueryRow(ctx, `select count(*) from pg_stat_activity
			where wait_event_type = 'Lock' and query like '%workq_flow_throttle%' and pid <> pg_backend_pid()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the throttle never waited")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The flow claim's last step: the start of the key it took.
	_, claimErr := claim.Exec(ctx, `select workq.workq_flow_log('job_runs', 'dl', '', 'tenant-1', 1, clock_timestamp())`)
	if claimErr == nil {
		_ = claim.Commit(ctx)
	} else {
		_ = claim.Rollback(ctx)
	}
	thrErr := <-thr
	if claimErr != nil || thrErr != nil {
		t.Fatalf("FINDING: a flow claim and a throttle of a new key deadlock: claim: %v; throttle: %v", claimErr, thrErr)
	}
}

// FINDING 3 (medium): the fair walk over keys visits keys that have no
// READY job. workq_flow_pick's skip scan takes "the keys with ready rows"
// as min(limit_key) over status = 0 rows, without run_at <= now() (nor the
// paused kinds): a key whose only jobs are scheduled for later (every
// tenant's nightly report, say) takes one of the claim's at most `want`
// key slots. A claim of 5 slots walks 5 such keys, takes nothing, is
// "limited" and claims again 50 ms later (flowRepoll): with 2,000 tenants
// scheduled for tomorrow, a ready job of another tenant waits about
// 2000/5 × 50 ms = 20 s, and the queue's claimers run 20 skip scans a
// second meanwhile. A queue that is not fair takes it at once.
func TestReviewFindingScheduledKeysDelayReadyKey(t *testing.T) {
	pool := testdb.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ready := make(chan time.Time, 1)
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, j *workq.Job[revBigArgs]) error {
		select {
		case ready <- time.Now():
		default:
		}
		return nil
	}))
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, j *workq.Job[revSmallArgs]) error { return nil }))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers,
		Queues:            map[string]workq.QueueConfig{"tenants": {MaxWorkers: 5}},
		FetchPollInterval: 100 * time.Millisecond, Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.SetFlowLimit(ctx, workq.FlowLimit{Table: workq.TableJobRuns, Queue: "tenants", PerKey: true, Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	tomorrow := time.Now().Add(24 * time.Hour)
	params := make([]workq.EnqueueParams, 2000)
	for i := range params {
		params[i] = workq.EnqueueParams{Args: revSmallArgs{N: i},
			Opts: &workq.EnqueueOpts{Queue: "tenants", LimitKey: fmt.Sprintf("tenant-%04d", i), RunAt: tomorrow}}
	}
	if _, err := client.EnqueueMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer client.Stop(context.Background())
	time.Sleep(200 * time.Millisecond) // the claimers are on the flow path
	at := time.Now()
	if _, err := client.Enqueue(ctx, revBigArgs{}, &workq.EnqueueOpts{Queue: "tenants", LimitKey: "tenant-zzzz"}); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-ready:
		if d := s.Sub(at); d > 5*time.Second {
			t.Fatalf("FINDING: a ready job waited %s behind 2,000 keys that have only jobs scheduled for tomorrow", d)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("FINDING: a ready job did not start in 30s behind 2,000 keys that have only jobs scheduled for tomorrow")
	}
}

// FINDING 1b (high, same root as FINDING 1): on a queue with NO rule at
// all, one tenant's Throttle stops the queue's jobs without a key for as
// long as the throttle and the adaptation after it last. The throttle
// sends the queue down the keyed flow path (a key throttled or adapting),
// and its keyless share reads only the head of the queue, which is the
// throttled tenant's backlog. concepts.md promises the throttle holds back
// "the same limit key" only.
func TestReviewFindingTenantThrottleStopsKeylessJobs(t *testing.T) {
	pool := testdb.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	keylessRan := make(chan struct{})
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, j *workq.Job[revBigArgs]) error {
		return workq.Throttle(30 * time.Second) // the tenant's API answers 429
	}))
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, j *workq.Job[revSmallArgs]) error {
		close(keylessRan)
		return nil
	}))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers,
		Queues:            map[string]workq.QueueConfig{"calls": {MaxWorkers: 5}},
		FetchPollInterval: 100 * time.Millisecond, Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	params := make([]workq.EnqueueParams, 400)
	for i := range params {
		params[i] = workq.EnqueueParams{Args: revBigArgs{N: i}, Opts: &workq.EnqueueOpts{Queue: "calls", LimitKey: "big-tenant"}}
	}
	if _, err := client.EnqueueMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer client.Stop(context.Background())
	for {
		st, err := client.FlowStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Throttles) > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the tenant was never throttled")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := client.Enqueue(ctx, revSmallArgs{}, &workq.EnqueueOpts{Queue: "calls"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-keylessRan:
	case <-time.After(10 * time.Second):
		t.Fatal("FINDING: a job without a limit key did not start in 10s while one tenant was throttled (its backlog fills the head the keyless share reads)")
	}
}

// FINDING 4 (medium): a rule set while another rule of its queue is being
// removed can be lost after SetFlowLimit returned nil. RemoveFlowLimit's
// tidy (FlowTidy: delete the flow_queues row when "no rule, no pause, not
// fair" is left) reads flow_limits with its statement's snapshot; when it
// waits for the row lock of a concurrent SetFlowLimit (FlowQueueEnsure's
// upsert) and then re-checks the row, the new rule is not in that snapshot,
// so it deletes the queue's row and the cascade deletes the rule just
// committed. The test holds SetFlowLimit's two statements (as
// lease.SetFlowRule runs them) in an open transaction, removes the queue's
// other rule through the Client, then commits. The same holds for a kind
// paused (FlowKindPause) or fairness set meanwhile. Proposed fix: the tidy
// first locks the flow_queues row (select ... for update) in its own
// statement, then runs the delete (a new snapshot sees the committed rule).
func TestReviewFindingConcurrentSetLostToRemove(t *testing.T) {
	pool := testdb.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := workq.NewClient(pool, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	old := workq.FlowLimit{Table: workq.TableJobRuns, Queue: "race", Kind: "old.kind", Concurrency: 1}
	if err := client.SetFlowLimit(ctx, old); err != nil {
		t.Fatal(err)
	}
	set, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Rollback(context.Background())
	// SetFlowLimit of rule new.kind: FlowQueueEnsure, then FlowLimitSet.
	if _, err := set.Exec(ctx, `insert into workq.flow_queues (work_table, queue) values ('job_runs', 'race')
		on conflict (work_table, queue) do update set auto = false, updated_at = now()`); err != nil {
		t.Fatal(err)
	}
	if _, err := set.Exec(ctx, `insert into workq.flow_limits (work_table, queue, kind, per_key, concurrency, period_ms)
		values ('job_runs', 'race', 'new.kind', false, 5, 1000)`); err != nil {
		t.Fatal(err)
	}
	removed := make(chan error, 1)
	go func() {
		_, err := client.RemoveFlowLimit(ctx, old)
		removed <- err
	}()
	for { // until the removal waits for the set's row lock (its tidy, or the lock it takes first)
		var n int
		if err := pool.QueryRow(ctx, `select count(*) from pg_stat_activity
			where wait_event_type = 'Lock' and query like '%from workq.flow_queues%' and pid <> pg_backend_pid()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the removal never waited for the set")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := set.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-removed; err != nil {
		t.Fatal(err)
	}
	st, err := client.FlowStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Limits) != 1 || st.Limits[0].Kind != "new.kind" {
		t.Fatalf("FINDING: the rule of new.kind, committed while old.kind's was removed, is gone: limits %+v, queues %+v", st.Limits, st.Queues)
	}
}

// FINDING 7 (medium): flow limits declared in code (Config.FlowLimits)
// make a sharded Client's Start fail when one shard is down, though Start
// otherwise goes on without it (TestShardedDownShardDoesNotStopTheOthers):
// applyFlowLimits returns the shard's error. And a shard that was down at
// Start never gets the declared rules when it comes back (they are set at
// Start only). Start blocks until its context ends (here 20 s), then
// fails. Proposed: at Start, set them on the shards that answer,
// log the others, and set them on a shard when it comes back (where the
// Client already notices it: schemaBack / the outage log).
func TestReviewFindingDeclaredLimitsStopShardedStart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	downPool, px := testutil.ProxiedPool(t, testdb.URL(t))
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, j *workq.Job[revSmallArgs]) error { return nil }))
	client, err := workq.NewShardedClient([]workq.Shard{{Name: "up", Pool: testdb.Pool(t)}, {Name: "down", Pool: downPool}},
		workq.Config{Workers: workers, MaxWorkers: 4, FetchPollInterval: 50 * time.Millisecond, LeaseTTL: 2 * time.Second,
			FlowLimits:  []workq.FlowLimit{{Table: workq.TableJobRuns, Queue: "default", PerKey: true, Concurrency: 1}},
			Maintenance: workq.MaintenanceConfig{LeaderTTL: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	px.Cut()
	if err := client.Start(ctx); err != nil {
		t.Fatalf("FINDING: Start of a sharded Client with one shard down fails because of its declared flow limits: %v", err)
	}
	defer client.Stop(context.Background())
}

// FINDING 3b (medium): an idle queue under flow control polls the
// database every 50 ms (flowRepoll) instead of every FetchPollInterval,
// for as long as the setting lasts. workq_flow_pick answers "limited"
// whenever it took fewer than it asked for AND (v_left < want, or a kind
// is blocked, or keys were visited), whether or not a limit held back a
// ready row, and the producer then re-claims after 50 ms. So each of
// these idle queues re-claims 20 times a second, per queue and process:
// a fair queue whose only job is scheduled for tomorrow; a queue with a
// paused kind (no job of it, or none at all); a queue whose rate (3/s)
// is below its MaxWorkers (10). Measured (FetchPollInterval 2 s, 4 s
// idle): control 13 to 17 transactions, each of the three about 90.
// Proposed: "limited" only when a limit held back a READY row (a key with
// room 0 that has a ready row, a blocked kind with a ready row, a budget
// below the ready rows), else sleep until the poll or a NOTIFY.
func TestReviewFindingIdleFlowQueuePollsEvery50ms(t *testing.T) {
	setups := []struct {
		name string
		set  func(ctx context.Context, c *workq.Client) error
	}{
		{"control: no flow control", func(ctx context.Context, c *workq.Client) error { return nil }},
		{"fair, one job scheduled tomorrow", func(ctx context.Context, c *workq.Client) error {
			if err := c.SetFairness(ctx, workq.QueueRef{Table: workq.TableJobRuns, Queue: "default"}, true); err != nil {
				return err
			}
			_, err := c.Enqueue(ctx, revSmallArgs{}, &workq.EnqueueOpts{LimitKey: "t1", RunAt: time.Now().Add(24 * time.Hour)})
			return err
		}},
		{"a paused kind, no jobs", func(ctx context.Context, c *workq.Client) error {
			_, err := c.PauseKind(ctx, workq.KindRef{Table: workq.TableJobRuns, Queue: "default", Kind: "rev.small"}, &workq.ActionOpts{Actor: "review"})
			return err
		}},
		{"rate 3/s below MaxWorkers 10, no jobs", func(ctx context.Context, c *workq.Client) error {
			return c.SetFlowLimit(ctx, workq.FlowLimit{Table: workq.TableJobRuns, Queue: "default", Rate: 3})
		}},
	}
	count := make([]int64, len(setups))
	for i, su := range setups {
		pool := testdb.Pool(t)
		ctx := context.Background()
		workers := workq.NewWorkers()
		workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, j *workq.Job[revSmallArgs]) error { return nil }))
		client, err := workq.NewClient(pool, workq.Config{Workers: workers, MaxWorkers: 10, FetchPollInterval: 2 * time.Second,
			Maintenance: workq.MaintenanceConfig{Disabled: true}})
		if err != nil {
			t.Fatal(err)
		}
		if err := su.set(ctx, client); err != nil {
			t.Fatal(err)
		}
		if err := client.Start(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		read := func() (n int64) {
			if err := pool.QueryRow(ctx, `select xact_commit + xact_rollback from pg_stat_database where datname = current_database()`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		a := read()
		time.Sleep(4 * time.Second)
		count[i] = read() - a
		client.Stop(ctx)
		t.Logf("%s: %d transactions in 4 s idle", su.name, count[i])
	}
	for i, su := range setups[1:] {
		if n := count[i+1]; n > 2*count[0]+10 {
			t.Errorf("FINDING: idle queue (%s) ran %d transactions in 4 s, %d without flow control: it re-claims every 50 ms", su.name, n, count[0])
		}
	}
}
