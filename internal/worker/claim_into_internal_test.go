package worker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
)

// TestClaimWritesIntoTheLastClaimsSlice: the claim loop of job runs passes
// each claim the slice of the claim before it (lease.ClaimParams.Into),
// cleared, so a claim allocates no items slice and the kept slice holds no
// payload; an empty claim drops it; the jobs run with their own items all
// the same.
func TestClaimWritesIntoTheLastClaimsSlice(t *testing.T) {
	pool := testdb.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const jobs = 500
	if _, err := pool.Exec(ctx, `insert into workq.job_runs (queue, kind, payload) select 'default', 'ok', jsonb_build_object('n', g) from generate_series(1, $1) g`, jobs); err != nil {
		t.Fatal(err)
	}
	cfg := faultConfig(t, "into")
	cfg.Concurrency, cfg.Batch = 10, 50
	w, err := New(pool, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		into, got      *lease.Item // first elements of the slices' arrays (nil: none)
		intoCap        int
		dirty, claimed int
	}
	var (
		mu    sync.Mutex
		calls []seen
	)
	w.claimFn = func(e *lease.Engine, ctx context.Context, p lease.ClaimParams) (lease.Claim, error) {
		s := seen{intoCap: cap(p.Into)}
		if cap(p.Into) > 0 {
			full := p.Into[:cap(p.Into)]
			s.into = &full[0]
			for i := range full {
				if full[i].ID != 0 || full[i].Payload != nil || full[i].Kind != "" {
					s.dirty++
				}
			}
		}
		c, err := e.Claim(ctx, p)
		if s.claimed = len(c.Items); s.claimed > 0 {
			s.got = &c.Items[:1][0]
		}
		mu.Lock()
		calls = append(calls, s)
		mu.Unlock()
		return c, err
	}
	var (
		runMu sync.Mutex
		ran   = map[int64]string{}
	)
	if err := w.Register("ok", func(_ context.Context, j *Job) error {
		runMu.Lock()
		ran[j.ID] = string(j.Payload)
		runMu.Unlock()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitRan := func(want int) {
		for {
			runMu.Lock()
			n := len(ran)
			runMu.Unlock()
			if n == want {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("%d of %d jobs ran", n, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitRan(jobs)
	// The queue idles until a claim comes back empty, then gets more work:
	// the claims after the empty one start without a slice, then reuse.
	for empty := false; !empty; {
		mu.Lock()
		empty = len(calls) > 0 && calls[len(calls)-1].claimed == 0
		mu.Unlock()
		if ctx.Err() != nil {
			t.Fatal("no claim came back empty")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := pool.Exec(ctx, `insert into workq.job_runs (queue, kind, payload) select 'default', 'ok', jsonb_build_object('m', g) from generate_series(1, $1) g`, jobs); err != nil {
		t.Fatal(err)
	}
	waitRan(2 * jobs)
	if err := w.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	// Every job ran with its own payload, though the slices were reused.
	var want map[int64]string
	rows, err := pool.Query(ctx, `select id, payload::text from workq.job_runs_all`)
	if err != nil {
		t.Fatal(err)
	}
	want = map[int64]string{}
	for rows.Next() {
		var id int64
		var p string
		if err := rows.Scan(&id, &p); err != nil {
			t.Fatal(err)
		}
		want[id] = p
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	runMu.Lock()
	for id, p := range want {
		if ran[id] != p {
			t.Errorf("job %d ran with payload %q, want %q", id, ran[id], p)
		}
	}
	runMu.Unlock()

	mu.Lock()
	defer mu.Unlock()
	reused := 0
	var last *lease.Item // the array the last claim with items wrote into
	for i, c := range calls {
		if c.dirty > 0 {
			t.Errorf("claim %d was passed a slice with %d items not cleared", i, c.dirty)
		}
		if last != nil {
			if c.into != last {
				t.Errorf("claim %d was not passed the last claim's slice", i)
			} else {
				reused++
			}
		}
		if c.claimed > 0 {
			if c.into != nil && c.claimed <= c.intoCap && c.got != c.into {
				t.Errorf("claim %d of %d items allocated a slice though it was passed one of capacity %d", i, c.claimed, c.intoCap)
			}
			last = c.got
		} else {
			last = nil // an empty claim drops the slice: an idle producer keeps none
			if i+1 < len(calls) && calls[i+1].into != nil {
				t.Errorf("claim %d was empty, yet the next claim was passed a slice", i)
			}
		}
	}
	if reused == 0 {
		t.Errorf("no claim of %d was passed an earlier claim's slice", len(calls))
	}
	t.Logf("%d claims, %d passed the last claim's slice", len(calls), reused)
}
