package test

// The fault-injection suite of issue 11 (docs/reliability.md): real workq
// processes, a real PostgreSQL and a real webhook receiver, broken on
// purpose (kill -9, server restarts, network cuts and slow links, a clock
// far off), each scenario checked by the history checker (history_test.go).
// WORKQ_FAULTS_LONG=1 (make faults-long) runs the larger versions.

import (
	"context"
	"fmt"
	"math/rand/v2"
	neturl "net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/testutil"
	"github.com/workq/workq/outbox"
)

// TestFaults builds cmd/workq once and runs the scenarios one after the
// other: their bounds are about timing (leases, reclaim, restarts), so they
// do not share the machine's two cores with each other.
func TestFaults(t *testing.T) {
	bin := buildWorkq(t)
	t.Run("worker crashes", func(t *testing.T) { testFaultCrashes(t, bin) })
	t.Run("network partition and slow link", func(t *testing.T) { testFaultPartition(t, bin) })
	t.Run("global limit under kills and partitions", func(t *testing.T) { testFaultLimit(t, bin) })
}

// proxied starts a proxy to the server of url and returns it with url
// rewritten to go through it, under application_name app.
func proxied(t *testing.T, raw, app string) (*testutil.Proxy, string) {
	t.Helper()
	u, err := neturl.Parse(withAppName(t, raw, app))
	if err != nil {
		t.Fatal(err)
	}
	if u.Port() == "" || strings.HasPrefix(u.Hostname(), "/") {
		t.Fatalf("the partition tests cut a TCP connection; the test server must be at host:port, not %q (set TEST_DATABASE_URL)", u.Host)
	}
	px := testutil.NewProxy(t, u.Host)
	u.Host = px.Addr()
	// Restore first when the test ends: a process whose connections the
	// proxy holds silent takes long to stop.
	t.Cleanup(px.Restore)
	return px, u.String()
}

// workerStats is a worker's final counters, from its "worker stopped" log
// line.
func workerStats(t *testing.T, m *member) map[string]int64 {
	t.Helper()
	for _, l := range m.logLines(t) {
		if l.Msg != "worker stopped" {
			continue
		}
		st, _ := l.Attr["stats"].(map[string]any)
		out := map[string]int64{}
		for k, v := range st {
			f, _ := v.(float64)
			out[k] = int64(f)
		}
		return out
	}
	t.Fatalf("%s logged no 'worker stopped' line", m.id)
	return nil
}

// awaitDone waits until want items of queue (both tables) are done.
func awaitDone(t *testing.T, db *pgxpool.Pool, queue string, want int, within time.Duration) {
	t.Helper()
	awaitCond(t, within, fmt.Sprintf("%d items of %s done", want, queue), func() (bool, string) {
		n, all := statusCounts(t, db, queue)
		return n == want, fmt.Sprintf("%d of %d done", n, all)
	})
}

// faultsLong reports whether the long versions run (WORKQ_FAULTS_LONG=1).
func faultsLong() bool { return os.Getenv("WORKQ_FAULTS_LONG") == "1" }

// scaled returns short, or long under WORKQ_FAULTS_LONG=1.
func scaled[T any](short, long T) T {
	if faultsLong() {
		return long
	}
	return short
}

// fleet runs workq processes in named slots that the test can kill -9 and
// start again; each start gets a new worker id (slot-gN), so the history
// tells the attempts of a killed process from those of its successor.
type fleet struct {
	t   *testing.T
	bin string

	mu     sync.Mutex
	slots  map[string]*member
	killed map[string]time.Time // worker id -> when it was killed (this process's clock)
}

type member struct {
	slot string
	gen  int
	id   string
	env  []string
	args []string
	p    *proc
}

func newFleet(t *testing.T, bin string) *fleet {
	return &fleet{t: t, bin: bin, slots: map[string]*member{}, killed: map[string]time.Time{}}
}

// start runs `workq args... --worker-id <slot>-g1` in slot.
func (f *fleet) start(slot string, env []string, args ...string) *member {
	f.t.Helper()
	m := &member{slot: slot, env: env, args: args}
	f.mu.Lock()
	f.slots[slot] = m
	f.mu.Unlock()
	f.launch(m)
	return m
}

