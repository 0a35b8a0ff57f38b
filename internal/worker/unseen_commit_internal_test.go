package worker

// Regression tests of issue 7's defects 3 and 4: a statement that committed
// while its answer never reached the worker (a timeout or a connection lost
// at the wrong moment). The database is real; the fault is injected where
// the worker calls it, by running the real statement and then reporting an
// error, which is exactly what the worker sees in that case.

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workq/workq/internal/jobq"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
)

var errAnswerLost = errors.New("read tcp: connection reset by peer (injected: the statement committed, its answer was lost)")

func faultConfig(t *testing.T, id string) Config {
	cfg := Config{ID: id}
	cfg.Concurrency, cfg.Batch = 10, 10
	cfg.Poll = 50 * time.Millisecond
	cfg.RunsDir = t.TempDir()
	return cfg
}

// runFaulty runs w until the test ends and returns a channel of its results.
func runFaulty(t *testing.T, w *Worker) <-chan Result {
	results := make(chan Result, 16)
	w.onResult = func(r Result) { results <- r }
	if err := w.Register("ok", func(context.Context, *Job) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), w.cfg.DrainTimeout+StopBound+time.Second)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return results
}

func enqueueOK(t *testing.T, db gen.DBTX) int64 {
	t.Helper()
	res, err := jobq.New(jobq.Options{}).Enqueue(context.Background(), db, jobq.Job{Kind: "ok"})
	if err != nil {
		t.Fatal(err)
	}
	return res.ID
}

// runOutcomes lists the outcomes of a job run's attempts in claim order,
// the last one from its done row when it moved (lease.Attempts).
func runOutcomes(t *testing.T, db gen.DBTX, id int64) []string {
	t.Helper()
	atts, err := lease.Attempts(context.Background(), db, lease.JobRuns, id)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range atts {
		out = append(out, a.Outcome)
	}
	return out
}

// Defect 3: the completion committed, the worker did not see it and retried;
// the retry finds the tokens gone. The run archive says the first try
// applied, so the result, the stats and meta.json report the job done, not
// its lease lost.
func TestRetriedFlushAfterAnUnseenCommitReportsTheTruth(t *testing.T) {
	pool := testdb.Pool(t)
	w, err := New(pool, faultConfig(t, "unseen-flush"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	w.completeFn = func(e *lease.Engine, ctx context.Context, cs []lease.Completion) (lease.Applied, error) {
		a, err := e.Complete(ctx, cs)
		if calls.Add(1) == 1 && err == nil {
			return lease.Applied{}, errAnswerLost
		}
		return a, err
	}
	results := runFaulty(t, w)
	id := enqueueOK(t, pool)
	var r Result
	select {
	case r = <-results:
	case <-time.After(10 * time.Second):
		t.Fatal("no result within 10s")
	}
	if r.Item.ID != id || !r.Applied || r.Status != lease.StatusDone {
		t.Errorf("result %+v; want job %d applied, done", r, id)
	}
	if st := w.Stats(); st.Done != 1 || st.LeaseLost != 0 || st.FlushErrors != 1 {
		t.Errorf("stats %+v; want done 1, lease_lost 0, flush_errors 1", st)
	}
	var meta struct {
		Outcome string `json:"outcome"`
		Status  string `json:"status"`
		Applied *bool  `json:"applied"`
	}
	b, err := os.ReadFile(filepath.Join(w.cfg.RunsDir, "job_runs", strconv.FormatInt(id, 10), r.Item.RunID.String(), "meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	if meta.Outcome != "done" || meta.Applied == nil || !*meta.Applied || meta.Status != "done" {
		t.Errorf("meta.json %s; want outcome done, applied true, status done", b)
	}
	if got := runOutcomes(t, pool, id); len(got) != 1 || got[0] != "done" {
		t.Errorf("runs %v, want [done]", got)
	}
}

// Defect 4: a claim committed but its answer was lost. The worker minted
// the claim's token, so it releases the rows by token at once: the job runs
// right away on its first attempt, instead of waiting out a 30s lease and
// then being retried as an expired attempt that never ran.
func TestClaimWhoseAnswerWasLostIsReleasedByToken(t *testing.T) {
	pool := testdb.Pool(t)
	cfg := faultConfig(t, "unseen-claim")
	cfg.Lease = 30 * time.Second
	w, err := New(pool, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	w.claimFn = func(e *lease.Engine, ctx context.Context, p lease.ClaimParams) (lease.Claim, error) {
		c, err := e.Claim(ctx, p)
		lost := false
		if err == nil && len(c.Items) > 0 {
			once.Do(func() { lost = true })
		}
		if lost {
			return lease.Claim{Token: c.Token}, context.DeadlineExceeded
		}
		return c, err
	}
	id := enqueueOK(t, pool)
	results := runFaulty(t, w)
	select {
	case r := <-results:
		if r.Item.ID != id || r.Status != lease.StatusDone || r.Item.Attempt != 1 {
			t.Errorf("result %+v; want job %d done on attempt 1", r, id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the job did not run within 5s: the lost claim's rows were not released")
	}
	if got := runOutcomes(t, pool, id); len(got) != 2 || got[0] != "released" || got[1] != "done" {
		t.Errorf("runs %v, want [released done]", got)
	}
	// The release is counted once its statement has returned, which the
	// job's next claim need not wait for: allow the count to catch up.
	st := w.Stats()
	for deadline := time.Now().Add(10 * time.Second); st.ClaimsReleased < 1 && time.Now().Before(deadline); st = w.Stats() {
		time.Sleep(20 * time.Millisecond)
	}
	if st.ClaimsReleased != 1 || st.ClaimErrors != 1 {
		t.Errorf("stats %+v; want claims_released 1, claim_errors 1", st)
	}
}
