package test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
)

// wfSpec is one random workflow of the scenario: task i depends on some of
// the tasks before it (so the graph is acyclic), each edge cancelling or
// any-outcome, and fails for good when fail[i].
type wfSpec struct {
	n    int
	deps [][]wfEdge // deps[i]: task i's dependencies
	fail []bool
}

type wfEdge struct {
	dep int
	any bool
}

// randomWorkflow draws a workflow of 1 to maxTasks tasks: each task after
// the first depends, two times in three, on one to four earlier tasks (one
// edge in five any-outcome); one task in twenty-five fails for good.
func randomWorkflow(rng *rand.Rand, maxTasks int) wfSpec {
	s := wfSpec{n: 1 + rng.IntN(maxTasks)}
	s.deps = make([][]wfEdge, s.n)
	s.fail = make([]bool, s.n)
	for i := range s.n {
		s.fail[i] = rng.IntN(25) == 0
		if i == 0 || rng.IntN(3) == 0 {
			continue
		}
		seen := map[int]bool{}
		for range 1 + rng.IntN(4) {
			d := rng.IntN(i)
			if seen[d] {
				continue
			}
			seen[d] = true
			s.deps[i] = append(s.deps[i], wfEdge{dep: d, any: rng.IntN(5) == 0})
		}
	}
	return s
}

// expected is each task's final status under the rules of workflows: a
// task with a dependency that failed or was cancelled on a cancelling edge
// is cancelled (4) and never runs; any other runs and ends done (2), or
// failed (3) when it fails for good.
func (s wfSpec) expected() []int16 {
	st := make([]int16, s.n)
	for i := range s.n {
		st[i] = 2
		if s.fail[i] {
			st[i] = 3
		}
		for _, e := range s.deps[i] {
			if !e.any && st[e.dep] != 2 {
				st[i] = 4
			}
		}
	}
	return st
}