func (f *fleet) launch(m *member) {
	f.t.Helper()
	m.gen++
	m.id = fmt.Sprintf("%s-g%d", m.slot, m.gen)
	m.p = startProc(f.t, m.id, f.bin, m.env, append(slices.Clone(m.args), "--worker-id", m.id)...)
}

// kill kill -9s the process in slot (its whole process group) and returns
// its worker id and when it was killed.
func (f *fleet) kill(slot string) (string, time.Time) {
	f.t.Helper()
	f.mu.Lock()
	m := f.slots[slot]
	f.mu.Unlock()
	at := time.Now()
	if err := syscall.Kill(-m.p.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		f.t.Fatalf("kill %s: %v", m.id, err)
	}
	if code := m.p.wait(f.t, 10*time.Second); code != -1 {
		f.t.Fatalf("%s exited %d before the kill", m.id, code)
	}
	f.mu.Lock()
	f.killed[m.id] = at
	f.mu.Unlock()
	return m.id, at
}

// restart starts the slot's process again under a new worker id.
func (f *fleet) restart(slot string) {
	f.t.Helper()
	f.mu.Lock()
	m := f.slots[slot]
	f.mu.Unlock()
	f.launch(m)
}

// wasKilled reports whether the worker id was killed.
func (f *fleet) wasKilled(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.killed[id]
	return ok
}

// stopAll sends SIGTERM to every running process and wants exit 0.
func (f *fleet) stopAll() {
	f.t.Helper()
	f.mu.Lock()
	ms := make([]*member, 0, len(f.slots))
	for _, m := range f.slots {
		ms = append(ms, m)
	}
	f.mu.Unlock()
	for _, m := range ms {
		m.p.signal(f.t, syscall.SIGTERM)
	}
	for _, m := range ms {
		if code := m.p.wait(f.t, 30*time.Second); code != 0 {
			f.t.Errorf("%s exited %d after SIGTERM, want 0", m.id, code)
		}
	}
}

// logLines returns the JSON log lines of every process that ran in slot.
func (m *member) logLines(t *testing.T) []logLine { return jsonLog(t, m.p.stderr.String()) }

// statusCounts counts the items of both tables by status.
func statusCounts(t *testing.T, db *pgxpool.Pool, queue string) (done, total int) {
	t.Helper()
	if err := db.QueryRow(context.Background(), `select count(*) filter (where status = 2), count(*) from (
		select status from job_runs where queue = $1 union all select status from outbox where queue = $1) t`, queue).
		Scan(&done, &total); err != nil {
		t.Fatal(err)
	}
	return done, total
}

// sendMessages writes n outbox messages of topic on queue; every keyEvery-th
// pair of five is keyed over keys partition keys.
func sendMessages(t *testing.T, db *pgxpool.Pool, queue, topic string, n, keys int) {
	t.Helper()
	c := outbox.NewClient(outbox.ClientOptions{})
	for from := 0; from < n; from += 1000 {
		var msgs []outbox.Message
		for i := from; i < min(n, from+1000); i++ {
			m := outbox.Message{Queue: queue, Topic: topic, Payload: map[string]int{"n": i}}
			if keys > 0 && i%5 < 2 {
				m.PartitionKey = fmt.Sprintf("key-%d", i%keys)
			}
			msgs = append(msgs, m)
		}
		if _, err := c.SendMany(context.Background(), db, msgs); err != nil {
			t.Fatalf("send %d messages: %v", len(msgs), err)
		}
	}
}

// enqueueWebhooks enqueues n webhook job runs to the receiver on queue.
func enqueueWebhooks(t *testing.T, db *pgxpool.Pool, rc *receiver, queue string, n int, body map[string]any) {
	t.Helper()
	c := workq.NewClient(workq.ClientOptions{})
	for from := 0; from < n; from += 1000 {
		var jobs []workq.Job
		for range min(n-from, 1000) {
			jobs = append(jobs, workq.Job{Queue: queue, Kind: "webhook", Payload: map[string]any{"url": rc.jobsURL(), "body": body}})
		}
		if _, err := c.EnqueueMany(context.Background(), db, jobs); err != nil {
			t.Fatalf("enqueue %d webhook jobs: %v", len(jobs), err)
		}
	}
}

