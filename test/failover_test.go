package test

// The failover scenarios of issue 22 (docs/reliability.md): a primary and a
// standby started from the local server binaries (pgembed), the load of
// scenario 2 (outageRig) reaching them by a URL that names both with
// target_session_attrs=read-write, the primary stopped and the standby
// promoted.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/workq/workq/internal/pgembed"
	"github.com/workq/workq/internal/testutil"
)

// ownPair starts a primary (synchronous_commit on) with a migrated database
// faults and a standby of it (synchronous with sync; otherwise asynchronous
// and streaming through the returned proxy, which the test can cut to pause
// replication), and returns them with a URL naming both nodes with
// target_session_attrs=read-write, as a client of a failover pair connects.
func ownPair(t *testing.T, sync bool) (primary, standby *pgembed.Server, px *testutil.Proxy, url string) {
	t.Helper()
	primary, _ = ownServer(t, pgembed.Options{Settings: map[string]string{"synchronous_commit": "on"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o := pgembed.StandbyOptions{Sync: sync}
	if !sync {
		px = testutil.NewProxy(t, fmt.Sprintf("127.0.0.1:%d", primary.Port()))
		t.Cleanup(px.Restore)
		o.Via = px.Addr()
	}
	standby, err := primary.StartStandby(ctx, o)
	if err != nil {
		t.Fatalf("start the standby: %v", err)
	}
	t.Cleanup(func() {
		if err := standby.Stop(); err != nil {
			t.Errorf("stop the standby: %v", err)
		}
	})
	url = fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/faults?sslmode=disable&target_session_attrs=read-write",
		primary.Port(), standby.Port())
	return primary, standby, px, url
}

// failoverDetect is how long a failed primary stays down before its standby
// is promoted: the detection time of a failover manager, and longer than
// the maintenance leader's lock TTL (3 s), so that the lock expires and the
// leader takes it again on the new primary under a greater token.
const failoverDetect = 4 * time.Second

// failoverBound is the longest a worker may take to claim again after a
// promotion; a generous bound for a loaded two-core machine: the figures
// are logged.
const failoverBound = 30 * time.Second

// Scenario 9: failover to a synchronous standby, twice. The load of
// scenario 2 (two workers, a leader, the API, a job enqueued every 10ms)
// runs on a primary A with a synchronous standby B. A is stopped fast
// (sessions ended, its WAL sent), B promoted; A is rebuilt from B's data
// (pg_basebackup) as B's synchronous standby while the load runs on; then B
// is stopped immediately (a crash) and A promoted. While the new primary
// has no standby it acknowledges commits alone (synchronous_standby_names
// empty, as pg_auto_failover does while the other node is gone); nothing
// fails in that window. No process exits, each worker claims again after
// each promotion (within failoverBound), the API is ready again, the
// leader takes its lock again on each new primary under a greater token,
// every acknowledged enqueue is done, and the history checker, whose log
// is replicated with the data, finds nothing done whose handler had not
// finished and no two holders at once.
func testFaultFailover(t *testing.T, bin string) {
	// Long enough that the outage (failoverDetect, the promotion and the
	// reconnection, on a loaded machine) stays within half of it, so no
	// answered item needs to run again (issue 22, item 4).
	const lease = 15 * time.Second
	ctx := context.Background()
	a, b, _, url := ownPair(t, true)
	r := startOutageRig(t, bin, url, "failover", scaled(1000, 4000), lease)
	type failover struct {
		mode             string
		stopped          time.Time
		promoted         time.Time
		promote, rebuild time.Duration
		resume           []time.Duration
		apiReady         time.Duration
		tokens           [2]int64
	}
	var fos []failover
	for i, step := range []struct {
		mode     string
		old, new *pgembed.Server
	}{{pgembed.ShutdownFast, a, b}, {pgembed.ShutdownImmediate, b, a}} {
		time.Sleep(1500 * time.Millisecond) // under load
		fo := failover{mode: step.mode}
		fo.tokens[0] = r.leaderToken()
		fo.stopped = time.Now()
		if err := step.old.StopMode(ctx, step.mode); err != nil {
			t.Fatalf("stop the primary (%s): %v", step.mode, err)
		}
		time.Sleep(failoverDetect)
		start := time.Now()
		if err := step.new.Promote(ctx); err != nil {
			t.Fatalf("promote the standby: %v", err)
		}
		fo.promoted = time.Now()
		fo.promote = fo.promoted.Sub(start)
		after := "the promotion after the " + step.mode + " stop"
		fo.resume = r.awaitClaims(fo.promoted, after)
		fo.apiReady = r.awaitAPI(fo.promoted, after)
		awaitCond(t, time.Minute, "the leader's lock taken again after "+after, func() (bool, string) {
			fo.tokens[1] = r.leaderToken()
			return fo.tokens[1] > fo.tokens[0], fmt.Sprintf("token %d, %d before", fo.tokens[1], fo.tokens[0])
		})
		if i == 0 {
			start := time.Now()
			if err := step.old.Follow(ctx, step.new, pgembed.StandbyOptions{Sync: true}); err != nil {
				t.Fatalf("rebuild the old primary as the new one's synchronous standby: %v", err)
			}
			fo.rebuild = time.Since(start)
		}
		fos = append(fos, fo)
	}
	last := fos[len(fos)-1]
	time.Sleep(time.Second)
	r.drain(last.promoted)
	r.checkLeader(last.promoted, last.tokens[0])
	lost, committedAnyway := r.lostEnqueues()
	for _, l := range lost {
		t.Error(l)
	}
	h, stats := r.stop()
	h.check(t, historyOpts{AllDone: true})

	tokens := []int64{fos[0].tokens[0]}
	for _, fo := range fos {
		if fo.tokens[0] < tokens[len(tokens)-1] {
			t.Errorf("the leader's token went from %d down to %d", tokens[len(tokens)-1], fo.tokens[0])
		}
		tokens = append(tokens, fo.tokens[1])
		for i, d := range fo.resume {
			if d > failoverBound {
				t.Errorf("%s claimed again %s after the promotion (%s stop); want within %s", r.workers[i].id, d, fo.mode, failoverBound)
			}
		}
		t.Logf("%s stop of the primary, promotion %s later (took %s): workers claimed again %v after it, the API was ready %s after; leader token %d -> %d",
			fo.mode, failoverDetect, fo.promote.Round(time.Millisecond), roundAll(fo.resume), fo.apiReady.Round(time.Millisecond),
			fo.tokens[0], fo.tokens[1])
		if fo.rebuild > 0 {
			t.Logf("the old primary rebuilt as the new one's synchronous standby in %s, under load", fo.rebuild.Round(time.Millisecond))
		}
	}
	// No answered item runs again: a completion waiting when the primary
	// stopped is retried until its lease's local deadline (issue 18), and
	// every outage here, from the stop to the workers' first claim on the
	// new primary, is within half the lease (as in the restart scenario).
	var longest time.Duration
	for _, fo := range fos {
		for _, d := range fo.resume {
			longest = max(longest, fo.promoted.Add(d).Sub(fo.stopped))
		}
	}
	switch reruns := h.answeredReruns(); {
	case longest >= lease/2:
		t.Errorf("the outage lasted %s, not within half the lease (%s): the scenario cannot judge re-runs", longest, lease)
	case len(reruns) > 0:
		t.Errorf("%d items ran again after their handler had been answered, through failovers of at most %s (lease %s):\n%s",
			len(reruns), longest.Round(10*time.Millisecond), lease, formatItems(reruns, 5))
	}
	t.Logf("leader tokens %v; %d job runs, %d outbox messages and %d jobs enqueued during the failovers (%d through the API; %d enqueues failed, %d of those committed anyway) all done; %d answered items ran again; %s",
		tokens, r.backlog/2, r.backlog/2, len(r.prod.acked), len(r.prod.apiAcked), len(r.prod.failed), committedAnyway,
		len(h.answeredReruns()), h.summary())
	t.Logf("worker stats: %v", stats)
}

// roundAll rounds durations to the millisecond for logging.
func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

// The negative control of scenario 9, proving its checks have teeth: the
// same load on a primary with an asynchronous standby whose WAL stream the
// test holds (the proxy between them cut) for two seconds before the
// primary crashes (immediate stop) and the standby is promoted. Commits
// acknowledged in those seconds never reached the standby: the same checks
// as scenario 9 (acknowledged enqueues done, the history checker) must
// report them, or the history rows lost with them.
func testFaultFailoverCaught(t *testing.T, bin string) {
	const lease = 10 * time.Second
	const pause = 2 * time.Second
	ctx := context.Background()
	a, b, px, url := ownPair(t, false)
	r := startOutageRig(t, bin, url, "failover-async", scaled(600, 2000), lease)
	time.Sleep(1500 * time.Millisecond) // under load
	acksBefore := r.query("acknowledged enqueues so far", `select count(*) from workq.job_runs_all where payload->'body' ? 'seq'`)
	px.Cut()
	time.Sleep(pause)
	if err := a.StopMode(ctx, pgembed.ShutdownImmediate); err != nil {
		t.Fatalf("crash the primary: %v", err)
	}
	if err := b.Promote(ctx); err != nil {
		t.Fatalf("promote the standby: %v", err)
	}
	promoted := time.Now()
	resume := r.awaitClaims(promoted, "the promotion")
	apiReady := r.awaitAPI(promoted, "the promotion")
	time.Sleep(time.Second)
	r.drain(promoted)
	lost, _ := r.lostEnqueues()
	h, _ := r.stop()
	vs := h.violations(historyOpts{AllDone: true})
	if len(lost)+len(vs) == 0 {
		t.Fatalf("the checks caught nothing after a failover that lost the last %s of commits: they have no teeth", pause)
	}
	// Group the violations by what they say, numbers aside.
	kinds := map[string]int{}
	for _, v := range vs {
		kinds[strings.TrimSpace(strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' {
				return -1
			}
			return r
		}, v.what))]++
	}
	var b2 strings.Builder
	for k, n := range kinds {
		fmt.Fprintf(&b2, "  %dx %s\n", n, k)
	}
	var first string
	if len(lost) > 0 {
		first = lost[0]
	}
	t.Logf("replication held %s before the crash (%d enqueues stored before the hold); workers claimed again %v and the API was ready %s after the promotion",
		pause, acksBefore, roundAll(resume), apiReady.Round(time.Millisecond))
	t.Logf("CAUGHT: %d of %d acknowledged enqueues lost (first: %s); %d history violations:\n%s",
		len(lost), len(r.prod.acked), first, len(vs), b2.String())
}