// Scenario 5d: workflows under kills. Four `workq worker` processes run
// 200 random workflows (up to 50 tasks each, webhook tasks whose handlers
// take 5-40 ms at the receiver, some failing for good, some edges
// any-outcome), half enqueued before the workers start and half while
// they run, while the test kill -9s a process holding leases, six times
// (at least three before the work runs out), and starts it again. The history checker reads its usual invariants
// (leases, attempts, handler runs, one terminal end each) and, from the
// database, the run archive and the log of each task's moves out of
// pending: every attempt of a task started after each of its dependencies
// had ended; each task was released at most once, and only by the end of
// the last of its dependencies; a task that depends on a failed or
// cancelled task on a cancelling edge never ran and ended cancelled, an
// any-outcome dependent ran; every task ended as the model of the graph
// says; every workflow ended within the bound, with counts and a state
// that agree with its tasks. The seed is logged (WORKQ_FAULTS_SEED
// replays one).
func testFaultWorkflows(t *testing.T, bin string) {
	const queue, lease, nWorkflows, maxTasks = "wf", 3 * time.Second, 200, 50
	ctx := context.Background()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("WORKQ_FAULTS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("WORKQ_FAULTS_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (WORKQ_FAULTS_SEED=%d replays these workflows)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 31))
	specs := make([]wfSpec, nWorkflows)
	nTasks := 0
	for i := range specs {
		specs[i] = randomWorkflow(rng, maxTasks)
		nTasks += specs[i].n
	}

	url := testdb.URL(t)
	db := openTestPool(t, url)
	installHistory(t, db)
	var delays sync.Mutex
	drng := rand.New(rand.NewPCG(seed, 32))
	rc := startReceiver(t, func(d delivery) reaction {
		delays.Lock()
		r := reaction{Delay: time.Duration(5+drng.IntN(35)) * time.Millisecond}
		delays.Unlock()
		if fail, _ := d.Body["fail"].(bool); fail {
			r.Status = 400 // the webhook kind fails for good on a 4xx
		}
		return r
	})
	off := measureClockOffset(t, db)
	c, err := workq.NewClient(db, workq.Config{})
	if err != nil {
		t.Fatal(err)
	}
	refs := make([]workq.WorkflowRef, nWorkflows)
	ids := make([][]int64, nWorkflows) // task job ids by index
	enqueue := func(from, to int) error {
		for w := from; w < to; w++ {
			s := specs[w]
			wf := c.NewWorkflow(fmt.Sprintf("wf-%d", w), nil)
			for i := range s.n {
				o := &workq.TaskOpts{Enqueue: &workq.EnqueueOpts{Queue: queue, MaxAttempts: 10}}
				for _, e := range s.deps[i] {
					if e.any {
						o.DependsOnAnyOutcome = append(o.DependsOnAnyOutcome, fmt.Sprint("t", e.dep))
					} else {
						o.DependsOn = append(o.DependsOn, fmt.Sprint("t", e.dep))
					}
				}
				args := workq.RawArgs{KindName: "webhook", Payload: map[string]any{"url": rc.jobsURL(),
					"body": map[string]any{"scenario": "workflows", "wf": w, "task": i, "fail": s.fail[i]}}}
				wf.Add(fmt.Sprint("t", i), args, o)
			}
			r, err := wf.Enqueue(ctx)
			if err != nil {
				return fmt.Errorf("enqueue workflow %d: %w", w, err)
			}
			refs[w] = r.Workflow
			ids[w] = make([]int64, s.n)
			for i := range s.n {
				ids[w][i] = r.Tasks[fmt.Sprint("t", i)]
			}
		}
		return nil
	}
	if err := enqueue(0, nWorkflows/2); err != nil {
		t.Fatal(err)
	}

	f := newFleet(t, bin)
	slots := []string{"w1", "w2", "w3", "w4"}
	args := append([]string{"worker", "--jobs", "--queues", queue, "--lease", lease.String(), "--concurrency", "8",
		"--poll", "100ms", "--log-format", "json", "--log-level", "warn"}, rc.workerArgs("unused")...)
	for _, slot := range slots {
		f.start(slot, procEnv(url), args...)
	}
	started := time.Now()
	enqueued := make(chan error, 1)
	go func() { enqueued <- enqueue(nWorkflows/2, nWorkflows) }()

	running := func() int {
		return queryScalar[int](t, db, `select count(*)::int from workq.workflows where status = 0`)
	}
	var enqueueErr error
	enqueueing := true
	allEnded := func() bool {
		if enqueueing {
			select {
			case enqueueErr = <-enqueued:
				enqueueing = false
			default:
				return false
			}
		}
		return running() == 0
	}
	kills := 0
	for range 6 {
		var victim string
		awaitCond(t, 30*time.Second, "a worker holding leases", func() (bool, string) {
			victim = anyHolder(holders(t, db, queue, []string{f.id("w1"), f.id("w2"), f.id("w3"), f.id("w4")}))
			return victim != "" || allEnded(), "none"
		})
		if victim == "" {
			break
		}
		slot, _, _ := strings.Cut(victim, "-")
		kills++
		f.kill(slot)
		time.Sleep(100 * time.Millisecond)
		f.restart(slot)
		time.Sleep(time.Duration(300+rand.IntN(500)) * time.Millisecond)
	}
	if enqueueing {
		enqueueErr = <-enqueued
	}
	if enqueueErr != nil {
		t.Fatal(enqueueErr)
	}
	// Bound: the work takes a few seconds; a kill costs at most a lease
	// and a retry's backoff. A hung workflow waits forever.
	awaitCond(t, 90*time.Second, "every workflow ended", func() (bool, string) {
		n := running()
		return n == 0 && queryScalar[int](t, db, `select count(*)::int from workq.workflows`) == nWorkflows,
			fmt.Sprintf("%d of %d workflows running", n, nWorkflows)
	})
	took := time.Since(started)
	f.stopAll()

	h := loadHistory(t, db, rc, off)
	h.check(t, historyOpts{})
	checkWorkflows(t, db, h, specs, refs, ids)
	t.Logf("%d workflows of %d tasks in all ended in %s with %d kill -9s; %s",
		nWorkflows, nTasks, took.Round(100*time.Millisecond), kills, h.summary())
	if kills < 3 {
		t.Errorf("%d kill -9s: the faults did not happen while the workflows ran", kills)
	}
}

