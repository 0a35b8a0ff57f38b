package shardlimit

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

func TestAllocate(t *testing.T) {
	d := func(ready, ip int) Demand { return Demand{Ready: ready, InProgress: ip} }
	fixed := func(held int) Demand { return Demand{Fixed: true, Held: held} }
	for _, tc := range []struct {
		name string
		w    int
		ds   []Demand
		want []int
	}{
		{"no shards", 10, nil, []int{}},
		{"W=0", 0, []Demand{d(5, 0), d(5, 0)}, []int{0, 0}},
		{"idle shards share W evenly", 100, []Demand{d(0, 0), d(0, 0), d(0, 0), d(0, 0)}, []int{25, 25, 25, 25}},
		{"rounding: remainder to the largest demand first", 10, []Demand{d(0, 0), d(1, 0), d(0, 0)}, []int{3, 4, 3}},
		{"hot shard takes what the others do not need", 100, []Demand{d(100, 60), d(2, 4), d(1, 4), d(0, 5)}, []int{84, 6, 5, 5}},
		{"demand below W: each its demand, the rest evenly", 100, []Demand{d(10, 10), d(5, 0), d(0, 0), d(0, 0)}, []int{39, 23, 19, 19}},
		{"max-min fair under saturation", 10, []Demand{d(50, 0), d(50, 0), d(2, 0)}, []int{4, 4, 2}},
		{"idle shard gets a floor of 1", 10, []Demand{d(50, 0), d(0, 0)}, []int{9, 1}},
		{"fewer slots than busy shards: the largest demands", 2, []Demand{d(1, 0), d(5, 0), d(3, 0)}, []int{0, 1, 1}},
		{"busy shards before idle floors", 2, []Demand{d(0, 0), d(5, 0), d(0, 0)}, []int{1, 1, 0}},
		{"an unreachable shard keeps its budget", 100, []Demand{d(100, 0), fixed(30), d(100, 0)}, []int{35, 30, 35}},
		{"an unreachable shard holding everything", 4, []Demand{d(10, 0), fixed(4)}, []int{0, 4}},
		{"an unreachable shard above W", 4, []Demand{d(10, 0), fixed(7)}, []int{0, 7}},
		{"W=4 over two shards, 80/20", 4, []Demand{d(4, 0), d(1, 0)}, []int{3, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Allocate(tc.w, tc.ds)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("Allocate(%d, %+v) = %v, want %v", tc.w, tc.ds, got, tc.want)
			}
		})
	}
}

// TestAllocateRandom checks the properties on random inputs: the sum is
// W less what fixed shards hold (never more than W unless the fixed shards
// alone hold more), fixed shards keep Held, every busy shard gets at least
// 1 when W allows, and no shard gets more than its demand while another's
// demand is unmet.
func TestAllocateRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		n := 1 + rng.IntN(6)
		w := rng.IntN(120)
		ds := make([]Demand, n)
		fixedHeld, busy, free := 0, 0, 0
		for i := range ds {
			ds[i] = Demand{Ready: rng.IntN(3) * rng.IntN(80), InProgress: rng.IntN(3) * rng.IntN(20)}
			if rng.IntN(5) == 0 {
				ds[i] = Demand{Fixed: true, Held: rng.IntN(w/2 + 1)}
				fixedHeld += ds[i].Held
				continue
			}
			free++
			if ds[i].Ready+ds[i].InProgress > 0 {
				busy++
			}
		}
		got := Allocate(w, ds)
		left := max(w-fixedHeld, 0)
		if free > 0 && sum(got)-fixedHeld != left {
			t.Fatalf("W=%d %+v: got %v, the free shards share %d, want %d", w, ds, got, sum(got)-fixedHeld, left)
		}
		if fixedHeld <= w && sum(got) > w {
			t.Fatalf("W=%d %+v: got %v, sum above W", w, ds, got)
		}
		unmet := false
		for i, d := range ds {
			if d.Fixed {
				if got[i] != d.Held {
					t.Fatalf("W=%d %+v: got %v, fixed shard %d moved", w, ds, got, i)
				}
				continue
			}
			if busy <= left && d.Ready+d.InProgress > 0 && got[i] < 1 {
				t.Fatalf("W=%d %+v: got %v, busy shard %d got nothing", w, ds, got, i)
			}
			if got[i] < d.Ready+d.InProgress {
				unmet = true
			}
		}
		if unmet {
			// Water-filling: a shard above its demand means another met its
			// demand... no shard may exceed its demand (beyond the floor of 1)
			// while one is short.
			for i, d := range ds {
				if !d.Fixed && got[i] > max(d.Ready+d.InProgress, 1) {
					t.Fatalf("W=%d %+v: got %v, shard %d above its demand while another is short", w, ds, got, i)
				}
			}
		}
	}
}

