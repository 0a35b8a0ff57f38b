package shardlimit

import "sort"

// Demand is what the leader knows of one shard for one (table, queue) when
// it computes budgets.
type Demand struct {
	// Ready is the number of ready and due items, counted up to a cap.
	Ready int
	// InProgress is the number of items in progress (unexpired leases).
	InProgress int
	// Fixed marks a shard whose budget the leader cannot change now (it is
	// unreachable): it keeps Held, and the others share what is left of W.
	Fixed bool
	// Held is, for a Fixed shard, the capacity it may still use: the larger
	// of its budget in force and its in-progress count when last read.
	Held int
}

// Allocate returns the target budget of every shard: the shares of W that
// the leader wants in force, summing to at most W (to exactly W, less what
// Fixed shards hold, when w allows). A Fixed shard's target is its Held.
// The other shards share the rest by max-min fairness over their demand
// (Ready + InProgress): every shard with demand first gets 1 (the largest
// demands first when there are fewer slots than shards), then each idle
// shard gets 1 so that its first item is picked up without waiting for a
// rebalance, then the slots are water-filled (a shard is never given more
// than its demand while another shard's demand is unmet), and whatever is
// left when every demand is met is spread evenly (the largest demands first
// for the remainder). The result is deterministic: ties go to the lower
// index.
func Allocate(w int, ds []Demand) []int {
	target := make([]int, len(ds))
	left := w
	var free []int // indexes of the shards the leader can change
	for i, d := range ds {
		if d.Fixed {
			target[i] = max(d.Held, 0)
			left -= target[i]
			continue
		}
		free = append(free, i)
	}
	if left <= 0 || len(free) == 0 {
		return target
	}
	demand := func(i int) int { return max(ds[i].Ready, 0) + max(ds[i].InProgress, 0) }
	// byDemand: the free shards, the largest demand first, ties by index.
	byDemand := append([]int(nil), free...)
	sort.SliceStable(byDemand, func(a, b int) bool { return demand(byDemand[a]) > demand(byDemand[b]) })

	// Floors: 1 for each shard with demand, then 1 for each idle shard.
	for _, busy := range []bool{true, false} {
		for _, i := range byDemand {
			if left == 0 {
				return target
			}
			if (demand(i) > 0) == busy {
				target[i]++
				left--
			}
		}
	}
	// Water-fill the unmet demand.
	for left > 0 {
		var needy []int
		for _, i := range byDemand {
			if demand(i) > target[i] {
				needy = append(needy, i)
			}
		}
		if len(needy) == 0 {
			break
		}
		share := left / len(needy)
		if share == 0 {
			// Fewer slots than needy shards: one each, the largest unmet
			// demand first.
			sort.SliceStable(needy, func(a, b int) bool {
				return demand(needy[a])-target[needy[a]] > demand(needy[b])-target[needy[b]]
			})
			for _, i := range needy[:left] {
				target[i]++
			}
			return target
		}
		for _, i := range needy {
			g := min(share, demand(i)-target[i])
			target[i] += g
			left -= g
		}
	}
	// Every demand is met: spread the rest evenly.
	if left > 0 {
		each, rest := left/len(free), left%len(free)
		for k, i := range byDemand {
			target[i] += each
			if k < rest {
				target[i]++
			}
		}
	}
	return target
}

// Raise returns the budgets to write in the raise phase, once every
// lowering has committed. held[i] is the capacity shard i may use now: the
// larger of its budget in force and its in-progress count (read after its
// lowering committed), or, for a shard the leader cannot reach, what it held
// when last read. current[i] is its budget in force and target[i] what
// Allocate wants. A shard whose target is above its held capacity is raised
// towards it out of the headroom W - sum(held), the largest shortfall first
// (ties by index); the others keep current. So the sum over shards of
// max(budget, in progress) stays at most W after the raises, provided it
// was before them.
func Raise(w int, held, current, target []int) []int {
	out := append([]int(nil), current...)
	headroom := w
	for _, h := range held {
		headroom -= h
	}
	var up []int
	for i := range target {
		switch {
		case target[i] <= current[i]:
		case target[i] <= held[i]:
			// In progress above the budget already counts: raising the
			// budget up to it takes nothing from the headroom.
			out[i] = target[i]
		default:
			up = append(up, i)
		}
	}
	sort.SliceStable(up, func(a, b int) bool {
		return target[up[a]]-held[up[a]] > target[up[b]]-held[up[b]]
	})
	for _, i := range up {
		if headroom <= 0 {
			break
		}
		g := min(target[i]-held[i], headroom)
		headroom -= g
		if b := held[i] + g; b > current[i] {
			out[i] = b
		}
	}
	return out
}
