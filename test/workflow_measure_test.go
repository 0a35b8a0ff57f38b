//go:build measure

package test

// The workflow measurements of issue 31 (docs/throughput.md, "Workflows"):
// not part of make test (build tag measure). Each runs an in-process
// Client at its default settings (only its workers given) with no-op
// handlers, on a fresh database of the package's own PostgreSQL, and
// prints its numbers:
//
//	go test -tags=measure -count=1 -timeout 30m -v -run 'TestWorkflowMeasure/fanin' ./test/
//	go test -tags=measure -count=1 -timeout 30m -v -run 'TestWorkflowMeasure/chain' ./test/
//	go test -tags=measure -count=1 -timeout 30m -v -run 'TestWorkflowMeasure/profile' ./test/
//
// (make measure-workflows runs the three; profile on a throwaway server of
// its own, with pg_stat_statements). WORKQ_MEASURE_RUNS sets the number
// of runs of each (3). A run fails when a job does not end done; the
// ratios against their targets are reported, not asserted (they depend
// on the machine).

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	wqdb "github.com/workq/workq/internal/db"
	"github.com/workq/workq/internal/pgembed"
	"github.com/workq/workq/internal/testdb"
)

type wfmTask struct{}

func (wfmTask) Kind() string { return "wfm.task" }

func TestWorkflowMeasure(t *testing.T) {
	runs := 3
	if s := os.Getenv("WORKQ_MEASURE_RUNS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("WORKQ_MEASURE_RUNS=%q: want a positive number", s)
		}
		runs = n
	}
	t.Logf("load average at the start: %s", loadAvg(t))
	t.Run("fanin", func(t *testing.T) { measureFanIn(t, runs) })
	t.Run("chain", func(t *testing.T) { measureChain(t, runs) })
	t.Run("profile", func(t *testing.T) { measureFanInProfile(t) })
	t.Logf("load average at the end: %s", loadAvg(t))
}

func loadAvg(t *testing.T) string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		t.Fatalf("read the load average: %v", err)
	}
	return string(b[:len(b)-1])
}

// wfmClient starts a Client at its default settings with a no-op worker
// for wfm.task, on a fresh database; it stops when the test ends.
func wfmClient(t *testing.T, url string) (*workq.Client, *pgxpool.Pool) {
	t.Helper()
	db := openTestPool(t, url)
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[wfmTask]) error { return nil }))
	c, err := workq.NewClient(db, workq.Config{Workers: workers})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return c, db
}

func dbNow(t *testing.T, db *pgxpool.Pool) time.Time {
	return queryScalar[time.Time](t, db, `select clock_timestamp()`)
}

// awaitJobsDone waits until n jobs are done and returns the latest
// finished_at (the database's clock).
func awaitJobsDone(t *testing.T, db *pgxpool.Pool, n int) time.Time {
	t.Helper()
	awaitCond(t, 10*time.Minute, fmt.Sprintf("%d jobs done", n), func() (bool, string) {
		d := queryScalar[int](t, db, `select count(*)::int from workq.job_runs_all where status = 2`)
		f := queryScalar[int](t, db, `select count(*)::int from workq.job_runs_all where status in (3, 4)`)
		if f > 0 {
			t.Fatalf("%d jobs failed or cancelled", f)
		}
		return d == n, fmt.Sprintf("%d done", d)
	})
	return queryScalar[time.Time](t, db, `select max(finished_at) from workq.job_runs_all`)
}

// (a) Fan-out/fan-in: a workflow of 10,000 independent tasks and one final
// task depending on all of them, against 10,000 independent jobs plus one
// (one EnqueueMany), each timed on the database's clock from just before
// the enqueue to the last job's end (the final task's, which ends last by
// construction). Runs alternate, each on a fresh database.
func measureFanIn(t *testing.T, runs int) {
	const n = 10000
	var wfs, leaves, jobs []time.Duration
	for r := range runs {
		t.Run(fmt.Sprintf("workflow-%d", r), func(t *testing.T) {
			c, db := wfmClient(t, testdb.URL(t))
			wfs = append(wfs, fanInWorkflow(t, c, db, n))
		})
		t.Run(fmt.Sprintf("workflow-nofinal-%d", r), func(t *testing.T) {
			c, db := wfmClient(t, testdb.URL(t))
			leaves = append(leaves, fanInWorkflowLeaves(t, c, db, n))
		})
		t.Run(fmt.Sprintf("jobs-%d", r), func(t *testing.T) {
			c, db := wfmClient(t, testdb.URL(t))
			jobs = append(jobs, fanInJobs(t, c, db, n))
		})
	}
	if len(wfs) != runs || len(leaves) != runs || len(jobs) != runs {
		t.Fatalf("%d workflow runs, %d without the final task and %d job runs finished, want %d each", len(wfs), len(leaves), len(jobs), runs)
	}
	mw, ml, mj := durQuantile(wfs, 0.5), durQuantile(leaves, 0.5), durQuantile(jobs, 0.5)
	t.Logf("the workflow without its final task (no edges): median %s (runs %v), ratio %.2fx to the jobs",
		ml.Round(time.Millisecond), roundAll(leaves), float64(ml)/float64(mj))
	t.Logf("fan-in: workflow median %s (runs %v), independent jobs median %s (runs %v): ratio %.2fx (target <= 1.2x)",
		mw.Round(time.Millisecond), roundAll(wfs), mj.Round(time.Millisecond), roundAll(jobs), float64(mw)/float64(mj))
}

