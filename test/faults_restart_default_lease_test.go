package test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/pgembed"
	"github.com/workq/workq/internal/worker"
)

// Scenario 2c (issue 32, goal 5, the issue's own figure): a PostgreSQL
// restart of 35 s while a paced producer enqueues 600 jobs/s, at the
// default lease (30 s), re-runs no job whose handler had finished.
//
// Four workers at their defaults: w1 and w2 reach the server directly; P
// and Q through proxies that go down with the server. P's comes back 5 s
// after the server started, inside the restart's grace (no reaper takes a
// lease that ran out while the server was down until 10 s after it
// started): an owner that is slow to reconnect. Q's comes back only after
// the grace and after every lease Q held was reaped: an owner whose
// completion arrives too late, as after a failover or a network cut that
// outlasts the restart. A maintenance leader reaps every 500 ms. One
// handler in 20 takes 1-3 s, so the outage finds dozens of handlers
// running, which answer while the server is down and leave their
// completions waiting; every lease held at the outage expires while the
// server is down (35 s against 30 s).
//
// It proves:
//   - no item of w1, w2 or P whose handler had answered runs again: their
//     flushes retry past the leases' deadline while the server cannot be
//     reached, and no lease that ran out while the server was down is
//     reaped before 10 s after it started, so their completions are applied
//     though the leases had expired (late completions that apply);
//   - Q's completions, written after its leases were reaped, change nothing
//     (fenced by the owner token: rows 0 in the statement log); each such
//     item runs again once under another lease and is done once (the
//     checker: one terminal end, done only under a valid lease after its
//     own handler); the answered re-runs are exactly Q's answered and
//     reaped leases; Q counts those lost, not done;
//   - no reap of a lease that expired while the server was down came before
//     10 s after it started;
//   - every acknowledged enqueue is done, every item is done, no process
//     exits, no completion is given up.
func testFaultRestartDefaultLease(t *testing.T, bin string) {
	const (
		queue    = "restart35"
		rate     = 600 // jobs/s offered by the producer
		down     = 35 * time.Second
		grace    = 10 * time.Second // LeaseReapExpired's wait after the server started
		slowBack = 5 * time.Second  // P's link back, after the server started
	)
	lease := worker.DefaultConfig().Lease // the workers run at the default
	ctx := context.Background()
	srv, url := ownServer(t, pgembed.Options{Settings: map[string]string{"synchronous_commit": "on"}})
	db := openTestPool(t, url)
	installHistory(t, db)
	rc := startReceiver(t, func(delivery) reaction {
		if rand.IntN(20) == 0 {
			return reaction{Delay: time.Duration(1000+rand.IntN(2000)) * time.Millisecond}
		}
		return reaction{Delay: time.Duration(10+rand.IntN(15)) * time.Millisecond}
	})
	off := measureClockOffset(t, db)
	pxP, pURL := proxied(t, url, "r35-p")
	pxQ, qURL := proxied(t, url, "r35-q")

	f := newFleet(t, bin)
	maint := f.start("maint", procEnv(url), "maintain", "--leader-ttl", "3s", "--reap-interval", "500ms", "--log-format", "json")
	args := append([]string{"worker", "--jobs", "--queues", queue, "--log-format", "json"}, rc.workerArgs("unused")...)
	w1 := f.start("w1", procEnv(withAppName(t, url, "r35-w1")), args...)
	w2 := f.start("w2", procEnv(withAppName(t, url, "r35-w2")), args...)
	p := f.start("p", procEnv(pURL), args...)
	q := f.start("q", procEnv(qURL), args...)
	workers := []*member{w1, w2, p, q}
	prod := startPacedProducer(db, rc, queue, rate)
	t.Cleanup(prod.stop)
	holding := func(w *member, claimedBefore time.Time) int {
		return queryScalar[int](t, db, `select count(*) from workq.job_runs where status = 1 and claimed_by = $1 and claimed_at < $2`,
			w.id, claimedBefore)
	}

	// Under load, with P and Q holding leases.
	time.Sleep(4 * time.Second)
	awaitCond(t, 30*time.Second, "P and Q holding leases", func() (bool, string) {
		np, nq := holding(p, dbClock(t, db)), holding(q, dbClock(t, db))
		return np >= 5 && nq >= 5, fmt.Sprintf("P %d leases, Q %d", np, nq)
	})

	from := time.Now()
	pxP.Down()
	pxQ.Down()
	if err := srv.RestartAfter(ctx, pgembed.ShutdownImmediate, down); err != nil {
		t.Fatalf("restart: %v", err)
	}
	back := time.Now()
	var started time.Time // pg_postmaster_start_time(), on the database clock
	awaitCond(t, time.Minute, "the server answering", func() (bool, string) {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		err := db.QueryRow(qctx, `select pg_postmaster_start_time()`).Scan(&started)
		return err == nil, fmt.Sprint(err)
	})
	fromDB, backDB := off.toDB(from), off.toDB(back)
	resume := map[string]time.Duration{}
	for _, w := range []*member{w1, w2} {
		resume[w.id] = firstClaimAfter(t, db, w.id, backDB, "the restart").Round(time.Millisecond)
	}

	// P comes back inside the grace, and writes its completions.
	time.Sleep(time.Until(started.Add(slowBack - off.Offset)))
	pBack := time.Now()
	pxP.Restore()
	awaitCond(t, 30*time.Second, "P's waiting completions written", func() (bool, string) {
		n := holding(p, started)
		return n == 0, fmt.Sprintf("%d leases of P from before the outage open", n)
	})
	resume[p.id] = firstClaimAfter(t, db, p.id, off.toDB(pBack), "its link came back").Round(time.Millisecond)

	// Q comes back once the grace is over and every lease it held was
	// reaped: its waiting completions are then too late.
	awaitCond(t, time.Minute, "Q's leases reaped", func() (bool, string) {
		n := holding(q, started)
		return n == 0, fmt.Sprintf("%d leases of Q from before the outage not reaped", n)
	})
	qBack := time.Now()
	pxQ.Restore()
	awaitCond(t, 30*time.Second, "Q's late flush written", func() (bool, string) {
		for _, l := range q.logLines(t) {
			if l.Msg == "completion flush succeeded after retries" || l.Msg == "completion flush gave up; the leases will expire and the reaper will retry these items" {
				return true, ""
			}
		}
		return false, "no flush after retries in Q's log"
	})
	resume[q.id] = firstClaimAfter(t, db, q.id, off.toDB(qBack), "its link came back").Round(time.Millisecond)
	time.Sleep(2 * time.Second) // Q at work again
	prod.stop()

	awaitCond(t, 3*time.Minute, "every item done", func() (bool, string) {
		n, all := statusCounts(t, db, queue)
		return n == all, fmt.Sprintf("%d of %d done", n, all)
	})
	for _, m := range append([]*member{maint}, workers...) {
		select {
		case <-m.p.done:
			t.Errorf("%s exited (code %d) during the outage; want it to reconnect and go on", m.id, m.p.state.ExitCode())
		default:
		}
	}
	lost, committedAnyway := prod.lostEnqueues(t, db)
	for _, l := range lost {
		t.Error(l)
	}
	f.stopAll()
	stats := map[string]map[string]int64{}
	for _, w := range workers {
		stats[w.id] = workerStats(t, w)
	}

	h := loadHistory(t, db, rc, off)
	h.check(t, historyOpts{AllDone: true})

	outage := back.Sub(from)
	if outage < down || outage <= lease {
		t.Fatalf("the server was down for %s, not the %s asked for, over the lease (%s)", outage, down, lease)
	}
	graceEnd := started.Add(grace)
	// The server went down after its last commit, a moment after from (the
	// stop takes a few milliseconds to reach it): what the outage found is
	// judged from there.
	died := fromDB
	for _, it := range h.Items {
		for _, e := range it.Events {
			if e.At.Before(started) && e.At.After(died) {
				died = e.At
			}
		}
	}
	type tally struct {
		held, waiting, lateApplied, done, expired int           // waiting: held, and its handler answered before the server was back
		latest                                    time.Duration // the last late completion applied, after the server was back
	}
	by := map[string]*tally{}
	for _, w := range workers {
		by[w.id] = &tally{}
	}
	qReaped := map[itemKey]bool{} // Q's answered leases that were reaped
	var earlyReaps []string
	doneBefore, preWindow := 0, 3*time.Second
	for k, it := range h.Items {
		for _, l := range it.Leases {
			c := by[l.By]
			if c == nil {
				t.Errorf("%s: lease v%d by %s, not one of the workers", k, l.Version, l.By)
				continue
			}
			answered, answeredDown := false, false
			for _, hr := range l.Handlers {
				if hr.Outcome == "ok" {
					answered = true
					answeredDown = answeredDown || hr.End.Before(backDB)
				}
			}
			if l.Claim.Before(died) && (l.End == nil || l.End.After(died)) {
				c.held++
				if answeredDown {
					c.waiting++
				}
				if l.Expiry.After(backDB) {
					t.Errorf("%s: lease v%d by %s was held when the server went down and still valid when it was back (expiry %s): the outage is not longer than the lease",
						k, l.Version, l.By, ts(l.Expiry))
				}
			}
			switch l.Outcome {
			case "done":
				c.done++
				if l.End.After(l.Expiry) {
					c.lateApplied++
					c.latest = max(c.latest, l.End.Sub(backDB))
				}
				if !l.End.Before(fromDB.Add(-preWindow)) && l.End.Before(fromDB) {
					doneBefore++
				}
			case "expired":
				c.expired++
				if l.By == q.id && answered {
					qReaped[k] = true
				}
				if l.Expiry.Before(started) && l.EndStmt.Before(graceEnd) {
					earlyReaps = append(earlyReaps, fmt.Sprintf("%s: lease v%d by %s expired at %s while the server was down, reaped by a statement from %s, before %s (the server started at %s)",
						k, l.Version, l.By, ts(l.Expiry), ts(l.EndStmt), ts(graceEnd), ts(started)))
				}
			}
		}
	}
	if len(earlyReaps) > 0 {
		t.Errorf("%d leases reaped within the restart's grace:\n%s", len(earlyReaps), strings.Join(earlyReaps[:min(len(earlyReaps), 5)], "\n"))
	}

	// Answered re-runs: only Q's answered and reaped leases, and every one
	// of them once.
	var bad []*itemHistory
	qReruns := 0
	for _, it := range h.answeredReruns() {
		if qReaped[itemKey{it.Table, it.ID}] {
			qReruns++
			continue
		}
		bad = append(bad, it)
	}
	if len(bad) > 0 {
		t.Errorf("%d items ran again after their handler had been answered under a lease of w1, w2 or P, through a restart of %s (lease %s):\n%s",
			len(bad), outage.Round(10*time.Millisecond), lease, formatItems(bad, 5))
	}
	if qReruns != len(qReaped) {
		t.Errorf("%d of Q's answered leases were reaped, %d of those items ran again after it: want each", len(qReaped), qReruns)
	}
	// The premises: finished work waited through the outage under leases
	// that expired, and was written late, by the direct workers and by P;
	// and Q's late completions met reaped leases.
	for _, w := range []*member{w1, w2, p} {
		if c := by[w.id]; c.waiting == 0 || c.lateApplied == 0 {
			t.Errorf("%s had %d finished attempts waiting for the server and %d of its completions were applied after the lease had expired: "+
				"the outage caught no finished work of it waiting, and cannot judge re-runs", w.id, c.waiting, c.lateApplied)
		}
	}
	if len(qReaped) == 0 {
		t.Errorf("no lease of Q whose handler had answered was reaped before Q came back: the scenario did not see a late completion race a reap")
	}
	rejected := queryScalar[int](t, db, `select count(*) from fault_statements where app = 'r35-q' and statement = 'LeaseComplete' and rows = 0 and at > $1`,
		off.toDB(qBack))
	if rejected == 0 {
		t.Errorf("none of Q's completion statements after it came back changed nothing; want its late completions fenced")
	}
	// Each worker counts what happened: its done leases done, its reaped
	// ones (Q's answered and fenced, or a handler cancelled) lost, none
	// given up.
	for _, w := range workers {
		st, c := stats[w.id], by[w.id]
		if st["done"] != int64(c.done) || st["lease_lost"] != int64(c.expired) || st["unflushed"] != 0 {
			t.Errorf("%s's stats %v; want done %d and lease_lost %d (its done and its reaped leases in the history), unflushed 0", w.id, st, c.done, c.expired)
		}
	}

	t.Logf("server down %s (lease %s; its last commit %s after the stop began); it started %s before it answered; P back %s after it started, Q %s (its leases reaped); each claimed again %v after",
		outage.Round(10*time.Millisecond), lease, died.Sub(fromDB).Round(time.Millisecond), backDB.Sub(started).Round(time.Millisecond),
		off.toDB(pBack).Sub(started).Round(100*time.Millisecond), off.toDB(qBack).Sub(started).Round(100*time.Millisecond), resume)
	t.Logf("producer: %d jobs/s offered, %d acknowledged (%s), %d failed (%d of those committed anyway), %d not offered while it failed; %d done/s in the %s before the outage",
		rate, len(prod.acked), prod.ackedRate(), len(prod.failed), committedAnyway, prod.skipped, doneBefore/int(preWindow.Seconds()), preWindow)
	for _, w := range workers {
		c := by[w.id]
		t.Logf("%s: %d leases held when the server went down (all expired before it was back), %d of them answered before it was back, %d completions applied after their lease had expired (the last %s after the server was back), %d leases reaped; %d failed flush tries",
			w.id, c.held, c.waiting, c.lateApplied, c.latest.Round(time.Millisecond), c.expired, stats[w.id]["flush_errors"])
	}
	t.Logf("Q: %d answered leases reaped and run again elsewhere, %d of its completion statements changed nothing; answered re-runs of w1, w2 and P: %d",
		len(qReaped), rejected, len(bad))
	t.Logf("%s", h.summary())
	t.Logf("worker stats: %v", stats)
}

