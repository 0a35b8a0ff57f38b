package test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/testutil"
)

// enqueueKeyedWebhooks inserts n webhook job runs to the receiver on queue,
// the i-th with limit key "k<i mod keys>" (none when keys is 0), by SQL.
func enqueueKeyedWebhooks(t *testing.T, db *pgxpool.Pool, rc *receiver, queue string, n, keys int) {
	t.Helper()
	_, err := db.Exec(context.Background(), `insert into workq.job_runs (queue, kind, payload, limit_key)
		select $1, 'webhook', jsonb_build_object('url', $2::text, 'body', jsonb_build_object('scenario', 'flow', 'n', g)),
		       case when $4::int > 0 then 'k' || (g % $4::int) end
		from generate_series(1, $3::int) g`, queue, rc.jobsURL(), n, keys)
	if err != nil {
		t.Fatalf("enqueue %d webhook jobs on %s: %v", n, queue, err)
	}
}

// Scenario 4b: flow limits under kills and link cuts. Three `workq worker`
// processes, each through a proxy of its own, work two queues: one with a
// rate limit (25 starts in any second) and one with a concurrency of one
// per limit key (8 keys), handlers taking 100-250 ms at the receiver,
// while the test kill -9s a process holding leases or cuts its link for
// longer than the lease, six times in turn. The history checker then
// reads, besides its invariants: every job done (nothing lost); no window
// of a second, starting at any claim, with more than 25 starts of the rate
// queue (the claims' now(), which is the run archive's started_at and what
// the flow log counts); never two jobs of one key in progress (from claim
// to completion or reap) or at the receiver at once. It also wants each
// limit to have been what held the workers back: a second with at least
// half the rate's starts, and several keys in progress side by side.
func testFaultFlow(t *testing.T, bin string) {
	const rateQ, keyQ, rate, keys, lease = "frate", "fkey", 25, 8, 3 * time.Second
	nRate, nKey := scaled(400, 3000), scaled(400, 3000)
	ctx := context.Background()
	url := testdb.URL(t)
	db := openTestPool(t, url)
	installHistory(t, db)
	slots := []string{"w1", "w2", "w3"}
	proxies := map[string]*testutil.Proxy{}
	urls := map[string]string{}
	for _, slot := range slots {
		proxies[slot], urls[slot] = proxied(t, url, "flow-"+slot)
	}
	rc := startReceiver(t, func(delivery) reaction { return reaction{Delay: time.Duration(100+rand.IntN(150)) * time.Millisecond} })
	off := measureClockOffset(t, db)

	c, err := workq.NewClient(db, workq.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetFlowLimit(ctx, workq.FlowLimit{Table: workq.TableJobRuns, Queue: rateQ, Rate: rate, Period: time.Second}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetFlowLimit(ctx, workq.FlowLimit{Table: workq.TableJobRuns, Queue: keyQ, PerKey: true, Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	enqueueKeyedWebhooks(t, db, rc, rateQ, nRate, 0)
	enqueueKeyedWebhooks(t, db, rc, keyQ, nKey, keys)
	n := nRate + nKey
	doneBoth := func() int {
		return queryScalar[int](t, db, `select count(*)::int from workq.job_runs_all where queue in ($1, $2) and status = 2`, rateQ, keyQ)
	}

	f := newFleet(t, bin)
	args := append([]string{"worker", "--jobs", "--queues", rateQ + "," + keyQ, "--lease", lease.String(), "--concurrency", "8",
		"--poll", "100ms", "--log-format", "json", "--log-level", "warn"}, rc.workerArgs("unused")...)
	for _, slot := range slots {
		f.start(slot, procEnv(urls[slot]), args...)
	}
	started := time.Now()
	deadline := started.Add(scaled(2*time.Minute, 10*time.Minute))
	holding := func(ids ...string) string {
		for _, q := range []string{keyQ, rateQ} {
			if h := anyHolder(holders(t, db, q, ids)); h != "" {
				return h
			}
		}
		return ""
	}
	kills, cuts := 0, 0
	for round := range scaled(6, 30) {
		if doneBoth() == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d done after %s", doneBoth(), n, time.Since(started).Round(time.Second))
		}
		var victim string
		awaitCond(t, 30*time.Second, "a worker holding leases", func() (bool, string) {
			victim = holding(f.id("w1"), f.id("w2"), f.id("w3"))
			return victim != "" || doneBoth() == n, "none"
		})
		if victim == "" {
			break
		}
		slot, _, _ := strings.Cut(victim, "-")
		if round%2 == 1 {
			cuts++
			proxies[slot].Cut()
			time.Sleep(lease + time.Second)
			proxies[slot].Restore()
		} else {
			kills++
			f.kill(slot)
			time.Sleep(100 * time.Millisecond)
			f.restart(slot)
		}
		time.Sleep(time.Duration(300+rand.IntN(500)) * time.Millisecond)
	}
	awaitCond(t, time.Until(deadline), "every job done", func() (bool, string) {
		d := doneBoth()
		return d == n, fmt.Sprintf("%d of %d done", d, n)
	})
	took := time.Since(started)
	f.stopAll()

	h := loadHistory(t, db, rc, off)
	h.check(t, historyOpts{AllDone: true,
		Rates:          map[string]flowRate{"job_runs/" + rateQ: {rate, time.Second}},
		KeyConcurrency: map[string]int{"job_runs/" + keyQ: 1}})
	// What each limit held back: the most starts in a second, the most
	// keys in progress at once (their violations are reported above).
	most := h.checkRate("job_runs/"+rateQ, flowRate{rate, time.Second}, func(*itemHistory, string, ...any) {})
	side := h.checkKeyConcurrency("job_runs/"+keyQ, 1, h.Offset.Uncertainty, func(*itemHistory, string, ...any) {})
	t.Logf("%d + %d jobs done in %s with %d kill -9s and %d cuts of %s; at most %d starts of %s in a second (limit %d), at most %d of %d keys of %s in progress at once; %s",
		nRate, nKey, took.Round(100*time.Millisecond), kills, cuts, lease+time.Second, most, rateQ, rate, side, keys, keyQ, h.summary())
	if kills == 0 || cuts == 0 {
		t.Errorf("%d kills and %d cuts: the faults did not happen", kills, cuts)
	}
	if most < rate/2 {
		t.Errorf("at most %d starts of %s in a second: the rate of %d was never what held the workers back", most, rateQ, rate)
	}
	if side < 2 {
		t.Errorf("at most %d keys of %s in progress at once: the keys never ran side by side", side, keyQ)
	}
}