// (b) Chain: a workflow t0 -> t1 -> ... -> t999; from each task's end
// (runs.finished_at) to its dependent's start (runs.started_at), against
// the pickup latency of a single job enqueued on an idle queue
// (created_at -> started_at), 200 of them one after the other, the next
// 50-150 ms after the previous ended, same Client.
func measureChain(t *testing.T, runs int) {
	const n, singles = 1000, 200
	ctx := context.Background()
	var handoffs, pickups []time.Duration
	for r := range runs {
		t.Run(fmt.Sprintf("chain-%d", r), func(t *testing.T) {
			c, db := wfmClient(t, testdb.URL(t))
			wf := c.NewWorkflow("chain", nil)
			wf.Add("t0", wfmTask{}, nil)
			for i := 1; i < n; i++ {
				wf.Add(fmt.Sprint("t", i), wfmTask{}, &workq.TaskOpts{DependsOn: []string{fmt.Sprint("t", i-1)}})
			}
			start := dbNow(t, db)
			if _, err := wf.Enqueue(ctx); err != nil {
				t.Fatal(err)
			}
			end := awaitJobsDone(t, db, n)
			var ds []time.Duration
			collectRows(t, db, `select extract(epoch from (b.started_at - a.finished_at))::float8
					from workq.workflow_deps d
					join workq.runs_all a on a.item_id = d.dep_id and a.work_table = 'job_runs' and a.outcome = 'done'
					join workq.runs_all b on b.item_id = d.task_id and b.work_table = 'job_runs' and b.attempt = 1`,
				func(r struct{ S float64 }) { ds = append(ds, time.Duration(r.S*float64(time.Second))) })
			if len(ds) != n-1 {
				t.Fatalf("%d hand-offs, want %d", len(ds), n-1)
			}
			handoffs = append(handoffs, ds...)
			t.Logf("chain of %d: %s in all; hand-off p50 %s p99 %s max %s", n, end.Sub(start).Round(time.Millisecond),
				durQuantile(ds, 0.5), durQuantile(ds, 0.99), durQuantile(ds, 1))

			// The same Client, its queue idle: one job at a time.
			for i := range singles {
				time.Sleep(time.Duration(50+i%101) * time.Millisecond)
				if _, err := c.Enqueue(ctx, wfmTask{}, nil); err != nil {
					t.Fatal(err)
				}
				awaitJobsDone(t, db, n+i+1)
			}
			var ps []time.Duration
			collectRows(t, db, `select extract(epoch from (r.started_at - j.created_at))::float8
					from workq.job_runs_all j join workq.runs_all r on r.item_id = j.id and r.work_table = 'job_runs' and r.attempt = 1
					where j.workflow_id is null`,
				func(r struct{ S float64 }) { ps = append(ps, time.Duration(r.S*float64(time.Second))) })
			if len(ps) != singles {
				t.Fatalf("%d single jobs' pickups, want %d", len(ps), singles)
			}
			pickups = append(pickups, ps...)
			t.Logf("single job on an idle queue: pickup p50 %s p99 %s max %s", durQuantile(ps, 0.5), durQuantile(ps, 0.99), durQuantile(ps, 1))
		})
	}
	hp50, hp99 := durQuantile(handoffs, 0.5), durQuantile(handoffs, 0.99)
	pp50, pp99 := durQuantile(pickups, 0.5), durQuantile(pickups, 0.99)
	t.Logf("chain hand-off p50 %s p99 %s (%d); idle pickup p50 %s p99 %s (%d): ratio p50 %.2fx, p99 %.2fx (target <= 2x)",
		hp50, hp99, len(handoffs), pp50, pp99, len(pickups), float64(hp50)/float64(pp50), float64(hp99)/float64(pp99))
}