// Scenario 1: three `workq worker` processes (job runs of kind webhook and
// the outbox relay's webhook publisher, both to the receiver, whose answers
// take 2-8ms) and a `workq maintain` work a backlog while the test kill -9s
// a random worker each time another tenth of the items is done, and starts
// it again at once. Every item ends done, within its attempts; the only
// attempts that did not end done are the killed processes' leases, reaped
// after they expired; the receiver saw each item once per such attempt
// that reached it plus once for the done attempt, and no item twice
// otherwise.
func testFaultCrashes(t *testing.T, bin string) {
	const queue, topic = "crash", "crash.msg"
	nJobs, nMsgs := scaled(5000, 20000), scaled(5000, 20000)
	kills := scaled(10, 30)
	url := testdb.URL(t)
	db := openTestPool(t, url)
	installHistory(t, db)
	rc := startReceiver(t, nil)
	off := measureClockOffset(t, db)
	enqueueWebhooks(t, db, rc, queue, nJobs, map[string]any{"scenario": "crash"})
	sendMessages(t, db, queue, topic, nMsgs, 40)
	total := nJobs + nMsgs

	env := procEnv(url)
	f := newFleet(t, bin)
	f.start("maint", env, "maintain", "--leader-ttl", "3s", "--reap-interval", "500ms", "--log-format", "json")
	workerArgs := append([]string{"worker", "--jobs", "--outbox", "--queues", queue, "--lease", "4s", "--concurrency", "16",
		"--poll", "250ms", "--max-conns", "12", "--log-format", "json", "--log-level", "warn"}, rc.workerArgs(topic)...)
	slots := []string{"w1", "w2", "w3"}
	for _, s := range slots {
		f.start(s, env, workerArgs...)
	}

	type kill struct {
		id string
		at time.Time
	}
	var done []kill
	started := time.Now()
	deadline := started.Add(scaled(4*time.Minute, 10*time.Minute))
	next := 1
	for {
		n, all := statusCounts(t, db, queue)
		if all != total {
			t.Fatalf("%d items, want %d", all, total)
		}
		if n == total {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d items done after %s", n, total, time.Since(started).Round(time.Second))
		}
		if next <= kills && n >= next*total/(kills+1) {
			// A random moment within the next few milliseconds of handlers,
			// claims and flushes.
			time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond)
			id, at := f.kill(slots[rand.IntN(len(slots))])
			done = append(done, kill{id, at})
			time.Sleep(time.Duration(rand.IntN(200)) * time.Millisecond)
			f.restart(strings.Split(id, "-")[0])
			next++
			continue
		}
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(started)
	f.stopAll()
	if len(done) != kills {
		t.Fatalf("%d kills, want %d", len(done), kills)
	}

	h := loadHistory(t, db, rc, off)
	h.check(t, historyOpts{AllDone: true})

	// Every attempt that did not end done is a killed process's lease that
	// expired, or one given back before any handler ran it (the watchdog
	// releases items that waited over a second for a handler, which the
	// loaded machine makes happen now and then); so every handler run
	// belongs to the done attempt or to a killed process.
	var expired, lostAfterHandler, givenBack int
	for _, it := range h.Items {
		for _, l := range it.Leases {
			switch {
			case l.Outcome == "done":
			case l.Outcome == "expired" && f.wasKilled(l.By):
				expired++
				for _, hr := range l.Handlers {
					if hr.Outcome == "ok" {
						lostAfterHandler++
					}
				}
			case l.Outcome == "released" && len(l.Handlers) == 0:
				givenBack++
			default:
				t.Errorf("%s %d: lease v%d by %s ended %q after %d handler runs; only killed processes' leases may end other than done, "+
					"or leases given back before a handler ran\n%s", it.Table, it.ID, l.Version, l.By, l.Outcome, len(l.Handlers), it.format())
			}
		}
		for _, hr := range it.Handlers {
			if hr.Outcome != "ok" && hr.Outcome != "cancelled" {
				t.Errorf("%s %d: handler run of attempt %d ended %s", it.Table, it.ID, hr.Attempt, hr.Outcome)
			}
		}
	}
	s := h.summary()
	if got, want := rc.count(""), s.Items+s.Duplicates; got != want || s.Items != total {
		t.Errorf("the receiver saw %d requests for %d items; want done (%d) + duplicates (%d)", got, s.Items, total, s.Duplicates)
	}
	if expired == 0 {
		t.Error("no lease of a killed process expired: the kills hit nothing")
	}

	// Where each kill found the killed process's leases: claimed but not
	// started, in a handler, or finished and waiting for its completion
	// (which then expired, or committed after the kill: a flush in flight).
	phases := map[string]int{}
	for _, k := range done {
		at := off.toDB(k.at)
		for _, it := range h.Items {
			for _, l := range it.Leases {
				if l.By != k.id || l.Claim.After(at) || l.End != nil && l.End.Before(at) {
					continue
				}
				switch {
				case len(l.Handlers) == 0 || l.Handlers[0].Start.After(at):
					phases["claimed, handler not started"]++
				case l.Handlers[0].End.After(at) || l.Handlers[0].Outcome == "cancelled":
					phases["in the handler"]++
				case l.Outcome == "done":
					phases["handler finished, flush in flight (committed after the kill)"]++
				default:
					phases["handler finished, completion not flushed (lost, run again)"]++
				}
			}
		}
	}
	t.Logf("%d job runs and %d outbox messages (40 keys) done in %s with %d kill -9s; %s; %d expired leases of killed processes (%d after their handler had answered); %d given back unstarted",
		nJobs, nMsgs, took.Round(100*time.Millisecond), kills, s, expired, lostAfterHandler, givenBack)
	t.Logf("the kills found leases: %v", phases)
	if phases["in the handler"] == 0 || phases["handler finished, completion not flushed (lost, run again)"]+phases["handler finished, flush in flight (committed after the kill)"] == 0 {
		t.Errorf("the kills never hit a handler or a pending completion: %v", phases)
	}
	var rejected int
	for _, st := range h.Statements {
		if st.Rows == 0 && st.Statement == "LeaseComplete" {
			rejected++
		}
	}
	t.Logf("clock offset %s ± %s; receiver: at most %d requests at once; completions that changed nothing: %d",
		off.Offset, off.Uncertainty, rc.maxIn, rejected)
}