// firstClaimAfter waits until worker id claims after since (database
// clock), which is after what, and returns how long after since it first
// did.
func firstClaimAfter(t *testing.T, db *pgxpool.Pool, id string, since time.Time, after string) time.Duration {
	t.Helper()
	var first time.Time
	awaitCond(t, time.Minute, id+" claims again after "+after, func() (bool, string) {
		qctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := db.QueryRow(qctx, `select coalesce(min(at), 'infinity') from fault_history
			where event = 'claim' and claimed_by = $1 and at > $2`, id, since).Scan(&first)
		return err == nil && first.Year() < 9999, fmt.Sprint(err)
	})
	return first.Sub(since)
}

// pacedProducer offers webhook jobs at a fixed rate, a batch every 20 ms.
// A failed batch is not retried (it may have committed) but counted, and
// what fell due while it failed is not offered later: no burst after an
// outage. An acknowledged enqueue must not be lost. Its lists are final
// once stop returned.
type pacedProducer struct {
	cancel     context.CancelFunc
	done       chan struct{}
	once       sync.Once
	acked      []int // seq of every acknowledged job
	failed     []int
	skipped    int
	start, end time.Time
	downtime   time.Duration // from each failure to the next success
}

func startPacedProducer(db *pgxpool.Pool, rc *receiver, queue string, rate int) *pacedProducer {
	ctx, cancel := context.WithCancel(context.Background())
	p := &pacedProducer{cancel: cancel, done: make(chan struct{}), start: time.Now()}
	const period = 20 * time.Millisecond
	go func() {
		defer close(p.done)
		defer func() { p.end = time.Now() }()
		c := jobq.New(jobq.Options{})
		next := 0
		var failing time.Time
		due := func() int { return int(time.Since(p.start).Seconds() * float64(rate)) }
		for tick := time.Now(); ctx.Err() == nil; {
			if n := min(due()-next, rate/5); n > 0 {
				jobs := make([]jobq.Job, n)
				for i := range jobs {
					jobs[i] = jobq.Job{Queue: queue, Kind: "webhook",
						Payload: map[string]any{"url": rc.jobsURL(), "body": map[string]any{"seq": next + i}}}
				}
				qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				_, err := c.EnqueueMany(qctx, db, jobs)
				cancel()
				seqs := make([]int, n)
				for i := range seqs {
					seqs[i] = next + i
				}
				next += n
				switch {
				case err == nil:
					p.acked = append(p.acked, seqs...)
					if !failing.IsZero() {
						p.downtime += time.Since(failing)
						failing = time.Time{}
					}
				case ctx.Err() == nil:
					p.failed = append(p.failed, seqs...)
					if failing.IsZero() {
						failing = time.Now()
					}
					time.Sleep(100 * time.Millisecond)
					if d := due(); d > next {
						p.skipped += d - next
						next = d
					}
				}
			}
			tick = tick.Add(period)
			time.Sleep(time.Until(tick))
		}
	}()
	return p
}