// fanInWorkflow runs a workflow of n tasks and a final one that depends on
// them all and returns the time from just before the enqueue to the final
// task's end.
func fanInWorkflow(t *testing.T, c *workq.Client, db *pgxpool.Pool, n int) time.Duration {
	t.Helper()
	wf := c.NewWorkflow("fanin", nil)
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprint("t", i)
		wf.Add(names[i], wfmTask{}, nil)
	}
	wf.Add("final", wfmTask{}, &workq.TaskOpts{DependsOn: names})
	start := dbNow(t, db)
	res, err := wf.Enqueue(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	enq := dbNow(t, db).Sub(start)
	last := awaitJobsDone(t, db, n+1)
	final := queryScalar[time.Time](t, db, `select finished_at from workq.job_runs_all where id = $1`, res.Tasks["final"])
	if !final.Equal(last) {
		t.Errorf("the final task ended at %s, before the last job (%s)", final, last)
	}
	d := final.Sub(start)
	t.Logf("workflow of %d + 1 tasks: %s from the enqueue to the final task's end (enqueue %s)", n, d.Round(time.Millisecond), enq.Round(time.Millisecond))
	return d
}

// fanInJobs runs n + 1 independent jobs (one EnqueueMany) and returns the
// time from just before the enqueue to the last one's end.
func fanInJobs(t *testing.T, c *workq.Client, db *pgxpool.Pool, n int) time.Duration {
	t.Helper()
	ps := make([]workq.EnqueueParams, n+1)
	for i := range ps {
		ps[i] = workq.EnqueueParams{Args: wfmTask{}}
	}
	start := dbNow(t, db)
	if _, err := c.EnqueueMany(context.Background(), ps); err != nil {
		t.Fatal(err)
	}
	enq := dbNow(t, db).Sub(start)
	d := awaitJobsDone(t, db, n+1).Sub(start)
	t.Logf("%d + 1 independent jobs: %s from the enqueue to the last one's end (enqueue %s)", n, d.Round(time.Millisecond), enq.Round(time.Millisecond))
	return d
}

// (c) Where the fan-in's time goes: both runs of (a) on a throwaway
// server with pg_stat_statements (track = all, so the trigger's own
// statements are counted), each on a database of its own; the statements
// that took the most time in each.
func measureFanInProfile(t *testing.T) {
	const n = 10000
	ctx := context.Background()
	srv, _ := ownServer(t, pgembed.Options{Settings: map[string]string{"autovacuum": "off", "wal_level": "minimal", "max_wal_senders": "0",
		"shared_preload_libraries": "pg_stat_statements", "pg_stat_statements.track": "all", "pg_stat_statements.max": "10000"}})
	admin := openTestPool(t, srv.URL("postgres"))
	if _, err := admin.Exec(ctx, `create extension pg_stat_statements`); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"workflow", "jobs"} {
		t.Run(kind, func(t *testing.T) {
			name := "prof_" + kind
			if _, err := admin.Exec(ctx, "create database "+name); err != nil {
				t.Fatal(err)
			}
			url := srv.URL(name)
			if _, err := wqdb.MigrateUp(ctx, url); err != nil {
				t.Fatalf("migrate: %v", err)
			}
			c, db := wfmClient(t, url)
			if _, err := admin.Exec(ctx, `select pg_stat_statements_reset()`); err != nil {
				t.Fatal(err)
			}
			if kind == "workflow" {
				fanInWorkflow(t, c, db, n)
			} else {
				fanInJobs(t, c, db, n)
			}
			var b strings.Builder
			collectRows(t, admin, fmt.Sprintf(`select round(s.total_exec_time)::bigint, s.calls, s.rows, s.toplevel,
					regexp_replace(left(s.query, 160), '\s+', ' ', 'g')
				from pg_stat_statements s join pg_database d on d.oid = s.dbid
				where d.datname = '%s' order by s.total_exec_time desc limit 15`, name),
				func(r struct {
					Ms       int64
					Calls    int64
					Rows     int64
					Toplevel bool
					Query    string
				}) {
					fmt.Fprintf(&b, "\n  %6d ms %7d calls %7d rows top=%-5t %s", r.Ms, r.Calls, r.Rows, r.Toplevel, r.Query)
				})
			t.Logf("%s fan-in: the statements that took the most time (total ms, calls, rows, top level):%s", kind, b.String())
		})
	}
}

// fanInWorkflowLeaves runs a workflow of n tasks without dependencies
// (the fan-in's leaves alone: the workflow's counts, no edges) and returns
// the time from just before the enqueue to the last task's end.
func fanInWorkflowLeaves(t *testing.T, c *workq.Client, db *pgxpool.Pool, n int) time.Duration {
	t.Helper()
	wf := c.NewWorkflow("leaves", nil)
	for i := range n + 1 {
		wf.Add(fmt.Sprint("t", i), wfmTask{}, nil)
	}
	start := dbNow(t, db)
	if _, err := wf.Enqueue(context.Background()); err != nil {
		t.Fatal(err)
	}
	d := awaitJobsDone(t, db, n+1).Sub(start)
	t.Logf("workflow of %d + 1 tasks without edges: %s from the enqueue to the last task's end", n, d.Round(time.Millisecond))
	return d
}
