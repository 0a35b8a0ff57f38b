package ui_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/testdb"
)

// depthTracer sees the dashboard sampler's depth reads on a pool (a pgx
// tracer): done counts the reads that ended, a good one at its last
// statement, a failed one at its failure. With failFirst the first read
// fails (the schema is not there yet, say): its first statement runs with
// a cancelled context.
type depthTracer struct {
	failFirst bool
	started   atomic.Int32 // LeaseQueueDepth statements
	done      atomic.Int32
}

// statementKey is the context key of the statement a query runs: its
// sqlc name, or "failed" for the read failFirst fails.
type statementKey struct{}

func (d *depthTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, q pgx.TraceQueryStartData) context.Context {
	switch {
	case strings.HasPrefix(q.SQL, "-- name: LeaseQueueDepth "):
		if d.started.Add(1) == 1 && d.failFirst {
			failed, cancel := context.WithCancelCause(context.WithValue(ctx, statementKey{}, "failed"))
			cancel(errors.New("the schema is not there yet"))
			return failed
		}
	case strings.HasPrefix(q.SQL, "-- name: AdminFailedCounts "):
		return context.WithValue(ctx, statementKey{}, "AdminFailedCounts")
	}
	return ctx
}

func (d *depthTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, q pgx.TraceQueryEndData) {
	switch ctx.Value(statementKey{}) {
	case "failed":
		d.done.Add(1)
	case "AdminFailedCounts":
		if q.Err == nil {
			d.done.Add(1)
		}
	}
}

// TestOverviewRightAfterStart: with a sample interval of a minute, work the
// API already shows is on the overview well before the second tick, both
// when it arrived just after the first sample and when the first sample
// failed.
func TestOverviewRightAfterStart(t *testing.T) {
	const interval = time.Minute
	const bound = 30 * time.Second // generous, and half the interval
	cases := []struct {
		name string
		// failFirst makes the first sample fail (a schema migrated a
		// moment after the start); the work is enqueued before the start.
		failFirst bool
	}{
		{"work that arrived after the first sample", false},
		{"a first sample that failed", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// The sampler's depth reads (admin.Depths: LeaseQueueDepth per
			// table, then AdminFailedCounts), seen on the Client's pool.
			tr := &depthTracer{failFirst: c.failFirst}
			s := newSite(t, func(o *siteSetup) {
				o.SampleInterval = interval
				o.pool = testdb.PoolTraced(t, tr)
			})
			depthDone := &tr.done
			b := s.browser()
			b.login(s.read)
			if c.failFirst {
				// The sampler starts with newSite: its first round may have run.
				enqueue(t, s.pool, jobq.Job{Queue: "fresh", Kind: "k"})
			}
			deadline := time.Now().Add(bound)
			for depthDone.Load() < 1 { // what the first sample read is read
				if time.Now().After(deadline) {
					t.Fatal("the sampler took no first sample")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if !c.failFirst {
				enqueue(t, s.pool, jobq.Job{Queue: "fresh", Kind: "k"})
			}
			// The API shows the work at once.
			req, err := http.NewRequest("GET", s.http.URL+"/v1/queues", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+s.read)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != 200 || !strings.Contains(string(body), `"fresh"`) {
				t.Fatalf("GET /v1/queues: %d %s", res.StatusCode, body)
			}
			// The overview too, without waiting for the next tick.
			want := `"table":"job_runs","queue":"fresh","ready":1`
			deadline = time.Now().Add(bound)
			for {
				p := b.get("/ui/api/overview")
				if p.status == 200 && strings.Contains(p.body, want) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the overview does not show job_runs/fresh within %s of the start (interval %s): %d %s", bound, interval, p.status, p.body)
				}
				time.Sleep(50 * time.Millisecond)
			}
			must(t, b.get("/ui/"), 200, `data-key="job_runs/fresh"`)
		})
	}
}
