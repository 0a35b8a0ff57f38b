package ui_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/ui"
)

// source is a shard's sampling source with fixed numbers; down makes it
// fail, hang makes it wait for its context (a silent network).
type source struct {
	name       string
	ready      int64
	done       int64
	down, hang atomic.Bool
	clock      *time.Time
}

func (s *source) ss() ui.SampleSource {
	check := func(ctx context.Context) error {
		if s.hang.Load() {
			<-ctx.Done()
			return ctx.Err()
		}
		if s.down.Load() {
			return errors.New("connection refused")
		}
		return nil
	}
	return ui.SampleSource{Name: s.name,
		Clock: func(ctx context.Context) (time.Time, error) { return *s.clock, check(ctx) },
		Depth: func(ctx context.Context) ([]workq.QueueDepth, error) {
			return []workq.QueueDepth{{Table: workq.TableJobRuns, Queue: "q", Ready: s.ready, OldestReadyAge: time.Duration(s.ready) * time.Second}}, check(ctx)
		},
		Ended: func(ctx context.Context, after, until time.Time) ([]workq.EndedCount, error) {
			return []workq.EndedCount{{Table: workq.TableJobRuns, Queue: "q", Outcome: "done", Count: s.done}}, check(ctx)
		},
	}
}

// A sharded sampler sums its shards; a shard that fails or hangs is left
// out of the sample (within ShardTimeout) and shown in ShardStates; only
// every shard failing fails the round.
func TestSamplerSumsShardsAndSurvivesADownOne(t *testing.T) {
	clock := time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC)
	eu := &source{name: "eu", ready: 10, done: 20, clock: &clock}
	us := &source{name: "us", ready: 5, done: 30, clock: &clock}
	s, err := ui.NewSampler(ui.SamplerOptions{Interval: 10 * time.Second, Settle: -1, ShardTimeout: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Shards: []ui.SampleSource{eu.ss(), us.ss()}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	round := func(wantErr bool) ui.Sample {
		t.Helper()
		err := s.SampleOnce(ctx)
		clock = clock.Add(10 * time.Second)
		if (err != nil) != wantErr {
			t.Fatalf("round: err %v, want an error: %v", err, wantErr)
		}
		smp, _ := s.Latest()
		return smp
	}
	round(false)
	q := round(false).Queues[ui.QueueKey{Table: workq.TableJobRuns, Queue: "q"}]
	if q.Ready != 15 || q.Ended["done"] != 50 || q.OldestDue != 10*time.Second {
		t.Fatalf("summed sample %+v, want ready 15, done 50, oldest 10s", q)
	}
	for name, set := range map[string]func(){"down": func() { us.down.Store(true) }, "hanging": func() { us.hang.Store(true) }} {
		set()
		start := time.Now()
		q = round(false).Queues[ui.QueueKey{Table: workq.TableJobRuns, Queue: "q"}]
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("%s: the round took %s", name, took)
		}
		if q.Ready != 10 || q.Ended["done"] != 20 {
			t.Fatalf("%s: sample %+v, want eu's alone", name, q)
		}
		st := s.ShardStates()
		if len(st) != 2 || st[0].Err != nil || st[1].Err == nil || st[1].Ready != 5 || st[0].Ready != 10 {
			t.Fatalf("%s: states %+v", name, st)
		}
		us.down.Store(false)
		us.hang.Store(false)
	}
	eu.down.Store(true)
	us.down.Store(true)
	if err := s.SampleOnce(ctx); err == nil || !strings.Contains(err.Error(), "shard eu") || !strings.Contains(err.Error(), "shard us") {
		t.Fatalf("every shard down: %v", err)
	}
	if _, err := s.Samples(); err == nil {
		t.Error("Samples reports no error after a failed round")
	}
	if _, err := ui.NewSampler(ui.SamplerOptions{Shards: []ui.SampleSource{eu.ss()}, Clock: eu.ss().Clock}); err == nil {
		t.Error("Shards with Clock accepted")
	}
}
