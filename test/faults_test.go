package test

// The fault-injection suite of issue 11 (docs/reliability.md): real workq
// processes, a real PostgreSQL and a real webhook receiver, broken on
// purpose (kill -9, server restarts, network cuts and slow links, a clock
// far off), each scenario checked by the history checker (history_test.go).
// WORKQ_FAULTS_LONG=1 (make faults-long) runs the larger versions.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/outboxrt"

	"github.com/jackc/pgx/v5/pgxpool"

	wqdb "github.com/workq/workq/internal/db"
	"github.com/workq/workq/internal/pgembed"
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
	t.Run("database restarts", func(t *testing.T) { testFaultRestart(t, bin) })
	t.Run("database restart longer than the lease", func(t *testing.T) { testFaultLongRestart(t, bin) })
	t.Run("database restart of 35 s at the default lease under 600 jobs per s", func(t *testing.T) { testFaultRestartDefaultLease(t, bin) })
	t.Run("network partition and slow link", func(t *testing.T) { testFaultPartition(t, bin) })
	t.Run("global limit under kills and partitions", func(t *testing.T) { testFaultLimit(t, bin) })
	t.Run("global limit across two shards under kills and partitions", func(t *testing.T) { testFaultShardLimit(t, bin) })
	t.Run("flow limits under kills and partitions", func(t *testing.T) { testFaultFlow(t, bin) })
	t.Run("workflows under kills", func(t *testing.T) { testFaultWorkflows(t, bin) })
	t.Run("clock skew", func(t *testing.T) { testFaultClockSkew(t, bin) })
	t.Run("failover (synchronous)", func(t *testing.T) { testFaultFailover(t, bin) })
	t.Run("failover caught (asynchronous)", func(t *testing.T) { testFaultFailoverCaught(t, bin) })
	if failoverPGAF() {
		t.Run("failover (pg_auto_failover)", func(t *testing.T) { testFaultFailoverPGAF(t, bin) })
	}
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