// Scenario 3: one worker process (P) reaches PostgreSQL through the test's
// proxy, another (Q) directly.
//
// First the link is slow (100ms each way, 32 KiB/s) and P works alone: it
// keeps every lease, including those of handlers that run longer than the
// lease (5s, lease 4s), which only its heartbeats over the slow link keep.
//
// Then the link is cut twice over: while P's handler of X1 runs (the
// receiver holds the request), and just before the receiver answers P's
// request for X2, so that P's completion of X2 goes into the cut. P's
// heartbeats fail; it cancels X1's handler (the receiver sees the request
// dropped) while the database still counts the lease valid; Q takes both
// items once their leases expire and finishes them. When the link comes
// back, P's completion of X2 reaches the database late and changes nothing:
// each item has one done attempt (Q's), P's attempts are archived as
// expired, and P counts both leases lost.
func testFaultPartition(t *testing.T, bin string) {
	const queue, lease = "part", 4 * time.Second
	url := testdb.URL(t)
	db := openTestPool(t, url)
	installHistory(t, db)
	px, pURL := proxied(t, url, "part-p")
	var cutAt time.Time
	rc := startReceiver(t, func(d delivery) reaction {
		switch d.Body["mode"] {
		case "slow":
			return reaction{Delay: 5 * time.Second}
		case "hold":
			if d.Attempt == 1 {
				return reaction{Hold: true}
			}
		case "cut":
			if d.Attempt == 1 {
				return reaction{Before: func() { px.Cut(); cutAt = time.Now() }}
			}
		}
		return fewMillis(d)
	})
	off := measureClockOffset(t, db)
	f := newFleet(t, bin)
	args := append([]string{"worker", "--jobs", "--queues", queue, "--lease", lease.String(), "--concurrency", "8",
		"--poll", "200ms", "--log-format", "json"}, rc.workerArgs("unused")...)

	// The slow link.
	px.SetLatency(100 * time.Millisecond)
	px.SetBandwidth(32 << 10)
	const fast, slow = 120, 3
	p := f.start("p", procEnv(pURL), args...)
	enqueueWebhooks(t, db, rc, queue, fast, map[string]any{"mode": "fast"})
	enqueueWebhooks(t, db, rc, queue, slow, map[string]any{"mode": "slow"})
	slowStart := time.Now()
	awaitDone(t, db, queue, fast+slow, 2*time.Minute)
	slowTook := time.Since(slowStart)
	px.SetLatency(0)
	px.SetBandwidth(0)

	// The partition.
	x1 := enqueueOne(t, db, rc, queue, "hold")
	awaitCond(t, 30*time.Second, "P's handler of X1 running", func() (bool, string) {
		return rc.inFlightNow() == 1, fmt.Sprintf("%d requests in flight", rc.inFlightNow())
	})
	x2 := enqueueOne(t, db, rc, queue, "cut")
	awaitCond(t, 30*time.Second, "P's request for X2 answered, behind the cut", func() (bool, string) {
		return rc.count("ok") == fast+slow+1, fmt.Sprintf("%d requests answered", rc.count("ok"))
	})
	q := f.start("q", procEnv(withAppName(t, url, "part-q")), args...)
	awaitDone(t, db, queue, fast+slow+2, 30*time.Second)
	before := lateCompletions(t, db)
	restoreAt := time.Now()
	px.Restore()
	awaitCond(t, 30*time.Second, "P's held completion of X2 to reach the database", func() (bool, string) {
		n := lateCompletions(t, db)
		return n > before, fmt.Sprintf("%d completions by P that changed nothing", n)
	})
	f.stopAll()

	h := loadHistory(t, db, rc, off)
	h.check(t, historyOpts{AllDone: true})
	for _, it := range h.Items {
		if it.ID == x1 || it.ID == x2 {
			continue
		}
		if len(it.Leases) != 1 || it.Leases[0].Outcome != "done" || it.Leases[0].By != p.id {
			t.Errorf("over the slow link: job %d had %d leases; want one, done by %s\n%s", it.ID, len(it.Leases), p.id, it.format())
		}
	}
	var beats []int
	for _, it := range h.Items {
		if len(it.Handlers) == 1 && it.Handlers[0].End.Sub(it.Handlers[0].Start) >= 5*time.Second {
			beats = append(beats, it.Leases[0].Beats)
			if it.Leases[0].Beats < 3 {
				t.Errorf("job %d ran 5s on a %s lease with %d heartbeats; want at least 3\n%s", it.ID, lease, it.Leases[0].Beats, it.format())
			}
		}
	}
	if len(beats) != slow {
		t.Errorf("%d handlers ran 5s, want %d", len(beats), slow)
	}
	cut := off.toDB(cutAt)
	for _, c := range []struct {
		name string
		id   int64
	}{{"X1 (handler running at the cut)", x1}, {"X2 (completion sent into the cut)", x2}} {
		it := h.Items[itemKey{"job_runs", c.id}]
		if len(it.Leases) != 2 || it.Leases[0].By != p.id || it.Leases[0].Outcome != "expired" ||
			it.Leases[1].By != q.id || it.Leases[1].Outcome != "done" {
			t.Errorf("%s: want P's lease expired, then Q's done\n%s", c.name, it.format())
			continue
		}
		pl := it.Leases[0]
		t.Logf("%s: P's lease expired %s after the cut; Q claimed it %s after that",
			c.name, pl.Expiry.Sub(cut).Round(time.Millisecond), it.Leases[1].Claim.Sub(pl.Expiry).Round(time.Millisecond))
		if c.id == x1 {
			if len(pl.Handlers) != 1 || pl.Handlers[0].Outcome != "cancelled" {
				t.Errorf("X1: P's handler runs %+v; want one, cancelled when P dropped it", pl.Handlers)
			} else {
				hr := pl.Handlers[0]
				t.Logf("X1: P cancelled its handler %s after the cut, %s before the database lease expired (lease %s)",
					hr.End.Sub(cut).Round(time.Millisecond), pl.Expiry.Sub(hr.End).Round(time.Millisecond), lease)
			}
		} else if len(pl.Handlers) != 1 || pl.Handlers[0].Outcome != "ok" {
			t.Errorf("X2: P's handler runs %+v; want one answered", pl.Handlers)
		}
	}
	var late []statementRow
	for _, st := range h.Statements {
		if st.App == "part-p" && st.Statement == "LeaseComplete" && st.Rows == 0 {
			late = append(late, st)
		}
	}
	x2done := h.Items[itemKey{"job_runs", x2}].Leases[1].End
	if len(late) == 0 || !late[len(late)-1].At.After(*x2done) {
		t.Errorf("P's completions that changed nothing %+v; want one after Q's done of X2 at %s", late, ts(*x2done))
	} else {
		t.Logf("P's completion of X2 reached the database %s after the restore and %s after Q's done; it changed nothing",
			late[len(late)-1].At.Sub(off.toDB(restoreAt)).Round(time.Millisecond), late[len(late)-1].At.Sub(*x2done).Round(time.Millisecond))
	}
	var lost []string
	for _, l := range p.logLines(t) {
		if l.Msg == "lease lost; cancelling the handler" {
			lost = append(lost, fmt.Sprintf("%v: %v", l.Attr["id"], l.Attr["why"]))
		}
	}
	if len(lost) != 1 || !strings.HasPrefix(lost[0], fmt.Sprint(x1)+": no heartbeat confirmed the lease in time") {
		t.Errorf("P logged lost leases %q; want X1 (%d), cancelled by the local deadline", lost, x1)
	}
	if st := workerStats(t, p); st["lease_lost"] != 2 || st["done"] != fast+slow {
		t.Errorf("P's stats %v; want LeaseLost 2 (X1's handler, X2's completion) and Done %d", st, fast+slow)
	}
	t.Logf("slow link: %d jobs (%d of 5s on a %s lease, heartbeats %v) done in %s, every lease kept; %s",
		fast+slow, slow, lease, beats, slowTook.Round(100*time.Millisecond), h.summary())
}

