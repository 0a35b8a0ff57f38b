package test

// Multi-process tests of the operations issue: several workq processes
// (the real binary) against one database, checked from the database.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/workq/workq/internal/jobq"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/maintain"
	"github.com/workq/workq/internal/testdb"
)

// TestMultiProcess builds cmd/workq once and runs the scenarios one after
// the other: their bounds are about timing (lock TTL, poll intervals), so
// they do not share the machine's two cores with each other. The test runs
// in parallel with the package's other long tests.
func TestMultiProcess(t *testing.T) {
	t.Parallel()
	bin := buildWorkq(t)
	t.Run("kill -9 of the maintenance leader", func(t *testing.T) { testMultiLeaderFailover(t, bin) })
	t.Run("pause honoured by the workers of three processes", func(t *testing.T) { testMultiPause(t, bin) })
	t.Run("retention deletes only old rows, in batches, while a worker runs", func(t *testing.T) { testMultiRetention(t, bin) })
}

// openTestPool opens a pool on url, closed when the test ends (before the
// database is dropped: testdb.URL registered its cleanup first).
func openTestPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatalf("open pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// withAppName returns url with application_name set, so that the
// process's connections can be told apart in pg_stat_activity.
func withAppName(t *testing.T, raw, name string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("parse %s: %v", raw, err)
	}
	q := u.Query()
	q.Set("application_name", name)
	u.RawQuery = q.Encode()
	return u.String()
}