// id is the worker id the slot runs under now.
func (f *fleet) id(slot string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.slots[slot].id
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

// logLines returns the JSON log lines of the process now in the slot.
func (m *member) logLines(t *testing.T) []logLine { return jsonLog(t, m.p.stderr.String()) }

// statusCounts counts the items of both tables by status.
func statusCounts(t *testing.T, db *pgxpool.Pool, queue string) (done, total int) {
	t.Helper()
	if err := db.QueryRow(context.Background(), `select count(*) filter (where status = 2), count(*) from (
		select status from workq.job_runs_all where queue = $1 union all select status from workq.outbox where queue = $1) t`, queue).
		Scan(&done, &total); err != nil {
		t.Fatal(err)
	}
	return done, total
}

// sendMessages writes n outbox messages of topic on queue; two in five are
// keyed, over keys partition keys (none when keys is 0).
func sendMessages(t *testing.T, db *pgxpool.Pool, queue, topic string, n, keys int) {
	t.Helper()
	c := outboxrt.NewClient(outboxrt.ClientOptions{})
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
	c := jobq.New(jobq.Options{})
	for from := 0; from < n; from += 1000 {
		var jobs []jobq.Job
		for range min(n-from, 1000) {
			jobs = append(jobs, jobq.Job{Queue: queue, Kind: "webhook", Payload: map[string]any{"url": rc.jobsURL(), "body": body}})
		}
		if _, err := c.EnqueueMany(context.Background(), db, jobs); err != nil {
			t.Fatalf("enqueue %d webhook jobs: %v", len(jobs), err)
		}
	}
}

// runningOn returns the worker id holding the item of a delivery.
func runningOn(t *testing.T, db *pgxpool.Pool, d delivery) string {
	t.Helper()
	if d.Table == "outbox" {
		return queryScalar[string](t, db, `select coalesce(claimed_by, '') from workq.outbox where message_id = $1`, d.MessageID)
	}
	return queryScalar[string](t, db, `select coalesce(claimed_by, '') from workq.job_runs_all where id = $1`, d.ItemID)
}

// Scenario 1: three `workq worker` processes (job runs of kind webhook and
// the outbox relay's webhook publisher, both to the receiver, whose answers
// take 2-8ms, one in 50 300ms) and a `workq maintain` work a backlog while
// the test kill -9s a worker each time another eleventh of the items is
// done (every other kill aimed at a process running a handler, the others
// at a random one at a random moment), and starts it again at once. Every
// item ends done, within its attempts; the only attempts that did not end
// done are the killed processes' leases, reaped after they expired (and
// items given back before any handler ran them); the receiver saw each
// item once per such attempt that reached it plus once for the done
// attempt, and no item twice otherwise.
func testFaultCrashes(t *testing.T, bin string) {
	const queue, topic = "crash", "crash.msg"
	nJobs, nMsgs := scaled(5000, 20000), scaled(5000, 20000)
	kills := scaled(10, 30)
	url := testdb.URL(t)
	db := openTestPool(t, url)
	installHistory(t, db)
	// One request in 50 takes 300ms, so that a kill aimed at a running
	// handler finds one.
	rc := startReceiver(t, func(d delivery) reaction {
		if rand.IntN(50) == 0 {
			return reaction{Delay: 300 * time.Millisecond}
		}
		return fewMillis(d)
	})
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
			// Every other kill is aimed at the process running a handler that
			// will run for a while yet; the others hit a random process at a
			// random moment within the next few milliseconds of handlers,
			// claims and flushes.
			victim := ""
			for aim := time.Now().Add(3 * time.Second); next%2 == 0 && victim == "" && time.Now().Before(aim); {
				if d, ok := rc.openFor(150 * time.Millisecond); ok {
					if slot, _, _ := strings.Cut(runningOn(t, db, d), "-"); slices.Contains(slots, slot) {
						victim = slot
					}
				}
				time.Sleep(5 * time.Millisecond)
			}
			if victim == "" {
				victim = slots[rand.IntN(len(slots))]
				time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond)
			}
			id, at := f.kill(victim)
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
	res, err := jobq.New(jobq.Options{}).Enqueue(context.Background(), db, jobq.Job{Queue: queue, Kind: "webhook",
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
// three processes of concurrency 4, each through a proxy of its own, while
// the test alternates kill -9 and cuts of the link longer than the lease,
// each aimed at a process that holds leases of the queue. A
// sampler reads the queue's in-progress rows with unexpired leases every
// 2ms; it must never see more than 4, and must see 4 (else the limit was
// never the bound). The history checker checks the same at every claim, and
// that the receiver never had more than 4 of the queue's requests open.
func testFaultLimit(t *testing.T, bin string) {
	const queue, w, lease = "lim", 4, 3 * time.Second
	n := scaled(300, 3000)
	ctx := context.Background()
	url := testdb.URL(t)
	db := openTestPool(t, url)
	installHistory(t, db)
	// Each worker reaches the database through a proxy of its own, so any
	// of them can be cut (one that never won a claim could not be).
	slots := []string{"w1", "w2", "w3"}
	proxies := map[string]*testutil.Proxy{}
	urls := map[string]string{}
	for _, slot := range slots {
		proxies[slot], urls[slot] = proxied(t, url, "lim-"+slot)
	}
	rc := startReceiver(t, func(delivery) reaction { return reaction{Delay: time.Duration(30+rand.IntN(40)) * time.Millisecond} })
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
			err := db.QueryRow(sctx, `select count(*) from workq.job_runs_all where queue = $1 and status = 1 and locked_until > now()`, queue).Scan(&c)
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
	for _, slot := range slots {
		f.start(slot, procEnv(urls[slot]), args...)
	}
	started := time.Now()
	deadline := started.Add(scaled(3*time.Minute, 10*time.Minute))
	// holding returns a worker id holding leases of the queue now, preferring
	// ids (empty: none does).
	holding := func(ids ...string) string { return anyHolder(holders(t, db, queue, ids)) }
	type fault struct {
		victim string
		at     time.Time // this process's clock
	}
	var killed, cut []fault
	faults := scaled(5, 30)
	for round := 0; round < faults; round++ {
		// Keep work waiting while the faults go on.
		if done, _ := statusCounts(t, db, queue); n-done < 100 {
			enqueueWebhooks(t, db, rc, queue, 100, map[string]any{"scenario": "limit"})
			n += 100
		}
		if time.Now().After(deadline) {
			done, _ := statusCounts(t, db, queue)
			t.Fatalf("%d of %d done after %s", done, n, time.Since(started).Round(time.Second))
		}
		// Each fault hits a process that holds leases of the queue: kill -9,
		// or a cut of its link for longer than the lease (its handlers are
		// cancelled and its leases expire while the others work on).
		var victim string
		awaitCond(t, 30*time.Second, "a worker holding leases", func() (bool, string) {
			victim = holding(f.id("w1"), f.id("w2"), f.id("w3"))
			return victim != "", "none"
		})
		slot, _, _ := strings.Cut(victim, "-")
		if round%2 == 1 {
			cut = append(cut, fault{victim, time.Now()})
			proxies[slot].Cut()
			sleepUntilDone(t, db, queue, n, lease+time.Second)
			proxies[slot].Restore()
		} else {
			_, at := f.kill(slot)
			killed = append(killed, fault{victim, at})
			time.Sleep(100 * time.Millisecond)
			f.restart(slot)
		}
		sleepUntilDone(t, db, queue, n, time.Duration(300+rand.IntN(500))*time.Millisecond)
	}
	awaitDone(t, db, queue, n, time.Until(deadline))
	took := time.Since(started)
	stopSampler()
	s := <-sampled
	f.stopAll()

	h := loadHistory(t, db, rc, off)
	h.check(t, historyOpts{AllDone: true, Limits: map[string]int{"job_runs/" + queue: w}})
	// A fault cost the expired leases its victim held when it struck.
	cost := func(fs []fault) int {
		n := 0
		for _, fl := range fs {
			at := off.toDB(fl.at)
			for _, it := range h.Items {
				for _, l := range it.Leases {
					if l.Outcome == "expired" && l.By == fl.victim && l.Claim.Before(at) && l.End.After(at) {
						n++
					}
				}
			}
		}
		return n
	}
	byKill, byCut := cost(killed), cost(cut)
	t.Logf("%d jobs under W=%d done in %s with %d kill -9s (%d leases expired) and %d cuts of %s (%d leases expired); the sampler read %d times (%d errors), at most %d valid leases; %s",
		n, w, took.Round(100*time.Millisecond), len(killed), byKill, len(cut), lease+time.Second, byCut, s.samples, s.errs, s.n, h.summary())
	if byKill == 0 || byCut == 0 {
		t.Errorf("the kills cost %d leases and the cuts %d: a fault hit nothing", byKill, byCut)
	}
	if s.n > w {
		t.Errorf("the sampler saw %d in-progress rows with unexpired leases; the limit is %d", s.n, w)
	}
	if s.n < w {
		t.Errorf("the sampler never saw more than %d in-progress rows: the limit of %d was never what held the workers back", s.n, w)
	}
	if s.samples < 1000 {
		t.Errorf("the sampler read only %d times", s.samples)
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

// ownServer starts a throwaway PostgreSQL for one scenario (one the test may
// restart, or run under another clock) and returns it with the URL of a
// migrated database on it.
func ownServer(t *testing.T, o pgembed.Options) (*pgembed.Server, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := pgembed.StartWith(ctx, o)
	if err != nil {
		t.Fatalf("start a throwaway PostgreSQL (initdb and pg_ctl of the server package): %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("stop the throwaway PostgreSQL: %v", err)
		}
	})
	admin, err := pgxpool.New(ctx, srv.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec(ctx, "create database faults"); err != nil {
		t.Fatal(err)
	}
	url := srv.URL("faults")
	if _, err := wqdb.MigrateUp(ctx, url); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return srv, url
}

// Scenario 2: a throwaway PostgreSQL (synchronous_commit on, as in
// production: a crash keeps every acknowledged commit) restarted twice under
// load, once with a fast shutdown (sessions ended, checkpoint) and once with
// an immediate one (a crash: the next start replays the WAL), while two
// `workq worker` processes (lease 10 s) work job runs and keyed outbox
// messages, a `workq maintain` leads, and the test enqueues a job every
// 10ms, every other one through a `workq api` process. The processes ride
// it out: none exits, each worker claims again after each restart, the API
// is ready again, the leader holds its lock again, every enqueue the
// database or the API acknowledged is done, and the history checker finds
// nothing done whose handler had not finished. The outages are well inside
// the lease, so no item whose handler was answered runs again: a completion
// flush that fails while the server is down retries until its leases'
// deadline (issue 18) instead of giving up after 1.6 s and leaving the
// leases to expire.
func testFaultRestart(t *testing.T, bin string) {
	// Long enough that a restart on a loaded machine (2.7-3.4 s seen with
	// other test suites running) stays well inside it.
	const lease = 10 * time.Second
	ctx := context.Background()
	srv, url := ownServer(t, pgembed.Options{Settings: map[string]string{"synchronous_commit": "on"}})
	r := startOutageRig(t, bin, url, "restart", scaled(1000, 5000), lease)
	type restart struct {
		mode     string
		from, to time.Time // on this process's clock
		resume   []time.Duration
		apiReady time.Duration
	}
	var restarts []restart
	for _, mode := range scaled([]string{pgembed.ShutdownFast, pgembed.ShutdownImmediate},
		[]string{pgembed.ShutdownFast, pgembed.ShutdownImmediate, pgembed.ShutdownFast, pgembed.ShutdownImmediate}) {
		time.Sleep(1500 * time.Millisecond) // under load
		rs := restart{mode: mode, from: time.Now()}
		if err := srv.Restart(ctx, mode); err != nil {
			t.Fatalf("restart (%s): %v", mode, err)
		}
		rs.to = time.Now()
		rs.resume = r.awaitClaims(rs.to, "the "+mode+" restart")
		rs.apiReady = r.awaitAPI(rs.to, "the "+mode+" restart")
		restarts = append(restarts, rs)
	}
	last := restarts[len(restarts)-1].to
	time.Sleep(time.Second)
	r.drain(last)
	r.checkLeader(last, 0)
	lost, committedAnyway := r.lostEnqueues()
	for _, l := range lost {
		t.Error(l)
	}
	h, stats := r.stop()
	h.check(t, historyOpts{AllDone: true})
	var longest time.Duration
	for _, rs := range restarts {
		longest = max(longest, rs.to.Sub(rs.from))
	}
	// No answered item runs again. The premise is an outage well inside the
	// lease: a completion waiting when the server went down is retried until
	// the local deadline of its lease, 0.9 of the lease after the claim or
	// heartbeat that last confirmed it (at most a third of the lease before
	// the outage), so an outage of up to about half the lease, reconnecting
	// included, ends with the completion applied. Longer ones let leases
	// expire with the server down, and re-runs are what at-least-once allows.
	reruns := h.answeredReruns()
	switch {
	case longest >= lease/2:
		t.Errorf("the server was down for %s, not within half the lease (%s): the scenario cannot judge re-runs", longest, lease)
	case len(reruns) > 0:
		t.Errorf("%d items ran again after their handler had been answered, through outages of at most %s (lease %s):\n%s",
			len(reruns), longest.Round(10*time.Millisecond), lease, formatItems(reruns, 5))
	}
	for _, rs := range restarts {
		t.Logf("%s restart: server down for %s; workers claimed again %v after it was back, the API was ready %s after",
			rs.mode, rs.to.Sub(rs.from).Round(10*time.Millisecond), rs.resume, rs.apiReady.Round(time.Millisecond))
	}
	t.Logf("%d job runs, %d outbox messages and %d jobs enqueued during the restarts (%d through the API; %d enqueues failed, %d of those committed anyway) all done; %s",
		r.backlog/2, r.backlog/2, len(r.prod.acked), len(r.prod.apiAcked), len(r.prod.failed), committedAnyway, h.summary())
	t.Logf("worker stats: %v", stats)
}

// formatItems formats the histories of the first n items.
func formatItems(items []*itemHistory, n int) string {
	var b strings.Builder
	for i, it := range items {
		if i == n {
			fmt.Fprintf(&b, "... and %d more items\n", len(items)-i)
			break
		}
		b.WriteString(it.format())
	}
	return b.String()
}

// outageRig is the load that scenario 2 and the failover scenarios run
// through their outages: a backlog of job runs and keyed outbox messages
// (half each) worked by two `workq worker` processes, a `workq maintain`
// leading, a `workq api`, and a producer enqueueing a job every 10ms,
// every other one through the API. Everything, the test's own pool
// included, reaches the database by url, which may name several hosts.
type outageRig struct {
	t       *testing.T
	db      *pgxpool.Pool
	rc      *receiver
	off     clockOffset
	queue   string
	backlog int
	f       *fleet
	maint   *member
	workers []*member
	api     *apiProc
	prod    *producer
}

// startOutageRig installs the history log, writes the backlog and starts
// the processes and the producer.
func startOutageRig(t *testing.T, bin, url, queue string, backlog int, lease time.Duration) *outageRig {
	t.Helper()
	r := &outageRig{t: t, db: openTestPool(t, url), queue: queue, backlog: backlog}
	installHistory(t, r.db)
	r.rc = startReceiver(t, func(delivery) reaction { return reaction{Delay: time.Duration(10+rand.IntN(15)) * time.Millisecond} })
	r.off = measureClockOffset(t, r.db)
	topic := queue + ".msg"
	sendMessages(t, r.db, queue, topic, backlog/2, 20)
	enqueueWebhooks(t, r.db, r.rc, queue, backlog/2, map[string]any{"scenario": queue})
	env := procEnv(url)
	r.f = newFleet(t, bin)
	r.maint = r.f.start("maint", env, "maintain", "--leader-ttl", "3s", "--reap-interval", "500ms", "--log-format", "json")
	args := append([]string{"worker", "--jobs", "--outbox", "--queues", queue, "--lease", lease.String(), "--concurrency", "4",
		"--poll", "250ms", "--log-format", "json"}, r.rc.workerArgs(topic)...)
	r.workers = []*member{r.f.start("w1", env, args...), r.f.start("w2", env, args...)}
	r.api = startAPI(t, bin, env)
	r.prod = startProducer(context.Background(), r.db, r.api, r.rc, queue)
	t.Cleanup(r.prod.stop)
	return r
}

// producer enqueues a webhook job every 10ms, every other one through the
// API, until stopped; a failed enqueue is not retried (it may have
// committed), an acknowledged one must not be lost. Its lists are final
// once stop returned.
type producer struct {
	cancel   context.CancelFunc
	done     chan struct{}
	acked    []int // seq of every acknowledged enqueue
	failed   []int
	apiAcked []time.Time // when the API acknowledged one, on this process's clock
}

func startProducer(ctx context.Context, db *pgxpool.Pool, api *apiProc, rc *receiver, queue string) *producer {
	ctx, cancel := context.WithCancel(ctx)
	p := &producer{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		c := jobq.New(jobq.Options{})
		for seq := 0; ctx.Err() == nil; seq++ {
			payload := map[string]any{"url": rc.jobsURL(), "body": map[string]any{"seq": seq}}
			qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			var err error
			if seq%2 == 1 {
				err = api.enqueue(qctx, queue, payload)
				if err == nil {
					p.apiAcked = append(p.apiAcked, time.Now())
				}
			} else {
				_, err = c.Enqueue(qctx, db, jobq.Job{Queue: queue, Kind: "webhook", Payload: payload})
			}
			cancel()
			if err == nil {
				p.acked = append(p.acked, seq)
			} else if ctx.Err() == nil {
				p.failed = append(p.failed, seq)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return p
}

// stop stops the producer and waits for it.
func (p *producer) stop() {
	p.cancel()
	<-p.done
}

// query runs a one-value query while the server may be down or changing,
// retrying for a minute.
func (r *outageRig) query(what string, sql string, args ...any) int64 {
	r.t.Helper()
	var n int64
	awaitCond(r.t, time.Minute, what, func() (bool, string) {
		qctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := r.db.QueryRow(qctx, sql, args...).Scan(&n)
		return err == nil, fmt.Sprint(err)
	})
	return n
}

// awaitClaims waits until every worker has claimed after since (this
// process's clock) and returns how long after since each first did.
func (r *outageRig) awaitClaims(since time.Time, after string) []time.Duration {
	r.t.Helper()
	back := r.off.toDB(since)
	var out []time.Duration
	for _, w := range r.workers {
		out = append(out, firstClaimAfter(r.t, r.db, w.id, back, after))
	}
	return out
}

// awaitAPI waits until the API is ready and returns how long after since.
func (r *outageRig) awaitAPI(since time.Time, after string) time.Duration {
	r.t.Helper()
	awaitCond(r.t, time.Minute, "the API ready again after "+after, func() (bool, string) {
		err := r.api.ready(context.Background())
		return err == nil, fmt.Sprint(err)
	})
	return time.Since(since)
}

// drain stops the producer, waits until every item is done, and checks that
// every process still runs and that the API acknowledged enqueues after
// last, the end of the last outage.
func (r *outageRig) drain(last time.Time) {
	r.t.Helper()
	r.prod.stop()
	total := int64(r.backlog + len(r.prod.acked))
	awaitCond(r.t, 3*time.Minute, "every item done", func() (bool, string) {
		n := r.query("done count", `select (select count(*) from workq.job_runs_all where status = 2) + (select count(*) from workq.outbox where status = 2)`)
		all := r.query("item count", `select (select count(*) from workq.job_runs_all) + (select count(*) from workq.outbox)`)
		// all < total when acknowledged enqueues were lost: lostEnqueues
		// names them.
		return n == all, fmt.Sprintf("%d of %d done (%d acknowledged)", n, all, total)
	})
	for _, p := range []*proc{r.maint.p, r.workers[0].p, r.workers[1].p, r.api.p} {
		select {
		case <-p.done:
			r.t.Errorf("%s exited (code %d) during the outages; want it to reconnect and go on", p.name, p.state.ExitCode())
		default:
		}
	}
	if acks := r.prod.apiAcked; len(acks) == 0 || !acks[len(acks)-1].After(last) {
		r.t.Errorf("the API acknowledged %d enqueues, none after the last outage", len(acks))
	}
}

// leaderToken returns the maintenance lock's token.
func (r *outageRig) leaderToken() int64 {
	r.t.Helper()
	return r.query("the maintenance lock's token", `select token from workq.workq_locks where name = 'workq.maintenance'`)
}

// checkLeader checks that the leader holds its lock, renewed after last
// (this process's clock), under a token greater than before (when not 0).
//
// It waits for that, up to leaderBound: a leader whose renewals failed
// through the outage for longer than its TTL has lost the lock and takes
// it again on its next try, which may come after the work is drained (seen
// once under load, when the check read the lock at that instant).
func (r *outageRig) checkLeader(last time.Time, before int64) int64 {
	r.t.Helper()
	var owner, problem string
	var renewedAfter bool
	var token int64
	deadline := time.Now().Add(leaderBound)
	for {
		err := r.db.QueryRow(context.Background(), `select owner, token, expires_at - interval '3 seconds' > $1 and expires_at > clock_timestamp()
			from workq.workq_locks where name = 'workq.maintenance'`, r.off.toDB(last)).Scan(&owner, &token, &renewedAfter)
		if err == nil && owner == r.maint.id && renewedAfter && token > before {
			return token
		}
		problem = fmt.Sprintf("owner %q, token %d, renewed after the last outage %t (%v)", owner, token, renewedAfter, err)
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.t.Errorf("maintenance lock after %s: %s; want held by %s under a token over %d", leaderBound, problem, r.maint.id, before)
	return token
}

// leaderBound is how long after the work is drained the leader may take to
// hold its lock again: a few of its 3 s TTLs.
const leaderBound = 15 * time.Second

// lostEnqueues returns a line per acknowledged enqueue that is not stored
// done, and how many failed enqueues committed anyway (the database has
// those that committed before the connection broke).
func (r *outageRig) lostEnqueues() (lost []string, committedAnyway int) {
	r.t.Helper()
	stored := map[int]int16{}
	collectRows(r.t, r.db, `select (payload->'body'->>'seq')::int, status from workq.job_runs_all where payload->'body' ? 'seq'`,
		func(row struct {
			Seq    int
			Status int16
		}) {
			stored[row.Seq] = row.Status
		})
	for _, seq := range r.prod.acked {
		if st, ok := stored[seq]; !ok || st != 2 {
			lost = append(lost, fmt.Sprintf("acknowledged enqueue %d: stored %t, status %d; want done", seq, ok, st))
		}
	}
	for _, seq := range r.prod.failed {
		if _, ok := stored[seq]; ok {
			committedAnyway++
		}
	}
	return lost, committedAnyway
}

// stop stops every process (each must exit 0 on SIGTERM) and loads the
// history; it returns the workers' final counters too.
func (r *outageRig) stop() (*history, []map[string]int64) {
	r.t.Helper()
	r.f.stopAll()
	r.api.p.signal(r.t, syscall.SIGTERM)
	if code := r.api.p.wait(r.t, 30*time.Second); code != 0 {
		r.t.Errorf("workq api exited %d after SIGTERM, want 0", code)
	}
	var stats []map[string]int64
	for _, w := range r.workers {
		stats = append(stats, workerStats(r.t, w))
	}
	return loadHistory(r.t, r.db, r.rc, r.off), stats
}

// libfaketime returns the path of libfaketime.so.1 (Debian package
// faketime), failing the test when it is not installed.
func libfaketime(t *testing.T) string {
	t.Helper()
	found, _ := filepath.Glob("/usr/lib/*/faketime/libfaketime.so.1")
	if len(found) == 0 {
		t.Fatal("libfaketime is not installed: apt-get install faketime (.ci/run installs it); the clock-skew scenario runs PostgreSQL under it")
	}
	return found[0]
}

// skewRun is what one clock-skew run measured, on the database clock.
type skewRun struct {
	Skew            string
	Offset          time.Duration // database clock minus the workers' clock
	LeaseLen        [2]time.Duration
	Outcomes        string // per kind of item: its leases' outcomes, in order
	DelayedLag      [2]time.Duration
	RetryDelay      [2]time.Duration
	ReapLag         time.Duration
	CutMargin       time.Duration
	ScheduleLag     [2]time.Duration
	LeaderRemaining time.Duration
}

// minMax widens r to include d; r[0] > r[1] means empty.
func minMax(r *[2]time.Duration, d time.Duration) {
	if r[0] > r[1] {
		*r = [2]time.Duration{d, d}
		return
	}
	r[0], r[1] = min(r[0], d), max(r[1], d)
}

func emptyRange() [2]time.Duration { return [2]time.Duration{time.Hour, -time.Hour} }

// Scenario 7: the workers' clocks far ahead of and far behind the
// database's. Go programs read the clock through the vDSO, which
// libfaketime cannot intercept, so the skew is made on the other side: the
// scenario's PostgreSQL runs under libfaketime an hour behind (the workers
// are an hour ahead) or an hour ahead (they are an hour behind), and once
// without an offset. The same workload runs against each: quick jobs, jobs
// longer than the lease (only heartbeats keep them), delayed jobs, jobs
// that fail once (retry after a backoff), a worker killed mid-handler (its
// lease is reaped), a worker cut off mid-handler (its local deadline
// cancels the handler), a schedule with a slot every 2 seconds, the
// maintenance leader's lock and outbox messages. Every lease decision is
// made on the database clock, so each run behaves alike: the same outcomes,
// leases of exactly the configured length from the statement that took or
// extended them, and the same small lags; a decision made on a worker's
// clock would be an hour off.
func testFaultClockSkew(t *testing.T, bin string) {
	lib := libfaketime(t)
	var runs []skewRun
	for _, c := range []struct {
		name, faketime string
		offset         time.Duration
	}{
		{"in step", "+0", 0},
		{"workers an hour ahead", "-1h", -time.Hour},
		{"workers an hour behind", "+1h", time.Hour},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := runClockSkew(t, bin, pgembed.Options{Env: []string{"LD_PRELOAD=" + lib, "FAKETIME=" + c.faketime,
				"FAKETIME_DONT_FAKE_MONOTONIC=1"}}, c.offset)
			r.Skew = c.name
			runs = append(runs, r)
		})
	}
	if len(runs) != 3 || t.Failed() {
		return
	}
	for _, r := range runs {
		t.Logf("%-22s offset %8s: lease %v, delayed pickup %v, retry delay %v, reap %s after expiry, cut-off handler cancelled %s before expiry, schedule lag %v, leader lock %s left",
			r.Skew, r.Offset.Round(time.Second), r.LeaseLen, r.DelayedLag, r.RetryDelay, r.ReapLag.Round(time.Millisecond),
			r.CutMargin.Round(time.Millisecond), r.ScheduleLag, r.LeaderRemaining.Round(time.Millisecond))
		if r.Outcomes != runs[0].Outcomes {
			t.Errorf("%s: outcomes\n%s\nwant the same as %s:\n%s", r.Skew, r.Outcomes, runs[0].Skew, runs[0].Outcomes)
		}
	}
}

// runClockSkew runs the clock-skew workload against a server started with o,
// whose clock should be offset from this process's by about want.
func runClockSkew(t *testing.T, bin string, o pgembed.Options, want time.Duration) skewRun {
	const lease, poll, leaderTTL = 3 * time.Second, 200 * time.Millisecond, 5 * time.Second
	ctx := context.Background()
	_, url := ownServer(t, o)
	db := openTestPool(t, url)
	off := measureClockOffset(t, db)
	if d := off.Offset - want; d < -5*time.Second || d > 5*time.Second {
		t.Fatalf("the server's clock is %s off this process's; want about %s (is libfaketime working?)", off.Offset, want)
	}
	installHistory(t, db)
	var px *testutil.Proxy
	rc := startReceiver(t, func(d delivery) reaction {
		switch d.Body["mode"] {
		case "slow":
			return reaction{Delay: 2*lease + lease/2}
		case "fail-once":
			if d.Attempt == 1 {
				return reaction{Status: http.StatusInternalServerError}
			}
		case "hold":
			if d.Attempt == 1 {
				return reaction{Hold: true}
			}
		case "cut":
			if d.Attempt == 1 {
				return reaction{Hold: true, Before: px.Cut}
			}
		}
		return fewMillis(d)
	})
	px, pURL := proxied(t, url, "skew-p")
	env := procEnv(url)
	f := newFleet(t, bin)
	common := append([]string{"worker", "--jobs", "--lease", lease.String(), "--poll", poll.String(), "--log-format", "json",
		"--backoff-base", "200ms", "--backoff-cap", "1s"}, rc.workerArgs("skew.msg")...)
	f.start("maint", env, "maintain", "--leader-ttl", leaderTTL.String(), "--reap-interval", "300ms", "--schedule-interval", "200ms", "--log-format", "json")
	f.start("w", env, slices.Concat(common, []string{"--outbox", "--queues", "skew"})...)
	f.start("k", env, slices.Concat(common, []string{"--queues", "skew-kill"})...)
	f.start("p", procEnv(pURL), slices.Concat(common, []string{"--queues", "skew-cut"})...)

	c := jobq.New(jobq.Options{})
	enqueue := func(queue, mode string, n int, delay time.Duration) {
		t.Helper()
		for range n {
			if _, err := c.Enqueue(ctx, db, jobq.Job{Queue: queue, Kind: "webhook", Delay: delay,
				Payload: map[string]any{"url": rc.jobsURL(), "body": map[string]any{"mode": mode}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	enqueue("skew", "quick", 20, 0)
	enqueue("skew", "slow", 3, 0)
	enqueue("skew", "delayed", 5, 2*time.Second)
	enqueue("skew", "fail-once", 5, 0)
	enqueue("skew-kill", "hold", 1, 0)
	enqueue("skew-cut", "cut", 1, 0)
	sendMessages(t, db, "skew", "skew.msg", 10, 2)
	payload := fmt.Sprintf(`{"url":%q,"body":{"mode":"scheduled"}}`, rc.jobsURL())
	if out, errOut, code := runWorkq(t, bin, env, 30*time.Second, "schedules", "add", "tick", "--cron", "*/2 * * * * *",
		"--kind", "webhook", "--queue", "skew", "--payload", payload); code != 0 {
		t.Fatalf("schedules add: exit %d: %s%s", code, out, errOut)
	}

	// Kill k once its handler runs (its request is open at the receiver);
	// bring the proxy back once p's handler was cancelled.
	mode := func(m string) func(delivery) bool { return func(d delivery) bool { return d.Body["mode"] == m } }
	awaitCond(t, 30*time.Second, "k's handler and p's handler running", func() (bool, string) {
		k, p := rc.openWhere(mode("hold")), rc.openWhere(mode("cut"))
		return k == 1 && p == 1, fmt.Sprintf("%d of k's and %d of p's requests open", k, p)
	})
	f.kill("k")
	f.restart("k")
	awaitCond(t, 30*time.Second, "p's handler cancelled", func() (bool, string) {
		n := rc.countWhere(func(e handlerEvent) bool { return mode("cut")(e.delivery) && e.Outcome == "cancelled" })
		return n == 1, fmt.Sprintf("%d of p's requests cancelled", n)
	})
	px.Restore()
	awaitCond(t, 30*time.Second, "three scheduled runs", func() (bool, string) {
		n := queryScalar[int](t, db, `select count(*) from workq.job_runs_all where schedule_id is not null`)
		return n >= 3, fmt.Sprintf("%d runs", n)
	})
	if out, errOut, code := runWorkq(t, bin, env, 30*time.Second, "schedules", "disable", "tick"); code != 0 {
		t.Fatalf("schedules disable: exit %d: %s%s", code, out, errOut)
	}
	var r skewRun
	r.Offset = off.Offset
	if err := db.QueryRow(ctx, `select expires_at - clock_timestamp() from workq.workq_locks where name = 'workq.maintenance'`).Scan(&r.LeaderRemaining); err != nil {
		t.Fatal(err)
	}
	awaitCond(t, time.Minute, "every item done", func() (bool, string) {
		var n, all int
		if err := db.QueryRow(ctx, `select count(*) filter (where status = 2), count(*) from (
			select status from workq.job_runs_all union all select status from workq.outbox) t`).Scan(&n, &all); err != nil {
			t.Fatal(err)
		}
		return n == all, fmt.Sprintf("%d of %d done", n, all)
	})
	f.stopAll()

	h := loadHistory(t, db, rc, off)
	h.check(t, historyOpts{AllDone: true})
	modes := map[int64]string{}
	collectRows(t, db, `select id, coalesce(payload->'body'->>'mode', 'none') from workq.job_runs_all`, func(r struct {
		ID   int64
		Mode string
	}) {
		modes[r.ID] = r.Mode
	})
	outcomes := map[string][]string{}
	r.LeaseLen, r.DelayedLag, r.RetryDelay, r.ScheduleLag = emptyRange(), emptyRange(), emptyRange(), emptyRange()
	for _, it := range h.Items {
		mode := "outbox"
		if it.Table == "job_runs" {
			mode = modes[it.ID]
		}
		var seq []string
		for i, l := range it.Leases {
			seq = append(seq, l.Outcome)
			// Every claim and heartbeat set the lease to exactly the TTL after
			// its statement's start.
			for _, e := range l.Events {
				if e.Event == "claim" || e.Event == "heartbeat" {
					minMax(&r.LeaseLen, e.LockedUntil.Sub(e.StmtAt))
				}
			}
			switch {
			case mode == "delayed" && i == 0:
				minMax(&r.DelayedLag, l.Events[0].StmtAt.Sub(l.Events[0].RunAt))
			case mode == "fail-once" && i == 0 && l.End != nil:
				minMax(&r.RetryDelay, l.RunAt.Sub(l.EndStmt))
				if next := it.Leases[1:]; len(next) > 0 && next[0].Events[0].StmtAt.Before(l.RunAt) {
					t.Errorf("job %d retried by a claim at %s, before it was due at %s", it.ID, ts(next[0].Events[0].StmtAt), ts(l.RunAt))
				}
			case mode == "hold" && i == 0 && l.End != nil:
				r.ReapLag = l.EndStmt.Sub(l.Expiry)
			case mode == "cut" && i == 0 && len(l.Handlers) == 1:
				r.CutMargin = l.ExpiryAt(l.Handlers[0].End).Sub(l.Handlers[0].End)
			}
		}
		if mode == "slow" && (len(it.Leases) != 1 || it.Leases[0].Beats < 4) {
			t.Errorf("slow job %d: want one lease kept by at least 4 heartbeats\n%s", it.ID, it.format())
		}
		outcomes[mode] = append(outcomes[mode], strings.Join(seq, ","))
	}
	var lines []string
	for mode, seqs := range outcomes {
		if mode == "scheduled" {
			seqs = seqs[:1] // how many slots fell in the window varies
		}
		slices.Sort(seqs)
		lines = append(lines, fmt.Sprintf("%s: %s", mode, strings.Join(slices.Compact(seqs), " | ")))
	}
	slices.Sort(lines)
	r.Outcomes = strings.Join(lines, "\n")

	// Schedule slots are even seconds of the database clock, made soon
	// after they fell due.
	collectRows(t, db, `select scheduled_time, created_at from workq.job_runs_all where schedule_id is not null`, func(sr struct {
		Slot, Created time.Time
	}) {
		if sr.Slot.Second()%2 != 0 || sr.Slot.Nanosecond() != 0 {
			t.Errorf("schedule slot %s is not an even second", sr.Slot)
		}
		minMax(&r.ScheduleLag, sr.Created.Sub(sr.Slot))
	})

	// The bounds every run must meet, whatever its skew.
	check := func(what string, got [2]time.Duration, lo, hi time.Duration) {
		if got[0] < lo || got[1] > hi {
			t.Errorf("%s in [%s, %s]; want within [%s, %s]", what, got[0], got[1], lo, hi)
		}
	}
	check("lease end minus the start of the statement that set it", r.LeaseLen, lease, lease)
	check("delayed jobs: first claim after due", r.DelayedLag, 0, poll+3*time.Second)
	check("retry: due time after the failed attempt", r.RetryDelay, 0, 400*time.Millisecond+time.Millisecond)
	// The upper bounds are loose (the machine is loaded); a decision on a
	// worker's clock would miss them by an hour.
	check("schedule: slot to its run", r.ScheduleLag, 0, 5*time.Second)
	check("killed worker's lease: reaped after expiry", [2]time.Duration{r.ReapLag, r.ReapLag}, 0, 5*time.Second)
	check("cut-off worker: handler cancelled before expiry", [2]time.Duration{r.CutMargin, r.CutMargin}, time.Millisecond, lease)
	check("leader lock: time left", [2]time.Duration{r.LeaderRemaining, r.LeaderRemaining}, time.Millisecond, leaderTTL)
	return r
}

// apiProc is a `workq api` process with an admin token.
type apiProc struct {
	p     *proc
	base  string
	token string
}

// startAPI starts `workq api` on a free loopback port and waits until it is
// ready.
func startAPI(t *testing.T, bin string, env []string) *apiProc {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	secret := make([]byte, 16)
	for i := range secret {
		secret[i] = byte(rand.IntN(256))
	}
	a := &apiProc{base: "http://" + addr, token: "wq_faults_" + hex.EncodeToString(secret)}
	sum := sha256.Sum256([]byte(a.token))
	a.p = startProc(t, "api", bin, append(slices.Clone(env), "WORKQ_API_TOKENS=faults:admin:"+hex.EncodeToString(sum[:])),
		"api", "--api-addr", addr, "--ui=false", "--log-format", "json")
	awaitCond(t, 30*time.Second, "workq api ready", func() (bool, string) {
		err := a.ready(context.Background())
		return err == nil, fmt.Sprint(err)
	})
	return a
}

// ready asks /readyz.
func (a *apiProc) ready(ctx context.Context) error {
	_, err := a.do(ctx, http.MethodGet, "/readyz", nil)
	return err
}

// enqueue enqueues a webhook job run through POST /v1/jobs.
func (a *apiProc) enqueue(ctx context.Context, queue string, payload any) error {
	_, err := a.do(ctx, http.MethodPost, "/v1/jobs", map[string]any{"queue": queue, "kind": "webhook", "payload": payload})
	return err
}

// do sends one request and wants a 2xx answer.
func (a *apiProc) do(ctx context.Context, method, path string, body any) ([]byte, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode/100 != 2 {
		err = fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, out)
	}
	return out, err
}

// holders returns the worker ids among ids that hold a valid lease of a
// job run of queue on db now, one entry per lease.
func holders(t *testing.T, db *pgxpool.Pool, queue string, ids []string) []string {
	t.Helper()
	rows, err := db.Query(context.Background(), `select claimed_by from workq.job_runs_all where queue = $1 and status = 1 and locked_until > now()`, queue)
	if err != nil {
		t.Fatal(err)
	}
	var by []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(ids, id) {
			by = append(by, id)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return by
}

// anyHolder returns one of by at random, weighted by the leases each
// holds ("" when by is empty).
func anyHolder(by []string) string {
	if len(by) == 0 {
		return ""
	}
	return by[rand.IntN(len(by))]
}