// checkWorkflows checks the scenario's workflows from the database, the
// run archive and the history's pending moves (see testFaultWorkflows).
func checkWorkflows(t *testing.T, db *pgxpool.Pool, h *history, specs []wfSpec, refs []workq.WorkflowRef, ids [][]int64) {
	t.Helper()
	type task struct {
		status            int16
		attempts          int32
		finished          *time.Time
		lastError         *string
		workflow          int64
		runs              []time.Time // started_at of every attempt
		lastEnd           *time.Time  // the latest finished_at of its attempts
		depsLeft, depsBad int32
	}
	tasks := map[int64]*task{}
	collectRows(t, db, `select j.id, j.status, j.attempts, j.finished_at, j.last_error, j.workflow_id, k.deps_left, k.deps_failed
			from workq.job_runs_all j join workq.workflow_tasks k on k.job_id = j.id`,
		func(r struct {
			ID        int64
			Status    int16
			Attempts  int32
			Finished  *time.Time
			LastError *string
			Workflow  int64
			DepsLeft  int32
			DepsBad   int32
		}) {
			tasks[r.ID] = &task{status: r.Status, attempts: r.Attempts, finished: r.Finished, lastError: r.LastError,
				workflow: r.Workflow, depsLeft: r.DepsLeft, depsBad: r.DepsBad}
		})
	collectRows(t, db, `select item_id, started_at, finished_at from workq.runs_all where work_table = 'job_runs' order by started_at`,
		func(r struct {
			ID       int64
			Started  time.Time
			Finished time.Time
		}) {
			k := tasks[r.ID]
			if k == nil {
				t.Errorf("run of job %d, which is no workflow task", r.ID)
				return
			}
			k.runs = append(k.runs, r.Started)
			if k.lastEnd == nil || r.Finished.After(*k.lastEnd) {
				end := r.Finished
				k.lastEnd = &end
			}
		})
	// The edges as written, against the specs.
	edges := map[[2]int64]bool{} // (dep, task) -> any outcome
	collectRows(t, db, `select dep_id, task_id, any_outcome from workq.workflow_deps`, func(r struct {
		Dep, Task int64
		Any       bool
	}) {
		edges[[2]int64{r.Dep, r.Task}] = r.Any
	})
	// endOf is when a task ended for good: its row's finished_at, or its
	// last attempt's end if later.
	endOf := func(k *task) *time.Time {
		e := k.finished
		if k.lastEnd != nil && (e == nil || k.lastEnd.After(*e)) {
			e = k.lastEnd
		}
		return e
	}
	var bad []string
	fail := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	nEdges := 0
	for w, s := range specs {
		want := s.expected()
		var counts [5]int
		for i := range s.n {
			id := ids[w][i]
			k := tasks[id]
			if k == nil {
				fail("workflow %d task t%d (job %d): not in workflow_tasks", refs[w].ID, i, id)
				continue
			}
			counts[min(max(k.status, 0), 4)]++
			if k.workflow != refs[w].ID {
				fail("job %d: workflow %d, want %d", id, k.workflow, refs[w].ID)
			}
			if k.status != want[i] {
				fail("workflow %d task t%d (job %d): status %d, want %d (fails %t, deps %v, last error %s)",
					refs[w].ID, i, id, k.status, want[i], s.fail[i], s.deps[i], str(k.lastError))
			}
			// Its moves out of pending, from the history's log.
			var releases, cancels []histEvent
			if it := h.Items[itemKey{"job_runs", id}]; it != nil {
				for _, e := range it.Pending {
					if e.Event == "release" {
						releases = append(releases, e)
					} else {
						cancels = append(cancels, e)
					}
				}
			}
			if len(releases) > 1 {
				fail("job %d released %d times", id, len(releases))
			}
			if len(s.deps[i]) == 0 && len(releases)+len(cancels) > 0 {
				fail("job %d has no dependency but left pending %d times", id, len(releases)+len(cancels))
			}
			ran := len(k.runs) > 0
			if want[i] == 4 {
				if ran || k.attempts != 0 || len(releases) != 0 || len(cancels) != 1 {
					fail("job %d cancelled by a dependency: %d runs, %d attempts, %d releases, %d cancels (want 0, 0, 0, 1)",
						id, len(k.runs), k.attempts, len(releases), len(cancels))
				}
				if k.lastError == nil || !strings.HasPrefix(*k.lastError, "dependency ") {
					fail("job %d cancelled by a dependency with last error %s", id, str(k.lastError))
				}
			} else {
				if !ran {
					fail("job %d ended %d without a run", id, k.status)
				}
				if len(s.deps[i]) > 0 && (len(releases) != 1 || len(cancels) != 0) {
					fail("job %d ran after %d releases and %d cancels, want 1 and 0", id, len(releases), len(cancels))
				}
			}
			if k.depsLeft != 0 {
				fail("job %d: deps_left %d at the end", id, k.depsLeft)
			}
			var lastEv *histEvent // the latest end of its dependencies
			var cancelledBy int64 // the dependency whose end cancelled it
			for _, e := range s.deps[i] {
				nEdges++
				dep := ids[w][e.dep]
				if a, ok := edges[[2]int64{dep, id}]; !ok || a != e.any {
					fail("edge t%d -> t%d of workflow %d (jobs %d -> %d): written %t (any %t), want any %t",
						e.dep, i, refs[w].ID, dep, id, ok, a, e.any)
				}
				dk := tasks[dep]
				if dk == nil {
					continue
				}
				end := endOf(dk)
				if end == nil {
					fail("job %d's dependency %d has not ended (status %d)", id, dep, dk.status)
					continue
				}
				// Every attempt started after the dependency ended.
				for n, st := range k.runs {
					if st.Before(*end) {
						fail("job %d attempt %d started at %s, before its dependency %d ended at %s",
							id, n+1, ts(st), dep, ts(*end))
					}
				}
				// Released and cancelled only after the dependency's end
				// was logged (clock_timestamp() in both triggers: now()
				// is its transaction's start, and a completion that waited
				// for the workflow's lock may release with an earlier
				// now() than the end it waited for), or by the very
				// statement that ended it: a completion releases its
				// dependents inside the statement (workq_workflows_ended),
				// and the history trigger logs its own rows' ends at the
				// statement's end, after.
				te, ok := terminalEvent(h, dep)
				if !ok {
					fail("job %d's dependency %d ended %d with no end on record", id, dep, dk.status)
					continue
				}
				for _, r := range releases {
					if r.At.Before(te.At) && !r.StmtAt.Equal(te.StmtAt) {
						fail("job %d released at %s, before its dependency %d's end was logged at %s", id, ts(r.At), dep, ts(te.At))
					}
				}
				// A cancel needs one dependency that ended badly on a
				// cancelling edge, in the same statement (the others may
				// still run).
				if !e.any && dk.status != 2 && len(cancels) == 1 && te.StmtAt.Equal(cancels[0].StmtAt) {
					cancelledBy = dep
				}
				if lastEv == nil || te.At.After(lastEv.At) {
					lastEv = &te
				}
			}
			if len(cancels) == 1 && cancelledBy == 0 {
				fail("job %d cancelled at %s (a statement of %s) by none of its dependencies' bad ends", id, ts(cancels[0].At), ts(cancels[0].StmtAt))
			}
			// Released by the statement that ended its last dependency.
			if lastEv != nil && len(releases) == 1 && !releases[0].StmtAt.Equal(lastEv.StmtAt) {
				fail("job %d released by a statement of %s, not by its last dependency's end (a statement of %s)",
					id, ts(releases[0].StmtAt), ts(lastEv.StmtAt))
			}
			// Claimed only after its release.
			if it := h.Items[itemKey{"job_runs", id}]; it != nil && len(releases) == 1 {
				for _, l := range it.Leases {
					if l.Claim.Before(releases[0].At) {
						fail("job %d claimed at %s, before its release at %s", id, ts(l.Claim), ts(releases[0].At))
					}
				}
			}
		}
		var wf struct {
			Status                         int16
			Tasks, Done, Failed, Cancelled int32
			Finished                       *time.Time
		}
		if err := db.QueryRow(context.Background(), `select status, tasks, done, failed, cancelled, finished_at from workq.workflows where id = $1`,
			refs[w].ID).Scan(&wf.Status, &wf.Tasks, &wf.Done, &wf.Failed, &wf.Cancelled, &wf.Finished); err != nil {
			t.Fatalf("workflow %d: %v", refs[w].ID, err)
		}
		wantStatus := int16(2)
		if counts[3]+counts[4] > 0 {
			wantStatus = 3
		}
		if int(wf.Tasks) != s.n || int(wf.Done) != counts[2] || int(wf.Failed) != counts[3] || int(wf.Cancelled) != counts[4] ||
			wf.Status != wantStatus || wf.Finished == nil {
			fail("workflow %d: status %d, tasks %d, done %d, failed %d, cancelled %d, finished %s; its tasks say status %d, %d, %d, %d, %d",
				refs[w].ID, wf.Status, wf.Tasks, wf.Done, wf.Failed, wf.Cancelled, tsp(wf.Finished), wantStatus, s.n, counts[2], counts[3], counts[4])
		}
	}
	if len(edges) != nEdges {
		fail("%d edges written, the specs have %d", len(edges), nEdges)
	}
	if len(bad) > 0 {
		if len(bad) > 40 {
			bad = append(bad[:40], fmt.Sprintf("... and %d more", len(bad)-40))
		}
		t.Errorf("workflow check: %d violations\n- %s", len(bad), strings.Join(bad, "\n- "))
	}
	var states [5]int
	for _, k := range tasks {
		states[min(max(k.status, 0), 4)]++
	}
	t.Logf("tasks: %d done, %d failed, %d cancelled; %d edges", states[2], states[3], states[4], nEdges)
}

// terminalEvent is the logged end of a job's final state: the end of its
// lease that ended it, or its cancel by a dependency.
func terminalEvent(h *history, id int64) (histEvent, bool) {
	it := h.Items[itemKey{"job_runs", id}]
	if it == nil {
		return histEvent{}, false
	}
	for _, e := range it.Pending {
		if e.Event == "depcancel" {
			return e, true
		}
	}
	for _, l := range it.Leases {
		if l.End != nil && l.Status >= 2 {
			return histEvent{Event: "end", At: *l.End, StmtAt: l.EndStmt}, true
		}
	}
	return histEvent{}, false
}
