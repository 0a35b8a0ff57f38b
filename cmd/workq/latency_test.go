package main

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestLatencyBuckets(t *testing.T) {
	// Every bucket's middle falls back in the bucket, and buckets are in
	// order of value.
	prev := -1
	for _, v := range []uint64{0, 1, 127, 128, 129, 255, 256, 257, 1000, 1e6, 1e9 + 7, 1 << 40, 1<<63 - 1} {
		i := latBucket(v)
		if i < 0 || i >= latBuckets {
			t.Fatalf("latBucket(%d) = %d, outside [0, %d)", v, i, latBuckets)
		}
		if i < prev {
			t.Errorf("latBucket(%d) = %d, below the previous value's %d", v, i, prev)
		}
		prev = i
		if mid := latValue(i); latBucket(mid) != i {
			t.Errorf("latValue(%d) = %d lands in bucket %d", i, mid, latBucket(mid))
		}
		if v < latSub && latValue(i) != v {
			t.Errorf("value %d below latSub is not exact: %d", v, latValue(i))
		}
	}
}

func TestLatencyQuantiles(t *testing.T) {
	tests := []struct {
		name string
		gen  func(r *rand.Rand) time.Duration
	}{
		{"uniform 0-50ms", func(r *rand.Rand) time.Duration { return time.Duration(r.Int64N(int64(50 * time.Millisecond))) }},
		{"exponential, mean 2ms", func(r *rand.Rand) time.Duration { return time.Duration(r.ExpFloat64() * float64(2*time.Millisecond)) }},
		{"tiny, 0-100ns (exact)", func(r *rand.Rand) time.Duration { return time.Duration(r.Int64N(100)) }},
		{"negative clamps to 0", func(r *rand.Rand) time.Duration { return -time.Duration(r.Int64N(1000)) }},
	}
	qs := []float64{0.01, 0.50, 0.95, 0.99}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			var l latencies
			vals := make([]time.Duration, 20000)
			var wg sync.WaitGroup
			for i := range vals {
				vals[i] = tt.gen(r)
			}
			// Recorded from several goroutines at once, as the handlers do.
			for g := range 4 {
				wg.Go(func() {
					for i := g; i < len(vals); i += 4 {
						l.record(vals[i])
					}
				})
			}
			wg.Wait()
			got, n := l.quantiles(qs...)
			if n != int64(len(vals)) {
				t.Fatalf("counted %d, recorded %d", n, len(vals))
			}
			for i := range vals {
				vals[i] = max(vals[i], 0)
			}
			slices.Sort(vals)
			for k, q := range qs {
				want := vals[min(len(vals)-1, int(q*float64(len(vals))))]
				diff := got[k] - want
				if diff < 0 {
					diff = -diff
				}
				if float64(diff) > float64(want)/latSub+1 {
					t.Errorf("q%.2f = %v, exact %v: off by more than 1/%d", q, got[k], want, latSub)
				}
			}
		})
	}
	var empty latencies
	if got, n := empty.quantiles(0.5); n != 0 || got[0] != 0 {
		t.Errorf("empty: %v, %d; want 0, 0", got, n)
	}
	var l latencies
	l.record(time.Second)
	l.reset()
	if _, n := l.quantiles(0.5); n != 0 {
		t.Errorf("after reset: %d recorded, want 0", n)
	}
}
