package worker

import (
	"sync/atomic"
	"testing"

	"github.com/workq/workq/internal/lease"
)

// A producer holds its leases by claim. An item lost, reaped and claimed
// again while its old handler ran on is held twice; the heartbeat and a
// cancel by id take the newer claim. A forgotten attempt leaves the held
// set at once (its slot is cleared), forgetting it again changes nothing,
// and a claim whose attempts are all forgotten is dropped.
func TestProducerHoldsLeasesByClaim(t *testing.T) {
	p := &producer{held: map[*heldBatch]struct{}{}}
	claim := func(items ...lease.Item) []*attempt {
		hb := &heldBatch{attempts: make([]atomic.Pointer[attempt], len(items))}
		hb.left.Store(int32(len(items)))
		var as []*attempt
		for i, it := range items {
			a := &attempt{job: Job{Item: it}, held: hb, slot: i}
			hb.attempts[i].Store(a)
			as = append(as, a)
		}
		p.held[hb] = struct{}{}
		return as
	}
	all := func(*attempt) bool { return true }
	old := claim(lease.Item{ID: 1, LeaseVersion: 1}, lease.Item{ID: 2, LeaseVersion: 1})
	again := claim(lease.Item{ID: 1, LeaseVersion: 2})

	tests := []struct {
		name    string
		forget  []*attempt
		want    map[int64]int64 // id: lease version of the newest attempt held
		batches int
	}{
		{"both claims held", nil, map[int64]int64{1: 2, 2: 1}, 2},
		{"the newer claim forgotten", []*attempt{again[0]}, map[int64]int64{1: 1, 2: 1}, 1},
		{"forgotten twice", []*attempt{again[0]}, map[int64]int64{1: 1, 2: 1}, 1},
		{"one of the old claim's", []*attempt{old[1]}, map[int64]int64{1: 1}, 1},
		{"all", []*attempt{old[0]}, map[int64]int64{}, 0},
	}
	for _, tc := range tests {
		for _, a := range tc.forget {
			p.forget(a)
		}
		got := p.newest(all)
		if len(got) != len(tc.want) {
			t.Errorf("%s: %d items held; want %d", tc.name, len(got), len(tc.want))
		}
		for id, v := range tc.want {
			if a := got[id]; a == nil || a.job.Item.LeaseVersion != v {
				t.Errorf("%s: item %d held as %+v; want lease version %d", tc.name, id, a, v)
			}
		}
		if len(p.held) != tc.batches {
			t.Errorf("%s: %d claims held; want %d", tc.name, len(p.held), tc.batches)
		}
		n := 0
		p.holding(func(*attempt) { n++ })
		if want := func() int {
			c := 0
			for b := range p.held {
				c += int(b.left.Load())
			}
			return c
		}(); n != want {
			t.Errorf("%s: holding visits %d attempts; the claims count %d", tc.name, n, want)
		}
	}
}
