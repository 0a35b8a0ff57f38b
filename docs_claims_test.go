package workq_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/worker"
	"github.com/workq/workq/workqtest"
)

// TestGoDocEnqueueClaims checks what docs/go.md ("Enqueue") says of
// enqueueing through the Client: each case is one claim, and a refused
// enqueue writes nothing.
func TestGoDocEnqueueClaims(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	client, err := workq.NewClient(pool, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	count := func(t *testing.T) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, `select count(*) from workq.job_runs_all`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// refused runs op, which must fail with ErrInvalid and write no job.
	refused := func(t *testing.T, name string, op func() error) {
		t.Helper()
		before := count(t)
		if err := op(); !errors.Is(err, workq.ErrInvalid) {
			t.Fatalf("%s: %v, want an error wrapping workq.ErrInvalid", name, err)
		}
		if after := count(t); after != before {
			t.Fatalf("%s wrote %d jobs", name, after-before)
		}
	}
	cases := []struct {
		claim string
		check func(t *testing.T)
	}{
		{"a dedup key held by a ready job returns that job as a duplicate", func(t *testing.T) {
			first, err := client.Enqueue(ctx, claimArgs{}, &workq.EnqueueOpts{DedupKey: "claims:ready"})
			if err != nil {
				t.Fatal(err)
			}
			again, err := client.Enqueue(ctx, claimArgs{}, &workq.EnqueueOpts{DedupKey: "claims:ready"})
			if err != nil || !again.Duplicate || again.ID != first.ID {
				t.Fatalf("second enqueue: %+v, %v; want a duplicate of job %d", again, err, first.ID)
			}
		}},
		{"once the job is done its dedup key can be used again", func(t *testing.T) {
			done := workqtest.Work(ctx, t, client, pool, workq.WorkFunc(func(context.Context, *workq.Job[claimArgs]) error { return nil }),
				claimArgs{}, &workq.EnqueueOpts{DedupKey: "claims:done"})
			if done.Status != workq.JobStateDone {
				t.Fatalf("the first job is %s", done.Status)
			}
			again, err := client.Enqueue(ctx, claimArgs{}, &workq.EnqueueOpts{DedupKey: "claims:done"})
			if err != nil || again.Duplicate || again.ID == done.Job.ID {
				t.Fatalf("enqueue after done: %+v, %v; want a new job", again, err)
			}
		}},
		{"a nil payload is stored as {}", func(t *testing.T) {
			res, err := client.Enqueue(ctx, workq.RawArgs{KindName: "claims.nil"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			it, err := admin.Get(ctx, pool, lease.JobRuns, res.ID)
			if err != nil || string(it.Payload) != "{}" {
				t.Fatalf("payload %s (%v), want {}", it.Payload, err)
			}
		}},
		{"a JSON array payload is refused", func(t *testing.T) {
			refused(t, "array payload", func() error {
				_, err := client.Enqueue(ctx, workq.RawArgs{KindName: "claims.array", Payload: json.RawMessage(`[1]`)}, nil)
				return err
			})
		}},
		{"a kind outside A-Z a-z 0-9 _ . : - is refused", func(t *testing.T) {
			refused(t, "kind with a space", func() error {
				_, err := client.Enqueue(ctx, workq.RawArgs{KindName: "bad kind"}, nil)
				return err
			})
		}},
		{"a queue of 129 characters is refused", func(t *testing.T) {
			refused(t, "long queue", func() error {
				_, err := client.Enqueue(ctx, claimArgs{}, &workq.EnqueueOpts{Queue: strings.Repeat("q", 129)})
				return err
			})
		}},
		{"a negative MaxPayloadBytes is an error at each enqueue, not unlimited", func(t *testing.T) {
			neg, err := workq.NewClient(pool, workq.Config{MaxPayloadBytes: -1, Maintenance: workq.MaintenanceConfig{Disabled: true}})
			if err != nil {
				t.Fatal(err)
			}
			refused(t, "enqueue with MaxPayloadBytes -1", func() error {
				_, err := neg.Enqueue(ctx, claimArgs{}, nil)
				return err
			})
		}},
	}
	for _, c := range cases {
		t.Run(c.claim, c.check)
	}
}

// TestGoDocDefaultBackoff checks the default retry timing docs/go.md
// states: 4 attempts, and after attempt n a random wait from 0 to
// min(500ms × 2^n, 30s).
func TestGoDocDefaultBackoff(t *testing.T) {
	def := worker.DefaultConfig()
	if def.BackoffBase != 500*time.Millisecond || def.BackoffCap != 30*time.Second {
		t.Fatalf("default backoff base %s, cap %s; docs/go.md says 500ms and 30s", def.BackoffBase, def.BackoffCap)
	}
	var zero worker.Config
	if got := zero.WithDefaults(); got.BackoffBase != def.BackoffBase || got.BackoffCap != def.BackoffCap {
		t.Fatalf("a zero Config takes backoff %s/%s, not the defaults", got.BackoffBase, got.BackoffCap)
	}
	for _, c := range []struct {
		attempt int32
		ceiling time.Duration
	}{{1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {5, 16 * time.Second}, {6, 30 * time.Second}, {40, 30 * time.Second}} {
		var longest time.Duration
		for range 2000 {
			d := worker.Backoff(c.attempt, def.BackoffBase, def.BackoffCap)
			if d < 0 || d > c.ceiling {
				t.Fatalf("attempt %d: backoff %s outside [0, %s]", c.attempt, d, c.ceiling)
			}
			longest = max(longest, d)
		}
		// Uniform on [0, ceiling]: 2000 draws all below 90% of it would
		// happen with probability 0.9^2000.
		if longest < c.ceiling*9/10 {
			t.Fatalf("attempt %d: the longest of 2000 backoffs is %s; the ceiling is %s", c.attempt, longest, c.ceiling)
		}
	}
}

type claimArgs struct{}

func (claimArgs) Kind() string { return "claims.job" }
