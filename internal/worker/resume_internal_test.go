package worker

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
)

// The claim loop's resume points, as the claims see them while a backlog
// drains: after a full claim the next claim resumes where that one started
// (lease.ResumeFrom of its items), except that at least every fullScanEvery
// a claim reads the queue from its start; after a claim that was not full
// the next one has no point.
func TestClaimLoopResumePoints(t *testing.T) {
	pool := testdb.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := pool.Exec(ctx, `insert into workq.job_runs (queue, kind) select 'default', 'ok' from generate_series(1, 30000)`); err != nil {
		t.Fatal(err)
	}
	cfg := faultConfig(t, "resume")
	cfg.Concurrency, cfg.Batch = 10, 100
	cfg.Poll = time.Second
	cfg.DrainTimeout = time.Second
	w, err := New(pool, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	type claimSeen struct {
		at     time.Time
		resume *lease.ResumePoint
		max    int
		items  []lease.Item
	}
	var (
		mu     sync.Mutex
		claims []claimSeen
	)
	w.claimFn = func(e *lease.Engine, ctx context.Context, p lease.ClaimParams) (lease.Claim, error) {
		at := time.Now()
		c, err := e.Claim(ctx, p)
		if err == nil {
			mu.Lock()
			// A copy: the worker writes its next claim into the slice.
			claims = append(claims, claimSeen{at: at, resume: p.Resume, max: p.Max, items: slices.Clone(c.Items)})
			mu.Unlock()
		}
		return c, err
	}
	if err := w.Register("ok", func(context.Context, *Job) error { time.Sleep(time.Millisecond); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // 10 slots x 1 ms: at most 30,000 jobs, the backlog outlasts it
	stopCtx, stopCancel := context.WithTimeout(context.Background(), cfg.DrainTimeout+StopBound+time.Second)
	defer stopCancel()
	if err := w.Stop(stopCtx); err != nil {
		t.Fatalf("Stop: %v", err)
	}

	mu.Lock()
	defer mu.Unlock()
	resumed := 0
	lastFull := claims[0].at
	for i, c := range claims {
		if i == 0 {
			if c.resume != nil {
				t.Errorf("the first claim had a resume point %+v", c.resume)
			}
			continue
		}
		prev := claims[i-1]
		switch {
		case c.resume == nil:
			// Recorded a little after the claim loop read its clock (a
			// connection is acquired in between): 100ms of slack.
			if len(prev.items) == prev.max && c.at.Sub(lastFull) < fullScanEvery-100*time.Millisecond {
				t.Errorf("claim %d read from the queue's start %v after the last such claim, though the one before it was full", i, c.at.Sub(lastFull))
			}
			lastFull = c.at
		default:
			resumed++
			if gap := c.at.Sub(lastFull); gap > fullScanEvery+100*time.Millisecond {
				t.Errorf("claim %d resumed %v after the last claim from the queue's start; want one at least every %v", i, gap, fullScanEvery)
			}
			want := lease.ResumeFrom(lease.JobRuns, prev.items, resumeMargin)
			if len(prev.items) != prev.max || want == nil || c.resume.Priority != want.Priority || !c.resume.RunAt.Equal(want.RunAt) {
				t.Errorf("claim %d resumed at %+v after a claim of %d of %d items; want %+v after a full claim", i, c.resume, len(prev.items), prev.max, want)
			}
		}
	}
	t.Logf("%d claims, %d of them resumed", len(claims), resumed)
	if resumed == 0 || resumed == len(claims)-1 {
		t.Errorf("%d of %d claims resumed; want most, and some from the queue's start", resumed, len(claims))
	}
}