// enqueueOne enqueues one webhook job run with the receiver mode and
// returns its id.
func enqueueOne(t *testing.T, db *pgxpool.Pool, rc *receiver, queue, mode string) int64 {
	t.Helper()
	res, err := workq.NewClient(workq.ClientOptions{}).Enqueue(context.Background(), db, workq.Job{Queue: queue, Kind: "webhook",
		Payload: map[string]any{"url": rc.jobsURL(), "body": map[string]any{"mode": mode}}})
	if err != nil {
		t.Fatal(err)
	}
	return res.ID
}

// lateCompletions counts P's completion statements that changed nothing.
func lateCompletions(t *testing.T, db *pgxpool.Pool) int {
	return queryScalar[int](t, db, `select count(*) from fault_statements where app = 'part-p' and statement = 'LeaseComplete' and rows = 0`)
}

// Scenario 5: the global limit W = 4 (workq limit set) on a queue worked by
// three processes of concurrency 4, while the test kill -9s the two direct
// ones in turn and cuts the third one's link for longer than the lease. A
// sampler reads the queue's in-progress rows with unexpired leases every
// 2ms; it must never see more than 4, and must see 4 (else the limit was
// never the bound). The history checker checks the same at every claim, and
// that the receiver never had more than 4 of the queue's requests open.
func testFaultLimit(t *testing.T, bin string) {
	const queue, w, lease = "lim", 4, 3 * time.Second
	n := scaled(400, 2000)
	ctx := context.Background()
	url := testdb.URL(t)
	db := openTestPool(t, url)
	installHistory(t, db)
	px, pURL := proxied(t, url, "lim-p")
	rc := startReceiver(t, func(delivery) reaction { return reaction{Delay: time.Duration(20+rand.IntN(20)) * time.Millisecond} })
	off := measureClockOffset(t, db)
	env := procEnv(url)
	if out, errOut, code := runWorkq(t, bin, env, 30*time.Second, "limit", "set", "job_runs", queue, fmt.Sprint(w)); code != 0 {
		t.Fatalf("workq limit set: exit %d: %s%s", code, out, errOut)
	}
	enqueueWebhooks(t, db, rc, queue, n, map[string]any{"scenario": "limit"})

	// The sampler.
	sctx, stopSampler := context.WithCancel(ctx)
	type sample struct{ n, samples, errs int }
	sampled := make(chan sample, 1)
	go func() {
		var s sample
		defer func() { sampled <- s }()
		for sctx.Err() == nil {
			var c int
			err := db.QueryRow(sctx, `select count(*) from job_runs where queue = $1 and status = 1 and locked_until > now()`, queue).Scan(&c)
			if err != nil {
				if sctx.Err() == nil {
					s.errs++
				}
				continue
			}
			s.samples++
			s.n = max(s.n, c)
			time.Sleep(2 * time.Millisecond)
		}
	}()
	defer stopSampler()

	f := newFleet(t, bin)
	args := append([]string{"worker", "--jobs", "--queues", queue, "--lease", lease.String(), "--concurrency", "4",
		"--poll", "100ms", "--log-format", "json", "--log-level", "warn"}, rc.workerArgs("unused")...)
	f.start("w1", env, args...)
	f.start("w2", env, args...)
	f.start("p", procEnv(pURL), args...)
	started := time.Now()
	deadline := started.Add(scaled(3*time.Minute, 10*time.Minute))
	kills, cuts := 0, 0
	for round := 0; ; round++ {
		done, _ := statusCounts(t, db, queue)
		if done == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d done after %s", done, n, time.Since(started).Round(time.Second))
		}
		if round%3 == 2 {
			// Longer than the lease: P's handlers are cancelled and its
			// leases expire while the others work on.
			px.Cut()
			cuts++
			sleepUntilDone(t, db, queue, n, lease+time.Second)
			px.Restore()
		} else {
			id, _ := f.kill([]string{"w1", "w2"}[round%3])
			kills++
			time.Sleep(100 * time.Millisecond)
			f.restart(strings.Split(id, "-")[0])
		}
		sleepUntilDone(t, db, queue, n, time.Duration(700+rand.IntN(600))*time.Millisecond)
	}
	took := time.Since(started)
	stopSampler()
	s := <-sampled
	f.stopAll()

	h := loadHistory(t, db, rc, off)
	h.check(t, historyOpts{AllDone: true, Limits: map[string]int{"job_runs/" + queue: w}})
	t.Logf("%d jobs under W=%d done in %s with %d kill -9s and %d cuts of %s; the sampler read %d times (%d errors), at most %d valid leases; %s",
		n, w, took.Round(100*time.Millisecond), kills, cuts, lease+time.Second, s.samples, s.errs, s.n, h.summary())
	if s.n > w {
		t.Errorf("the sampler saw %d in-progress rows with unexpired leases; the limit is %d", s.n, w)
	}
	if s.n < w {
		t.Errorf("the sampler never saw more than %d in-progress rows: the limit of %d was never what held the workers back", s.n, w)
	}
	if s.samples < 1000 {
		t.Errorf("the sampler read only %d times", s.samples)
	}
	if kills == 0 || cuts == 0 {
		t.Errorf("%d kills and %d cuts: the work ended before the faults", kills, cuts)
	}
}

// sleepUntilDone sleeps for d, or less once every item of queue is done.
func sleepUntilDone(t *testing.T, db *pgxpool.Pool, queue string, n int, d time.Duration) {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if done, _ := statusCounts(t, db, queue); done == n {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
