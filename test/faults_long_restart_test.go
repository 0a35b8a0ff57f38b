package test

import (
	"context"
	"testing"
	"time"

	"github.com/workq/workq/internal/pgembed"
)

// Scenario 2b (issue 32, goal 5): the database restarts and stays down for
// more than twice the lease, with work in flight. Completions whose
// handlers had finished wait for the database: a flush goes on past its
// leases' deadline while the database cannot be reached, and after the
// restart no reaper takes a lease that ran out while it was down until
// 10 s after the server started. So no item whose handler had answered
// runs again (before: the flushes gave up at the deadline and the reapers
// ran that work a second time), nothing is lost, and everything is done.
func testFaultLongRestart(t *testing.T, bin string) {
	const (
		lease = 4 * time.Second
		down  = 9 * time.Second
	)
	ctx := context.Background()
	srv, url := ownServer(t, pgembed.Options{Settings: map[string]string{"synchronous_commit": "on"}})
	r := startOutageRig(t, bin, url, "longrestart", scaled(1000, 4000), lease)
	time.Sleep(1500 * time.Millisecond) // the workers busy
	from := time.Now()
	if err := srv.RestartAfter(ctx, pgembed.ShutdownImmediate, down); err != nil {
		t.Fatalf("restart: %v", err)
	}
	back := time.Now()
	resume := r.awaitClaims(back, "the long restart")
	time.Sleep(time.Second)
	r.drain(back)
	lost, committedAnyway := r.lostEnqueues()
	for _, l := range lost {
		t.Error(l)
	}
	h, stats := r.stop()
	h.check(t, historyOpts{AllDone: true})
	if took := back.Sub(from); took < 2*lease {
		t.Fatalf("the server was down for %s, not over twice the lease (%s): the scenario cannot judge re-runs past the lease", took, lease)
	}
	if reruns := h.answeredReruns(); len(reruns) > 0 {
		t.Errorf("%d items ran again after their handler had been answered, through a restart of %s (lease %s):\n%s",
			len(reruns), back.Sub(from).Round(10*time.Millisecond), lease, formatItems(reruns, 5))
	}
	t.Logf("server down for %s (lease %s); workers claimed again %v after it was back; %d enqueued meanwhile (%d failed, %d of those committed anyway); %s",
		back.Sub(from).Round(10*time.Millisecond), lease, resume, len(r.prod.acked), len(r.prod.failed), committedAnyway, h.summary())
	t.Logf("worker stats: %v", stats)
}
