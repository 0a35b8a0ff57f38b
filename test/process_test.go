package test

// Process-level tests: the workq binary, built once per run of TestProcess,
// driven as subprocesses against a per-test database (or, for `workq run`
// without DATABASE_URL, its own throwaway PostgreSQL).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/testutil"
)

// TestProcess builds cmd/workq once and runs the process-level scenarios as
// parallel subtests (each on its own database), in parallel with the
// package's other long tests.
func TestProcess(t *testing.T) {
	t.Parallel()
	bin := buildWorkq(t)
	t.Run("worker exits 0 on SIGTERM", func(t *testing.T) { t.Parallel(); testProcWorkerSIGTERM(t, bin) })
	t.Run("kill -9 mid-job is retried by another worker", func(t *testing.T) { t.Parallel(); testProcKill9(t, bin) })
	t.Run("kill -9 of the worker alone kills its exec command", func(t *testing.T) { t.Parallel(); testProcKill9Child(t, bin) })
	t.Run("run with DATABASE_URL", func(t *testing.T) { t.Parallel(); testProcRunWithDatabase(t, bin) })
	t.Run("run with a throwaway PostgreSQL", func(t *testing.T) { t.Parallel(); testProcRunEmbedded(t, bin) })
	t.Run("enqueue reads the payload from stdin and files", func(t *testing.T) { t.Parallel(); testProcEnqueuePayload(t, bin) })
}

func buildWorkq(t *testing.T) string {
	t.Helper()
	return testutil.BuildWorkq(t, "..") // tests run in their package directory
}

// procEnv is this process's environment without any database or WORKQ_*
// setting, plus DATABASE_URL=url when url is not empty.
func procEnv(url string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "DATABASE_URL" || k == "TEST_DATABASE_URL" || strings.HasPrefix(k, "WORKQ_") || strings.HasPrefix(k, "PG") {
			continue
		}
		env = append(env, kv)
	}
	if url != "" {
		env = append(env, "DATABASE_URL="+url)
	}
	return env
}

// proc is a running workq subprocess, leader of its own process group (so
// that kill -9 also takes the commands it runs).
type proc struct {
	name           string
	cmd            *exec.Cmd
	stdout, stderr testutil.Buffer
	done           chan struct{}
	state          *os.ProcessState
}

func startProc(t *testing.T, name, bin string, env []string, args ...string) *proc {
	t.Helper()
	return startProcInput(t, name, bin, env, "", args...)
}

// startProcInput is startProc with stdin as the process's standard input.
func startProcInput(t *testing.T, name, bin string, env []string, stdin string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = env
	p.cmd.Stdin = strings.NewReader(stdin)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.state = p.cmd.ProcessState
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s %v\n--- stdout:\n%s--- stderr:\n%s", name, args, p.stdout.String(), p.stderr.String())
		}
	})
	return p
}

// wait waits for the process to exit and returns its exit code (-1 when a
// signal ended it).
func (p *proc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.state.ExitCode()
	case <-time.After(timeout):
		t.Fatalf("%s did not exit within %s", p.name, timeout)
	}
	return 0
}

func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %s: %v", p.name, err)
	}
}

// runWorkq runs one workq command to completion.
func runWorkq(t *testing.T, bin string, env []string, timeout time.Duration, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	p := startProc(t, "workq "+args[0], bin, env, args...)
	code = p.wait(t, timeout)
	return p.stdout.String(), p.stderr.String(), code
}

