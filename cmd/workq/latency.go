package main

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// latencies is the bench's record of how long after its run_at each job's
// handler started: a log-linear histogram of atomic counters, so the
// handlers record without a lock and without a slice that grows with every
// job. (A mutex and an append per job were about 5% of the bench
// process's CPU in a continuous run, work the product does not do.
// hdrhistogram-go records under the caller's lock, the cost this avoids.)
//
// Values below latSub nanoseconds are exact; above, each power of two is
// split into latSub buckets, so a quantile is within 1/latSub (0.8%) of
// the true value.
type latencies struct {
	counts [latBuckets]atomic.Int64
}

const (
	latSubBits = 7
	latSub     = 1 << latSubBits
	latBuckets = (64 - latSubBits + 1) * latSub
)

// latBucket is the bucket of a duration of v nanoseconds (v >= 0).
func latBucket(v uint64) int {
	if v < latSub {
		return int(v)
	}
	shift := bits.Len64(v) - latSubBits - 1 // keeps latSubBits+1 significant bits
	return (shift+1)*latSub + int(v>>shift) - latSub
}

// latValue is the middle of bucket i, in nanoseconds.
func latValue(i int) uint64 {
	if i < latSub {
		return uint64(i)
	}
	shift := i/latSub - 1
	low := uint64(latSub+i%latSub) << shift
	return low + (uint64(1)<<shift)/2
}

func (l *latencies) record(d time.Duration) {
	l.counts[latBucket(uint64(max(d, 0)))].Add(1)
}

func (l *latencies) reset() {
	for i := range l.counts {
		l.counts[i].Store(0)
	}
}

// quantiles returns the duration at each of qs (0 < q < 1) and how many
// were recorded: the smallest recorded value v such that more than q of
// the values are at most v, as a sorted slice indexed at q*n gives.
func (l *latencies) quantiles(qs ...float64) ([]time.Duration, int64) {
	var snap [latBuckets]int64
	var n int64
	for i := range l.counts {
		snap[i] = l.counts[i].Load()
		n += snap[i]
	}
	out := make([]time.Duration, len(qs))
	if n == 0 {
		return out, 0
	}
	for k, q := range qs {
		rank := min(n-1, int64(q*float64(n))) // 0-based index into the sorted values
		var seen int64
		for i, c := range snap {
			seen += c
			if seen > rank {
				out[k] = time.Duration(latValue(i))
				break
			}
		}
	}
	return out, n
}