func (p *pacedProducer) stop() {
	p.once.Do(p.cancel)
	<-p.done
}

// ackedRate is the acknowledged jobs per second of the time the producer
// ran, its failing stretches left out.
func (p *pacedProducer) ackedRate() string {
	up := p.end.Sub(p.start) - p.downtime
	return fmt.Sprintf("%.0f/s over %s up", float64(len(p.acked))/up.Seconds(), up.Round(100*time.Millisecond))
}

// lostEnqueues returns a line per acknowledged job that is not stored
// done, and how many failed ones committed anyway.
func (p *pacedProducer) lostEnqueues(t *testing.T, db *pgxpool.Pool) (lost []string, committedAnyway int) {
	t.Helper()
	stored := map[int]int16{}
	collectRows(t, db, `select (payload->'body'->>'seq')::int, status from workq.job_runs_all where payload->'body' ? 'seq'`,
		func(row struct {
			Seq    int
			Status int16
		}) {
			stored[row.Seq] = row.Status
		})
	for _, seq := range p.acked {
		if st, ok := stored[seq]; !ok || st != 2 {
			lost = append(lost, fmt.Sprintf("acknowledged enqueue %d: stored %t, status %d; want done", seq, ok, st))
		}
	}
	for _, seq := range p.failed {
		if _, ok := stored[seq]; ok {
			committedAnyway++
		}
	}
	if len(lost) > 10 {
		lost = append(slices.Clip(lost[:10]), fmt.Sprintf("... and %d more", len(lost)-10))
	}
	return lost, committedAnyway
}