// enqueueCLI runs `workq enqueue --json` and returns the new job's id.
func enqueueCLI(t *testing.T, bin string, env []string, args ...string) int64 {
	t.Helper()
	out, errOut, code := runWorkq(t, bin, env, 30*time.Second, append([]string{"enqueue"}, append(args, "--json")...)...)
	if code != 0 {
		t.Fatalf("workq enqueue exited %d: %s", code, errOut)
	}
	var res struct {
		ID        int64 `json:"id"`
		Duplicate bool  `json:"duplicate"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.ID <= 0 || res.Duplicate {
		t.Fatalf("workq enqueue --json printed %q (%v); want {\"id\": N, \"duplicate\": false}", out, err)
	}
	return res.ID
}

type procJob struct {
	Status    int16
	Attempts  int32
	ClaimedBy *string
	LastError *string
}

func readProcJob(t *testing.T, conn *pgx.Conn, id int64) procJob {
	t.Helper()
	var j procJob
	if err := conn.QueryRow(context.Background(), "select status, attempts, claimed_by, last_error from workq.job_runs_all where id = $1", id).
		Scan(&j.Status, &j.Attempts, &j.ClaimedBy, &j.LastError); err != nil {
		t.Fatalf("read job %d: %v", id, err)
	}
	return j
}

func waitProcJob(t *testing.T, conn *pgx.Conn, id int64, timeout time.Duration, what string, cond func(procJob) bool) procJob {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		j := readProcJob(t, conn, id)
		if cond(j) {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d: timed out after %s waiting for %s; last seen %+v", id, timeout, what, j)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type procRun struct {
	Attempt  int32
	WorkerID string
	Outcome  string
	Error    *string
}

func readProcRuns(t *testing.T, conn *pgx.Conn, id int64) []procRun {
	t.Helper()
	rows, err := conn.Query(context.Background(), `select attempt, worker_id, outcome, error from workq.runs_all
		where work_table = 'job_runs' and item_id = $1 order by finished_at`, id)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[procRun])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func str(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

// (a) A worker process works a CLI-enqueued exec job and exits 0 on SIGTERM.
func testProcWorkerSIGTERM(t *testing.T, bin string) {
	url := testdb.URL(t)
	conn := mustConnect(t, url)
	env := procEnv(url)
	w := startProc(t, "worker", bin, env, "worker", "--queues", "default", "--exec-allow", "true", "--lease", "2s", "--worker-id", "proc-sigterm")
	id := enqueueCLI(t, bin, env, "--kind", "exec", "--payload", `{"command":"true"}`)
	j := waitProcJob(t, conn, id, 10*time.Second, "done", func(j procJob) bool { return j.Status == 2 })
	if j.Attempts != 1 || str(j.ClaimedBy) != "proc-sigterm" {
		t.Errorf("job %+v; want done on attempt 1 by proc-sigterm", j)
	}
	if runs := readProcRuns(t, conn, id); len(runs) != 1 || runs[0].Outcome != "done" || runs[0].WorkerID != "proc-sigterm" {
		t.Errorf("runs %+v; want one done attempt by proc-sigterm", runs)
	}
	start := time.Now()
	w.signal(t, syscall.SIGTERM)
	if code := w.wait(t, 5*time.Second); code != 0 {
		t.Errorf("worker exited %d after SIGTERM, want 0", code)
	}
	t.Logf("worker exited %s after SIGTERM", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(w.stderr.String(), "worker stopped") {
		t.Errorf("worker log lacks its shutdown line")
	}
}

// startSleepJob enqueues an exec job running sleep for seconds, starts a
// worker that may run sleep, and waits until that worker holds the job.
func startSleepJob(t *testing.T, bin, seconds, lease, workerID string) (*pgx.Conn, []string, int64, *proc) {
	t.Helper()
	url := testdb.URL(t)
	conn := mustConnect(t, url)
	env := procEnv(url)
	id := enqueueCLI(t, bin, env, "--kind", "exec", "--payload", `{"command":"sleep","args":["`+seconds+`"]}`)
	w := startProc(t, workerID, bin, env, "worker", "--queues", "default", "--exec-allow", "sleep", "--lease", lease, "--worker-id", workerID)
	waitProcJob(t, conn, id, 10*time.Second, "in progress on "+workerID, func(j procJob) bool {
		return j.Status == 1 && str(j.ClaimedBy) == workerID
	})
	return conn, env, id, w
}

// (b) kill -9 mid-job: the lease expires, a second worker reclaims the job
// and finishes it; the archive shows both attempts.
func testProcKill9(t *testing.T, bin string) {
	conn, env, id, w1 := startSleepJob(t, bin, "3", "2s", "proc-w1")
	time.Sleep(200 * time.Millisecond) // let it start the command
	if err := syscall.Kill(-w1.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if code := w1.wait(t, 5*time.Second); code != -1 {
		t.Fatalf("worker 1 exited %d, want killed by a signal", code)
	}
	if j := readProcJob(t, conn, id); j.Status != 1 || str(j.ClaimedBy) != "proc-w1" {
		t.Fatalf("right after kill -9: %+v; want still in progress on proc-w1 (lease not yet expired)", j)
	}

	w2 := startProc(t, "worker 2", bin, env, "worker", "--queues", "default", "--exec-allow", "sleep", "--lease", "2s",
		"--worker-id", "proc-w2", "--poll", "250ms")
	j := waitProcJob(t, conn, id, 14*time.Second, "done", func(j procJob) bool { return j.Status >= 2 })
	t.Logf("done %s after kill -9", time.Since(killed).Round(time.Millisecond))
	if j.Status != 2 || j.Attempts != 2 || str(j.ClaimedBy) != "proc-w2" {
		t.Errorf("job %+v; want done on attempt 2 by proc-w2", j)
	}
	runs := readProcRuns(t, conn, id)
	if len(runs) != 2 ||
		runs[0].Outcome != "expired" || runs[0].WorkerID != "proc-w1" || runs[0].Attempt != 1 ||
		runs[1].Outcome != "done" || runs[1].WorkerID != "proc-w2" || runs[1].Attempt != 2 {
		t.Errorf("runs %+v; want [expired attempt 1 by proc-w1, done attempt 2 by proc-w2]", runs)
	}
	if len(runs) > 0 && !strings.Contains(str(runs[0].Error), "lease expired on attempt 1") {
		t.Errorf("expired run error %q", str(runs[0].Error))
	}
	w2.signal(t, syscall.SIGTERM)
	if code := w2.wait(t, 5*time.Second); code != 0 {
		t.Errorf("worker 2 exited %d after SIGTERM, want 0", code)
	}
}

// testProcKill9Child kills only the worker process, not its process group,
// while an exec job runs: the command must not outlive it (it would run
// again, concurrently, once the job is claimed after its lease expires).
func testProcKill9Child(t *testing.T, bin string) {
	_, _, _, w := startSleepJob(t, bin, "30", "30s", "proc-orphan")
	var child int
	deadline := time.Now().Add(5 * time.Second)
	for child == 0 && time.Now().Before(deadline) {
		child = childProcess(t, w.cmd.Process.Pid, "sleep")
		time.Sleep(20 * time.Millisecond)
	}
	if child == 0 {
		t.Fatal("the worker never started sleep")
	}
	if err := syscall.Kill(w.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	w.wait(t, 5*time.Second)
	deadline = time.Now().Add(5 * time.Second)
	for alive(child) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(child, syscall.SIGKILL)
			t.Fatalf("exec command (pid %d) still running 5s after its worker was killed", child)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// procStat reads /proc/<pid>/stat: the command name and the fields after
// it (state, ppid, ...). ok is false once the process is gone.
func procStat(pid string) (comm string, fields []string, ok bool) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return "", nil, false
	}
	s := string(b) // pid (comm) state ppid ...; comm may hold spaces and parentheses
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return "", nil, false
	}
	fields = strings.Fields(s[closing+1:])
	return s[open+1 : closing], fields, len(fields) >= 2
}

// childProcess returns the pid of a child of parent running command, or 0.
func childProcess(t *testing.T, parent int, command string) int {
	t.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		pid := filepath.Base(d)
		if comm, fields, ok := procStat(pid); ok && comm == command && fields[1] == strconv.Itoa(parent) {
			n, _ := strconv.Atoi(pid)
			return n
		}
	}
	return 0
}

// alive reports whether pid exists and is not a zombie (an orphan's zombie
// lingers where PID 1 does not reap).
func alive(pid int) bool {
	_, fields, ok := procStat(strconv.Itoa(pid))
	return ok && fields[0] != "Z"
}

var (
	progressLine = regexp.MustCompile(`(?m)^\[\s*\d+s\] job_runs \d+/\d+/\d+/\d+ outbox \d+/\d+/\d+/\d+ inbox \d+/\d+/\d+/\d+ timers \d+/\d+/\d+/\d+ \(ready/in progress/done/failed\) \| this worker: done \d+`)
	stoppedLine  = regexp.MustCompile(`(?m)^workq: stopped\. done=(\d+) retried=(\d+) failed=(\d+) released=(\d+) lease_lost=(\d+)$`)
)

// checkRunOutput checks `workq run` stdout and returns its final counts.
func checkRunOutput(t *testing.T, stdout string, demoJobs int) (done, failed int) {
	t.Helper()
	for _, want := range []string{"workq: schema at version", fmt.Sprintf("workq: demo on queue \"default\": %d job runs", demoJobs)} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	if n := len(progressLine.FindAllString(stdout, -1)); n < 2 {
		t.Errorf("stdout has %d progress lines, want at least 2", n)
	}
	m := stoppedLine.FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("stdout lacks the final 'workq: stopped.' line:\n%s", stdout)
	}
	done, _ = strconv.Atoi(m[1])
	failed, _ = strconv.Atoi(m[3])
	if done == 0 {
		t.Errorf("the run finished no job: %s", m[0])
	}
	return done, failed
}

// (c) `workq run` on an existing database: progress on stdout, exit 0, jobs
// done in the database.
func testProcRunWithDatabase(t *testing.T, bin string) {
	url := testdb.NewClusterURL(t) // its own cluster, as for TestPgBouncer: keyed messages in a 4 s run
	checkRunDemo(t, bin, url, url, false)
}

// checkRunDemo runs `workq run` with DATABASE_URL=runURL (plus args) and
// checks from url, a direct connection to the same database, that every
// table's demo items were worked and none is left in progress.
//
// throughPooler relaxes one check for a run through PgBouncer: a claim that
// was running when the worker stopped can commit after the stop, because
// PgBouncer drops the cancel request and the worker's ReleaseClaim cannot
// see the claim's server process behind the pooler (docs/reliability.md,
// "Open"). Such items stay in progress until their lease expires and the
// reaper requeues them, as after a crash: the check is then that every item
// left in progress holds a lease that will expire, so nothing is lost.
func checkRunDemo(t *testing.T, bin, url, runURL string, throughPooler bool, args ...string) {
	conn := mustConnect(t, url)
	start := time.Now()
	stdout, stderr, code := runWorkq(t, bin, procEnv(runURL), 60*time.Second, append([]string{"run", "--for", "4s", "--demo-jobs", "50"}, args...)...)
	t.Logf("workq run --for 4s %v took %s", args, time.Since(start).Round(time.Millisecond))
	if code != 0 {
		t.Fatalf("workq run exited %d:\n%s", code, stderr)
	}
	done, failed := checkRunOutput(t, stdout, 50)
	ctx := context.Background()
	// The demo's job runs (the schedule adds runs of its own), and what the
	// worker finished across all four tables.
	var demoRuns, jobsDone, otherFailed int
	if err := conn.QueryRow(ctx, `select count(*) filter (where schedule_id is null), count(*) filter (where status = 2),
		count(*) filter (where status = 3 and kind <> 'demo.fail') from workq.job_runs_all`).Scan(&demoRuns, &jobsDone, &otherFailed); err != nil {
		t.Fatal(err)
	}
	if demoRuns != 50 || jobsDone == 0 {
		t.Errorf("job_runs has %d demo rows, %d done; want 50 rows, some done", demoRuns, jobsDone)
	}
	if otherFailed != 0 {
		t.Errorf("%d jobs other than demo.fail failed", otherFailed)
	}
	var dbDone, dbFailed, inProgress int
	err := conn.QueryRow(ctx, `select sum(done), sum(failed), sum(in_progress) from (
		select count(*) filter (where status = 2) as done, count(*) filter (where status = 3) as failed, count(*) filter (where status = 1) as in_progress from workq.job_runs_all
		union all select count(*) filter (where status = 2), count(*) filter (where status = 3), count(*) filter (where status = 1) from workq.outbox
		union all select count(*) filter (where status = 2), count(*) filter (where status = 3), count(*) filter (where status = 1) from workq.inbox
		union all select count(*) filter (where status = 2), count(*) filter (where status = 3 and cancelled_at is null), count(*) filter (where status = 1) from workq.timers) t`).
		Scan(&dbDone, &dbFailed, &inProgress)
	if err != nil {
		t.Fatal(err)
	}
	if dbDone != done || dbFailed != failed {
		t.Errorf("database has %d done, %d failed over the four tables; the run reported %d and %d", dbDone, dbFailed, done, failed)
	}
	if inProgress != 0 && !throughPooler {
		t.Errorf("%d items left in progress after a clean stop", inProgress)
	}
	if inProgress != 0 && throughPooler {
		var unleased int
		if err := conn.QueryRow(ctx, `select count(*) from (
			select locked_until from workq.job_runs_all where status = 1 union all select locked_until from workq.outbox where status = 1
			union all select locked_until from workq.inbox where status = 1 union all select locked_until from workq.timers where status = 1) t
			where locked_until is null or locked_until > now() + interval '10 minutes'`).Scan(&unleased); err != nil {
			t.Fatal(err)
		}
		if unleased != 0 {
			t.Errorf("%d items left in progress without a lease that expires", unleased)
		}
		t.Logf("%d items left in progress behind PgBouncer after the stop; their leases expire and the reaper requeues them", inProgress)
	}
	for _, q := range []string{
		`select count(*) from workq.outbox where status = 2 and partition_key is not null`,
		`select count(*) from workq.outbox where topic = 'demo.order.shipped'`, // the fan-in join's outcome
		`select count(*) from workq.inbox where status = 2`,
		`select count(*) from workq.timers where status = 2`,
	} {
		var n int
		if err := conn.QueryRow(ctx, q).Scan(&n); err != nil || n == 0 {
			t.Errorf("%s: %d (%v); want the demo's items of each kind worked", q, n, err)
		}
	}
}

// (d) `workq run` without DATABASE_URL starts, uses and removes its own
// PostgreSQL.
func testProcRunEmbedded(t *testing.T, bin string) {
	start := time.Now()
	stdout, stderr, code := runWorkq(t, bin, procEnv(""), 60*time.Second, "run", "--for", "6s", "--demo-jobs", "20")
	t.Logf("workq run --for 6s (throwaway PostgreSQL) took %s", time.Since(start).Round(time.Millisecond))
	if code != 0 {
		t.Fatalf("workq run without DATABASE_URL exited %d:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "throwaway PostgreSQL ready") {
		t.Errorf("stderr lacks the throwaway PostgreSQL start:\n%s", stderr)
	}
	checkRunOutput(t, stdout, 20)
	// The server is gone once the command has exited.
	m := regexp.MustCompile(`url="?(postgres://[^"\s]+)`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("stderr does not name the throwaway server's URL:\n%s", stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if c, err := pgx.Connect(ctx, m[1]); err == nil {
		c.Close(ctx)
		t.Errorf("the throwaway PostgreSQL at %s still answers after workq exited", m[1])
	} else if !errors.Is(err, syscall.ECONNREFUSED) && !strings.Contains(err.Error(), "refused") {
		t.Logf("connecting to the stopped server: %v", err)
	}
}

// (e) `workq enqueue --payload -` reads the real standard input and
// `--payload @FILE` a file; a rejected payload exits 1 with one line on
// stderr and writes nothing.
func testProcEnqueuePayload(t *testing.T, bin string) {
	url := testdb.URL(t)
	conn := mustConnect(t, url)
	env := procEnv(url)
	file := filepath.Join(t.TempDir(), "args.json")
	if err := os.WriteFile(file, []byte(`{"from":"file"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	stored := func(id int64) string {
		t.Helper()
		var from string
		if err := conn.QueryRow(context.Background(), "select payload->>'from' from workq.job_runs_all where id = $1", id).Scan(&from); err != nil {
			t.Fatal(err)
		}
		return from
	}
	p := startProcInput(t, "workq enqueue", bin, env, `{"from":"stdin"}`, "enqueue", "--kind", "k", "--payload", "-", "--json")
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("enqueue --payload - exited %d: %s", code, p.stderr.String())
	}
	var res struct{ ID int64 }
	if err := json.Unmarshal([]byte(p.stdout.String()), &res); err != nil || stored(res.ID) != "stdin" {
		t.Errorf("enqueue --payload - printed %q (%v); want the id of a job with the payload from stdin", p.stdout.String(), err)
	}
	if id := enqueueCLI(t, bin, env, "--kind", "k", "--payload", "@"+file); stored(id) != "file" {
		t.Errorf("enqueue --payload @FILE: job %d does not hold the file's payload", id)
	}

	var before int
	if err := conn.QueryRow(context.Background(), "select count(*) from workq.job_runs_all").Scan(&before); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{stdin: `[1]`, args: []string{"--payload", "-"}, want: "workq enqueue: --payload -: invalid request: payload must be a JSON object ({...}), got an array\n"},
		{stdin: `{"a":"` + strings.Repeat("x", 100) + `"}`, args: []string{"--payload", "-", "--max-payload", "64"},
			want: "workq enqueue: --payload -: invalid request: payload is 108 bytes, more than the limit of 64 bytes (the limit is --max-payload or WORKQ_MAX_PAYLOAD)\n"},
		{args: []string{"--payload", "@" + file + ".missing"}, want: "workq enqueue: --payload @" + file + ".missing: open " + file + ".missing: no such file or directory\n"},
	} {
		p := startProcInput(t, "workq enqueue", bin, env, tc.stdin, append([]string{"enqueue", "--kind", "k"}, tc.args...)...)
		if code := p.wait(t, 30*time.Second); code != 1 || p.stderr.String() != tc.want || p.stdout.String() != "" {
			t.Errorf("enqueue %q: exit %d, stdout %q, stderr %q; want exit 1 and stderr %q", tc.args, code, p.stdout.String(), p.stderr.String(), tc.want)
		}
	}
	var after int
	if err := conn.QueryRow(context.Background(), "select count(*) from workq.job_runs_all").Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("rejected enqueues changed job_runs from %d to %d rows", before, after)
	}
}