// awaitCond polls cond until it holds, failing the test after within with
// what cond last reported seeing.
func awaitCond(t *testing.T, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, seen := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last seen: %s", within, what, seen)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func queryScalar[T any](t *testing.T, db *pgxpool.Pool, sql string, args ...any) T {
	t.Helper()
	var v T
	if err := db.QueryRow(context.Background(), sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

// awaitCount waits until the count query returns want.
func awaitCount(t *testing.T, db *pgxpool.Pool, within time.Duration, what string, want int, sql string, args ...any) {
	t.Helper()
	awaitCond(t, within, what, func() (bool, string) {
		n := queryScalar[int](t, db, sql, args...)
		return n == want, fmt.Sprintf("%d, want %d", n, want)
	})
}

func dbClock(t *testing.T, db *pgxpool.Pool) time.Time {
	t.Helper()
	return queryScalar[time.Time](t, db, "select clock_timestamp()")
}

// logLine is one line of a process's JSON log.
type logLine struct {
	Time time.Time
	Msg  string
	Attr map[string]any
}

// jsonLog parses a process's --log-format json output; lines that are not
// JSON objects are skipped.
func jsonLog(t *testing.T, out string) []logLine {
	t.Helper()
	var lines []logLine
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		l := logLine{Attr: m}
		l.Msg, _ = m["msg"].(string)
		if s, ok := m["time"].(string); ok {
			l.Time, _ = time.Parse(time.RFC3339Nano, s)
		}
		lines = append(lines, l)
	}
	return lines
}

func (l logLine) num(key string) int64 {
	f, _ := l.Attr[key].(float64)
	return int64(f)
}

// lockRow is the maintenance leader lock as the database has it.
type lockRow struct {
	Owner      string
	Token      int64
	ExpiresAt  time.Time
	AcquiredAt time.Time
	Held       bool
}

func readLock(ctx context.Context, db *pgxpool.Pool) (lockRow, error) {
	var l lockRow
	err := db.QueryRow(ctx, `select owner, token, expires_at, acquired_at, expires_at > clock_timestamp()
		from workq.workq_locks where name = $1`, maintain.DefaultLockName).Scan(&l.Owner, &l.Token, &l.ExpiresAt, &l.AcquiredAt, &l.Held)
	return l, err
}

// awaitLeader waits until owner holds the maintenance lock.
func awaitLeader(t *testing.T, db *pgxpool.Pool, owner string, within time.Duration) lockRow {
	t.Helper()
	var l lockRow
	awaitCond(t, within, owner+" holds the leader lock", func() (bool, string) {
		var err error
		l, err = readLock(context.Background(), db)
		if err != nil {
			return false, err.Error()
		}
		return l.Owner == owner && l.Held, fmt.Sprintf("%+v", l)
	})
	return l
}

// watchLock reads the lock row every 10ms until the returned function is
// called, which returns every row seen, in order.
func watchLock(t *testing.T, db *pgxpool.Pool) func() []lockRow {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan []lockRow)
	go func() {
		var seen []lockRow
		defer func() { done <- seen }()
		add := func(ctx context.Context) {
			l, err := readLock(ctx, db)
			if err == nil && (len(seen) == 0 || seen[len(seen)-1] != l) {
				seen = append(seen, l)
			}
		}
		for {
			add(ctx)
			select {
			case <-ctx.Done():
				// One last read once stopped: on a loaded machine the
				// polls can miss a row the test has already awaited (a
				// takeover reaped 26 ms before the stop, once, at load).
				last, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				add(last)
				cancel()
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	var rows []lockRow
	stopped := false
	stop := func() []lockRow {
		if !stopped {
			stopped = true
			cancel()
			rows = <-done
		}
		return rows
	}
	t.Cleanup(func() { stop() })
	return stop
}

// claimAll claims every ready job run of queue for a worker that will never
// come back: the leases expire after lease.
func claimAll(t *testing.T, db *pgxpool.Pool, queue string, n int, leaseTTL time.Duration) {
	t.Helper()
	c, err := lease.New(db, lease.JobRuns).Claim(context.Background(),
		lease.ClaimParams{Queue: queue, Max: n, Lease: leaseTTL, WorkerID: "crashed-" + queue})
	if err != nil || len(c.Items) != n {
		t.Fatalf("claim %s: %d items, %v; want %d", queue, len(c.Items), err, n)
	}
}

func enqueueN(t *testing.T, db *pgxpool.Pool, queue, kind string, payload any, n int) {
	t.Helper()
	jobs := make([]jobq.Job, n)
	for i := range jobs {
		jobs[i] = jobq.Job{Queue: queue, Kind: kind, Payload: payload}
	}
	if _, err := jobq.New(jobq.Options{}).EnqueueMany(context.Background(), db, jobs); err != nil {
		t.Fatalf("enqueue %d on %s: %v", n, queue, err)
	}
}

// Two `workq maintain` processes with a 2s leader TTL: kill -9 of the
// leader hands the lock to the other within about one TTL, under a greater
// fencing token, and only once the dead leader's lock expired on the
// database clock, so the two leaderships never overlap. The leader-only
// reap task shows the same from its effects: leases that expire before the
// kill are reaped by the first leader (and only while it led), leases that
// expire after it by the second, each exactly once.
func testMultiLeaderFailover(t *testing.T, bin string) {
	url := testdb.URL(t)
	leaderFailover(t, bin, url, url)
}

// leaderFailover is testMultiLeaderFailover with the maintain processes
// connecting through procURL (the same database as url, which the test
// watches directly).
func leaderFailover(t *testing.T, bin, url, procURL string) {
	const ttl = 2 * time.Second
	const perQueue = 10
	db := openTestPool(t, url)
	enqueueN(t, db, "fo-a", "k", nil, perQueue)
	enqueueN(t, db, "fo-b", "k", nil, perQueue)
	// The first group's leases expire in a second: the first leader reaps them.
	claimAll(t, db, "fo-a", perQueue, time.Second)

	stopWatch := watchLock(t, db)
	maint := func(name string) *proc {
		return startProc(t, name, bin, procEnv(withAppName(t, procURL, name)), "maintain",
			"--worker-id", name, "--leader-ttl", ttl.String(), "--reap-interval", "100ms", "--log-format", "json")
	}
	a := maint("maint-a")
	lockA := awaitLeader(t, db, "maint-a", 15*time.Second)
	awaitCount(t, db, 15*time.Second, "the leader reaps fo-a", perQueue,
		`select count(*) from workq.runs where queue = 'fo-a' and outcome = 'expired'`)

	b := maint("maint-b")
	// b is competing once one of its connections has run the acquire
	// statement (pg_stat_activity keeps each backend's last statement).
	awaitCond(t, 15*time.Second, "maint-b tries to take the leader lock", func() (bool, string) {
		n := queryScalar[int](t, db, `select count(*) from pg_stat_activity
			where datname = current_database() and application_name = 'maint-b' and query like '%LocksAcquire%'`)
		return n > 0, fmt.Sprintf("%d backends", n)
	})
	if l, err := readLock(context.Background(), db); err != nil || l.Owner != "maint-a" || l.Token != lockA.Token || !l.Held {
		t.Fatalf("before the kill the lock is %+v (%v); want still held by maint-a under token %d", l, err, lockA.Token)
	}

	killAt := dbClock(t, db)
	killWall := time.Now()
	if err := syscall.Kill(-a.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := a.wait(t, 5*time.Second); code != -1 {
		t.Fatalf("maint-a exited %d, want killed by a signal", code)
	}
	// The second group's leases expire after the leader died: only the next
	// leader can reap them.
	claimAll(t, db, "fo-b", perQueue, time.Second)

	lockB := awaitLeader(t, db, "maint-b", 15*time.Second)
	takeover := lockB.AcquiredAt.Sub(killAt)
	t.Logf("maint-b took over %s after the kill (database clock), token %d -> %d, lock TTL %s",
		takeover.Round(time.Millisecond), lockA.Token, lockB.Token, ttl)
	awaitCount(t, db, 15*time.Second, "the new leader reaps fo-b", perQueue,
		`select count(*) from workq.runs where queue = 'fo-b' and outcome = 'expired'`)
	seen := stopWatch()

	if lockB.Token <= lockA.Token {
		t.Errorf("token after the takeover %d, before %d: want it greater", lockB.Token, lockA.Token)
	}
	// The dead leader's lock lives at most one TTL after its last renewal,
	// which came before the kill; the follower retries every TTL/4. The
	// rest is slack for a loaded machine.
	if limit := ttl + ttl/4 + 1500*time.Millisecond; takeover > limit {
		t.Errorf("maint-b took over %s after the kill; want within %s (TTL + retry interval + slack)", takeover, limit)
	}
	if takeover < 0 {
		t.Errorf("maint-b acquired the lock at %s, before the kill at %s", lockB.AcquiredAt, killAt)
	}

	// Every row of the lock the test saw: the token never goes back, one
	// token has one owner, and maint-b's token starts only after maint-a's
	// lease had expired.
	owners := map[int64]string{}
	var lastA time.Time // the latest expiry maint-a's token had
	var prev int64
	for _, l := range seen {
		if l.Token < prev {
			t.Errorf("the lock's token went back from %d to %d (%+v)", prev, l.Token, l)
		}
		prev = l.Token
		if o, ok := owners[l.Token]; ok && o != l.Owner {
			t.Errorf("token %d held by %s and by %s", l.Token, o, l.Owner)
		}
		owners[l.Token] = l.Owner
		if l.Token == lockA.Token && l.ExpiresAt.After(lastA) {
			lastA = l.ExpiresAt
		}
	}
	if owners[lockA.Token] != "maint-a" || owners[lockB.Token] != "maint-b" || len(owners) != 2 {
		t.Errorf("tokens seen %v; want %d maint-a and %d maint-b only", owners, lockA.Token, lockB.Token)
	}
	if lockB.AcquiredAt.Before(lastA) {
		t.Errorf("maint-b acquired the lock at %s, before maint-a's lock expired at %s: two leaders at once",
			lockB.AcquiredAt, lastA)
	}
	t.Logf("maint-a's lock expired %s after the kill; maint-b acquired it %s after that",
		lastA.Sub(killAt).Round(time.Millisecond), lockB.AcquiredAt.Sub(lastA).Round(time.Millisecond))

	// The reaps, on the database clock: fo-a only while maint-a led, fo-b
	// only after maint-b took over; every lost attempt archived once.
	ctx := context.Background()
	rows, err := db.Query(ctx, `select j.queue, j.id, j.status, j.attempts, count(r.run_id), min(r.finished_at), max(r.finished_at)
		from workq.job_runs_all j left join workq.runs r on r.work_table = 'job_runs' and r.item_id = j.id and r.outcome = 'expired'
		group by j.queue, j.id, j.status, j.attempts order by j.id`)
	if err != nil {
		t.Fatal(err)
	}
	type reapRow struct {
		Queue           string
		ID              int64
		Status          int16
		Attempts        int32
		Expired         int64
		First, LastReap *time.Time
	}
	reaped, err := pgx.CollectRows(rows, pgx.RowToStructByPos[reapRow])
	if err != nil {
		t.Fatal(err)
	}
	if len(reaped) != 2*perQueue {
		t.Fatalf("%d job runs, want %d", len(reaped), 2*perQueue)
	}
	for _, r := range reaped {
		if r.Expired != 1 || r.Status != 0 || r.Attempts != 1 || r.First == nil || r.LastReap == nil {
			t.Errorf("%s item %d: %d expired runs, status %d, attempts %d; want reaped once, back to ready after attempt 1",
				r.Queue, r.ID, r.Expired, r.Status, r.Attempts)
			continue
		}
		switch r.Queue {
		case "fo-a":
			if r.First.Before(lockA.AcquiredAt) || r.LastReap.After(killAt) {
				t.Errorf("fo-a item %d reaped at %s, outside maint-a's leadership [%s, %s]", r.ID, *r.First, lockA.AcquiredAt, killAt)
			}
		case "fo-b":
			if r.First.Before(lockB.AcquiredAt) {
				t.Errorf("fo-b item %d reaped at %s, before maint-b took over at %s", r.ID, *r.First, lockB.AcquiredAt)
			}
		}
	}

	// Each process's own account: one leadership each, under the tokens the
	// database shows; maint-b led only after the kill; each reaped its own
	// group and nothing else.
	// maint-b logs its reap after the statement commits, which the test saw
	// already: wait for the line, or a loaded machine reads the log first.
	loggedRequeued := func(p *proc) (n int64) {
		for _, l := range jsonLog(t, p.stderr.String()) {
			if l.Msg == "reaped expired leases" {
				n += l.num("requeued")
			}
		}
		return n
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && loggedRequeued(b) < perQueue; {
		time.Sleep(20 * time.Millisecond)
	}
	for _, c := range []struct {
		p     *proc
		token int64
	}{{a, lockA.Token}, {b, lockB.Token}} {
		var leading []logLine
		var requeued int64
		for _, l := range jsonLog(t, c.p.stderr.String()) {
			switch l.Msg {
			case "maintenance: leading":
				leading = append(leading, l)
			case "reaped expired leases":
				if len(leading) == 0 {
					t.Errorf("%s reaped before it led: %v", c.p.name, l.Attr)
				}
				requeued += l.num("requeued")
			}
		}
		if len(leading) != 1 || leading[0].num("token") != c.token {
			t.Errorf("%s logged %d leaderships (%v); want one, under token %d", c.p.name, len(leading), leading, c.token)
		}
		if requeued != perQueue {
			t.Errorf("%s logged %d requeued rows; want %d", c.p.name, requeued, perQueue)
		}
		if c.p == b && len(leading) == 1 && leading[0].Time.Before(killWall) {
			t.Errorf("maint-b started leading at %s, before maint-a was killed at %s", leading[0].Time, killWall)
		}
	}
}

// Three `workq worker` processes work a queue; `workq queue pause` stops
// all of them from claiming while their items in flight finish; `workq
// queue resume` lets them work off the rest. The handlers are exec sleep
// 0.3 rather than noop: a noop item is in flight for microseconds, so the
// pause would find nothing in flight to let finish.
func testMultiPause(t *testing.T, bin string) {
	const total = 48
	const queue = "pq"
	ctx := context.Background()
	url := testdb.URL(t)
	db := openTestPool(t, url)
	env := procEnv(url)
	enqueueN(t, db, queue, "exec", map[string]any{"command": "sleep", "args": []string{"0.3"}}, total)

	var workers []*proc
	for i := range 3 {
		id := fmt.Sprintf("pw-%d", i+1)
		workers = append(workers, startProc(t, id, bin, env, "worker", "--jobs", "--queues", queue,
			"--exec-allow", "sleep", "--concurrency", "2", "--batch", "2", "--poll", "200ms", "--lease", "10s", "--worker-id", id))
	}
	awaitCond(t, 20*time.Second, "every worker process claims", func() (bool, string) {
		n := queryScalar[int](t, db, `select count(distinct claimed_by) from workq.job_runs_all where queue = $1`, queue)
		return n == len(workers), fmt.Sprintf("%d processes claimed", n)
	})

	out, errOut, code := runWorkq(t, bin, env, 30*time.Second, "queue", "pause", "job_runs", queue, "--actor", "test", "--reason", "multi-process")
	if code != 0 || out != "job_runs/"+queue+" paused\n" {
		t.Fatalf("queue pause: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// The pause has committed: a claim that starts from now on sees it, so
	// no row may be claimed later than this.
	pausedAt := dbClock(t, db)
	var inFlight []int64
	rows, err := db.Query(ctx, `select id from workq.job_runs_all where queue = $1 and status = 1`, queue)
	if err != nil {
		t.Fatal(err)
	}
	if inFlight, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
		t.Fatal(err)
	}
	if len(inFlight) == 0 {
		t.Fatal("nothing in flight when the pause took effect: the test proves nothing about in-flight items")
	}
	// An item enqueued during the pause notifies every worker: each tries a
	// claim at once.
	enqueueCLI(t, bin, env, "--queue", queue, "--kind", "exec", "--payload", `{"command":"sleep","args":["0.3"]}`)

	// The items in flight finish (done, not released or failed).
	awaitCond(t, 30*time.Second, "the items in flight at the pause finish", func() (bool, string) {
		n := queryScalar[int](t, db, `select count(*) from workq.job_runs_all where queue = $1 and (status = 1 or (id = any($2) and status <> 2))`, queue, inFlight)
		return n == 0, fmt.Sprintf("%d in flight or not done", n)
	})
	ready := queryScalar[int](t, db, `select count(*) from workq.job_runs_all where queue = $1 and status = 0`, queue)
	if ready == 0 {
		t.Fatal("the queue drained before the pause took effect: nothing left to hold back")
	}
	// Nothing must happen now, and there is no event to await for that: a
	// worker ignoring the pause would claim within one --poll (200ms) or at
	// once on a notification, so watching for 2s (ten polls of each of the
	// three processes) would catch it.
	watchEnd := time.Now().Add(2 * time.Second)
	for time.Now().Before(watchEnd) {
		var inProgress, late, nowReady int
		if err := db.QueryRow(ctx, `select count(*) filter (where status = 1), count(*) filter (where claimed_at > $2),
			count(*) filter (where status = 0) from workq.job_runs_all where queue = $1`, queue, pausedAt).Scan(&inProgress, &late, &nowReady); err != nil {
			t.Fatal(err)
		}
		if inProgress != 0 || late != 0 || nowReady != ready {
			t.Fatalf("while paused: %d in progress, %d claimed after the pause, %d ready (was %d)", inProgress, late, nowReady, ready)
		}
		time.Sleep(50 * time.Millisecond)
	}
	out, errOut, code = runWorkq(t, bin, env, 30*time.Second, "queue", "list", "--json")
	var list []struct {
		Table, Queue string
		Paused       bool
		PausedBy     string `json:"paused_by"`
		Ready        int
	}
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 ||
		!list[0].Paused || list[0].PausedBy != "test" || list[0].Ready != ready {
		t.Errorf("queue list --json: exit %d, %q (stderr %q); want %s paused by test with %d ready", code, out, errOut, queue, ready)
	}

	out, errOut, code = runWorkq(t, bin, env, 30*time.Second, "queue", "resume", "job_runs", queue)
	if code != 0 || out != "job_runs/"+queue+" running\n" {
		t.Fatalf("queue resume: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	awaitCount(t, db, 60*time.Second, "every item done after the resume", total+1,
		`select count(*) from workq.job_runs_all where queue = $1 and status = 2`, queue)
	var once, doneRuns, resumedBy int
	if err := db.QueryRow(ctx, `select count(*) filter (where attempts = 1), count(distinct claimed_by) filter (where claimed_at > $2)
		from workq.job_runs_all where queue = $1`, queue, pausedAt).Scan(&once, &resumedBy); err != nil {
		t.Fatal(err)
	}
	doneRuns = queryScalar[int](t, db, `select count(*) from workq.runs_all where queue = $1 and outcome = 'done'`, queue)
	if once != total+1 || doneRuns != total+1 {
		t.Errorf("%d items done on their first attempt, %d done runs archived; want %d each", once, doneRuns, total+1)
	}
	t.Logf("%d in flight at the pause, %d held back; after the resume %d processes claimed", len(inFlight), ready, resumedBy)
	for _, w := range workers {
		w.signal(t, syscall.SIGTERM)
	}
	for _, w := range workers {
		if code := w.wait(t, 15*time.Second); code != 0 {
			t.Errorf("%s exited %d after SIGTERM, want 0", w.name, code)
		}
	}
}

// A `workq maintain` with --retain-finished 30m and --retain-runs 30m and a
// `workq worker` working new items on another queue at the same time:
// retention deletes the finished rows and archived runs older than 30
// minutes, in single-statement transactions of at most 1000
// rows (the documented batch, docs/operations.md), and nothing else:
// finished rows just inside the age, ready and in-progress rows, and what
// the worker finishes meanwhile stay. A trigger records every delete
// statement (rows, transaction, statuses, newest finished_at). The old
// archived runs ended 40 days ago, on a day no partition of the archive
// covers (a test database's start at its template's migration), so they are
// in the DEFAULT partition, whose old rows retention deletes in batches like
// the work rows (day partitions are dropped whole:
// maintain.TestRetentionRunPartitions).
func testMultiRetention(t *testing.T, bin string) {
	const batch = 1000 // maintain.Retention's default, used by workq maintain
	ctx := context.Background()
	url := testdb.URL(t)
	db := openTestPool(t, url)
	for _, sql := range []string{
		`create table deletions (tbl text not null, xid bigint not null, n int not null, live int not null,
			newest timestamptz, at timestamptz not null default clock_timestamp())`,
		`create function log_job_runs_deletes() returns trigger language plpgsql as $$
		begin
			insert into deletions (tbl, xid, n, live, newest)
			-- in-progress rows are a completion moving its done runs to
			-- job_runs_done, not retention (the held ones are counted below)
			select 'job_runs', txid_current(), count(*) filter (where status <> 1), count(*) filter (where status < 1),
			       max(finished_at) filter (where status <> 1) from gone;
			return null;
		end $$`,
		`create function log_runs_deletes() returns trigger language plpgsql as $$
		begin
			-- a day's partition being made moves that day's rows out of the
			-- DEFAULT partition (after midnight UTC, the worker's new runs):
			-- not retention
			if current_query() like '%DayPartitionsAdd%' then
				return null;
			end if;
			insert into deletions (tbl, xid, n, live, newest)
			select 'runs', txid_current(), count(*), 0, max(finished_at) from gone;
			return null;
		end $$`,
		`create trigger job_runs_deletions after delete on workq.job_runs referencing old table as gone
			for each statement execute function log_job_runs_deletes()`,
		`create trigger runs_deletions after delete on workq.runs_default referencing old table as gone
			for each statement execute function log_runs_deletes()`,
	} {
		if _, err := db.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	// seedOld adds n finished job runs (a fifth failed) that ended about
	// two hours ago and n/2 archived runs that ended 40 days ago.
	seedOld := func(n int) {
		t.Helper()
		if _, err := db.Exec(ctx, `insert into workq.job_runs (queue, kind, status, attempts, finished_at, created_at)
			select 'old', 'k', case when i % 5 = 0 then 3 else 2 end, 1,
			       now() - interval '2 hours' + i * interval '1 millisecond', now() - interval '3 hours'
			from generate_series(1, $1) i`, n); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(ctx, `insert into workq.runs (run_id, work_table, item_id, queue, attempt, lease_version, owner_token,
				worker_id, started_at, finished_at, outcome)
			select gen_random_uuid(), 'job_runs', i, 'old', 1, 1, gen_random_uuid(), 'w',
			       now() - interval '40 days', now() - interval '40 days' + i * interval '1 millisecond', 'done'
			from generate_series(1, $1) i`, n/2); err != nil {
			t.Fatal(err)
		}
		if n := queryScalar[int](t, db, `select count(*) from workq.runs where queue = 'old' and tableoid <> 'workq.runs_default'::regclass`); n != 0 {
			t.Fatalf("%d old runs outside the DEFAULT partition: a partition covers their day", n)
		}
	}
	const old1, old2 = 2500, 1100
	seedOld(old1)
	// Kept: finished 25 minutes ago (inside the 30 minutes), ready but
	// delayed, and in progress under a long lease.
	if _, err := db.Exec(ctx, `insert into workq.job_runs (queue, kind, status, attempts, finished_at)
		select 'recent', 'k', 2, 1, now() - interval '25 minutes' from generate_series(1, 300)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `insert into workq.runs (run_id, work_table, item_id, queue, attempt, lease_version, owner_token,
			worker_id, started_at, finished_at, outcome)
		select gen_random_uuid(), 'job_runs', i, 'recent', 1, 1, gen_random_uuid(), 'w',
		       now() - interval '26 minutes', now() - interval '25 minutes', 'done'
		from generate_series(1, 200) i`); err != nil {
		t.Fatal(err)
	}
	if _, err := jobq.New(jobq.Options{}).EnqueueMany(ctx, db, []jobq.Job{{Queue: "delayed", Kind: "k", Delay: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	enqueueN(t, db, "held", "k", nil, 20)
	claimAll(t, db, "held", 20, time.Hour)

	env := procEnv(url)
	w := startProc(t, "ret-worker", bin, env, "worker", "--jobs", "--queues", "live", "--poll", "200ms", "--worker-id", "ret-worker")
	live := 0
	feed := func() { enqueueN(t, db, "live", "noop", nil, 10); live += 10 }
	feed()
	awaitCount(t, db, 20*time.Second, "the worker works live items", live, `select count(*) from workq.job_runs_all where queue = 'live' and status = 2`)

	m := startProc(t, "ret-maintain", bin, env, "maintain", "--worker-id", "ret-maintain", "--leader-ttl", "2s",
		"--retain-finished", "30m", "--retain-runs", "30m", "--retention-interval", "1s", "--log-format", "json")
	awaitOldGone := func(what string) {
		t.Helper()
		awaitCond(t, 30*time.Second, what, func() (bool, string) {
			feed() // the worker keeps finishing new items while retention deletes
			var items, runs int
			if err := db.QueryRow(ctx, `select (select count(*) from workq.job_runs_all where queue = 'old'),
				(select count(*) from workq.runs where queue = 'old')`).Scan(&items, &runs); err != nil {
				t.Fatal(err)
			}
			return items == 0 && runs == 0, fmt.Sprintf("%d old items, %d old runs left", items, runs)
		})
	}
	awaitOldGone("retention deletes the first old rows")
	// More rows age out while everything runs: the next round takes them.
	seedOld(old2)
	awaitOldGone("the next retention round deletes the newly old rows")
	awaitCount(t, db, 30*time.Second, "the worker finishes every live item", live,
		`select count(*) from workq.job_runs_all where queue = 'live' and status = 2`)

	counts := map[string]int{}
	rows, err := db.Query(ctx, `select queue, count(*) from workq.job_runs_all group by queue`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var q string
		var n int
		if err := rows.Scan(&q, &n); err != nil {
			t.Fatal(err)
		}
		counts[q] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := map[string]int{"recent": 300, "delayed": 1, "held": 20, "live": live}; fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Errorf("job runs left by queue %v; want %v", counts, want)
	}
	if n := queryScalar[int](t, db, `select count(*) from workq.job_runs_all where queue = 'held' and status = 1`); n != 20 {
		t.Errorf("%d of the 20 held items still in progress", n)
	}
	if n := queryScalar[int](t, db, `select count(*) from workq.runs where queue = 'recent'`); n != 200 {
		t.Errorf("%d of the 200 recent archived runs left", n)
	}
	if n := queryScalar[int](t, db, `select count(*) from workq.runs_all where queue = 'live' and outcome = 'done'`); n != live {
		t.Errorf("%d archived runs of the %d live items", n, live)
	}

	// Every delete statement that removed rows, per table.
	// At least two rounds (one per seeding) of ceil(rows/batch) statements.
	ceil := func(n int) int { return (n + batch - 1) / batch }
	for _, c := range []struct {
		table          string
		want, minStmts int
	}{
		{"job_runs", old1 + old2, ceil(old1) + ceil(old2)},
		{"runs", old1/2 + old2/2, ceil(old1/2) + ceil(old2/2)},
	} {
		var stmts, txs, sum, biggest, live int
		var tooNew bool
		if err := db.QueryRow(ctx, `select count(*), count(distinct xid), coalesce(sum(n), 0), coalesce(max(n), 0), coalesce(sum(live), 0),
				coalesce(bool_or(newest >= at - interval '30 minutes'), false)
			from deletions where tbl = $1 and n > 0`, c.table).Scan(&stmts, &txs, &sum, &biggest, &live, &tooNew); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d rows deleted by %d statements in %d transactions, at most %d per statement", c.table, sum, stmts, txs, biggest)
		switch {
		case sum != c.want:
			t.Errorf("%s: %d rows deleted, want the %d old ones", c.table, sum, c.want)
		case biggest > batch:
			t.Errorf("%s: a statement deleted %d rows, more than the batch of %d", c.table, biggest, batch)
		case stmts < c.minStmts:
			t.Errorf("%s: %d delete statements, want at least %d (batches of %d over two rounds)", c.table, stmts, c.minStmts, batch)
		case txs != stmts:
			t.Errorf("%s: %d delete statements in %d transactions; want each in its own", c.table, stmts, txs)
		case live != 0 || tooNew:
			t.Errorf("%s: deleted %d unfinished rows, rows finished within 30 minutes: %t", c.table, live, tooNew)
		}
	}
	for _, p := range []*proc{w, m} {
		p.signal(t, syscall.SIGTERM)
	}
	for _, p := range []*proc{w, m} {
		if code := p.wait(t, 15*time.Second); code != 0 {
			t.Errorf("%s exited %d after SIGTERM, want 0", p.name, code)
		}
	}
	for _, l := range jsonLog(t, m.stderr.String()) {
		if l.Msg == "maintenance task failed; the other tasks go on" {
			t.Errorf("maintenance task failed: %v", l.Attr)
		}
	}
}