func TestRaise(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		w                     int
		held, current, target []int
		want                  []int
	}{
		{"headroom covers every raise", 10, []int{2, 3}, []int{2, 3}, []int{5, 5}, []int{5, 5}},
		{"in progress above a lowered budget holds the headroom", 10, []int{7, 2}, []int{3, 2}, []int{3, 7}, []int{3, 3}},
		{"a raise up to in progress is free", 10, []int{7, 3}, []int{5, 3}, []int{6, 4}, []int{6, 3}},
		{"largest shortfall first", 10, []int{2, 2, 2}, []int{2, 2, 2}, []int{3, 5, 2}, []int{3, 5, 2}},
		{"partial: largest shortfall takes the headroom", 10, []int{2, 2, 4}, []int{2, 2, 4}, []int{4, 6, 0}, []int{2, 4, 4}},
		{"an unreachable shard's budget counts", 4, []int{0, 4}, []int{0, 4}, []int{4, 0}, []int{0, 4}},
		{"no headroom: nothing rises", 4, []int{2, 2}, []int{1, 2}, []int{3, 1}, []int{1, 2}},
		{"no headroom, but a raise within in progress is free", 4, []int{3, 3}, []int{1, 3}, []int{2, 2}, []int{2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Raise(tc.w, tc.held, tc.current, tc.target)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("Raise(%d, held %v, current %v, target %v) = %v, want %v", tc.w, tc.held, tc.current, tc.target, got, tc.want)
			}
		})
	}
}

// TestPlanKeepsInvariant plays random rounds of the two-phase plan on a
// model of shards (budget, in progress) where claims fill up to the budget
// and some items finish between steps, and checks after every single write
// that the sum of max(budget, in progress) never exceeds W, with some
// shards unreachable in some rounds.
func TestPlanKeepsInvariant(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 300 {
		n := 2 + rng.IntN(4)
		w := rng.IntN(60)
		budget := make([]int, n) // all start at 0: sum 0 <= W
		ip := make([]int, n)
		ready := make([]int, n)
		lastHeld := make([]int, n)
		check := func(step string) {
			t.Helper()
			s := 0
			for i := range budget {
				s += max(budget[i], ip[i])
			}
			if s > w {
				t.Fatalf("trial %d %s: budgets %v in progress %v: sum %d above W=%d", trial, step, budget, ip, s, w)
			}
		}
		churn := func() {
			for i := range n {
				ip[i] -= rng.IntN(ip[i] + 1)           // some finish
				ready[i] += rng.IntN(3) * rng.IntN(20) // some arrive
				take := min(ready[i], max(budget[i]-ip[i], 0))
				ip[i] += take // claims fill up to the budget
				ready[i] -= take
			}
		}
		for range 30 {
			churn()
			reach := make([]bool, n)
			ds := make([]Demand, n)
			for i := range n {
				reach[i] = rng.IntN(4) != 0
				if reach[i] {
					lastHeld[i] = max(budget[i], ip[i])
					ds[i] = Demand{Ready: ready[i], InProgress: ip[i]}
				} else {
					ds[i] = Demand{Fixed: true, Held: lastHeld[i]}
				}
			}
			target := Allocate(w, ds)
			held := make([]int, n)
			for i := range n {
				held[i] = lastHeld[i]
				if reach[i] && target[i] < budget[i] {
					budget[i] = target[i]
					churn() // claims and completions between writes
					check("after a lowering")
					held[i] = max(budget[i], ip[i])
					lastHeld[i] = held[i]
				}
			}
			churn()
			raised := Raise(w, held, slices.Clone(budget), target)
			for i := range n {
				if reach[i] && raised[i] > budget[i] {
					budget[i] = raised[i]
					lastHeld[i] = max(budget[i], ip[i])
					check("after a raise")
					churn()
					check("after claims")
				}
			}
		}
	}
}
