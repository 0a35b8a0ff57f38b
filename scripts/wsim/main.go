// Command wsim simulates a global limit W over N shards, deterministically
// (a seeded generator, a fixed time step), with the same allocation
// functions the Rebalancer uses (shardlimit.Allocate and shardlimit.Raise).
//
//	go run ./scripts/wsim
//
// The model: every shard has more workers than W, so only its budget holds
// it back; a worker claims the oldest ready item as soon as the shard's in-
// progress count is below its budget, and works it for a fixed service
// time. Arrivals are Poisson, a share of them on one hot shard. The leader
// reads every shard each interval (ready count capped at W, in-progress
// count), computes targets with Allocate, lowers first, then raises within
// the headroom W - sum(max(budget, in progress)) with Raise. A shard
// unreachable to the leader keeps its budget (its workers go on claiming
// under it). The figures in docs/scale-out.md come from this program.
package main

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/workq/workq/internal/shardlimit"
)

type config struct {
	name     string
	shards   int
	w        int
	rate     float64 // arrivals per second, all shards
	hot      float64 // share of the arrivals on shard 0
	service  time.Duration
	duration time.Duration
	interval time.Duration // 0: static budgets W/N
	down     int           // shard unreachable to the leader (-1: none)
	downFrom time.Duration
	downTo   time.Duration
	seed     uint64
	step     time.Duration
}

type result struct {
	backlog, done     int
	p50, p99, maxWait time.Duration
	oldest            time.Duration // age of the oldest item left waiting
	maxInForce, maxIP int
}

func main() {
	seeds := flag.Int("seeds", 10, "run every case with seeds 1..N and report the median and the worst")
	flag.Parse()
	base := config{shards: 4, w: 100, rate: 90, hot: 0.7, service: time.Second, duration: 600 * time.Second,
		down: -1, step: 10 * time.Millisecond}
	var runs []config
	add := func(name string, f func(*config)) {
		c := base
		c.name = name
		f(&c)
		runs = append(runs, c)
	}
	add("static W/4", func(c *config) {})
	add("rebalanced every 0.2 s", func(c *config) { c.interval = 200 * time.Millisecond })
	add("rebalanced every 1 s", func(c *config) { c.interval = time.Second })
	add("rebalanced every 5 s", func(c *config) { c.interval = 5 * time.Second })
	add("1 s, hot shard unreachable 200-300 s", func(c *config) {
		c.interval, c.down, c.downFrom, c.downTo = time.Second, 0, 200*time.Second, 300*time.Second
	})
	add("1 s, a cold shard unreachable 200-300 s", func(c *config) {
		c.interval, c.down, c.downFrom, c.downTo = time.Second, 1, 200*time.Second, 300*time.Second
	})
	fmt.Printf("%d shards, W=%d, %.0f arrivals/s (%.0f%% on shard 0), service %s (load %.0f%% of W/service), %s simulated, step %s, seeds 1-%d: median (worst)\n\n",
		base.shards, base.w, base.rate, base.hot*100, base.service, 100*base.rate*base.service.Seconds()/float64(base.w), base.duration, base.step, *seeds)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "budgets\tbacklog at end\tp50 wait\tp99 wait\tmax wait\tmax sum in force\tmax sum in progress\t")
	failed := false
	for _, c := range runs {
		var rs []result
		for s := 1; s <= *seeds; s++ {
			c.seed = uint64(s)
			rs = append(rs, simulate(c))
		}
		med := func(f func(result) float64) float64 {
			xs := make([]float64, len(rs))
			for i, r := range rs {
				xs[i] = f(r)
			}
			slices.Sort(xs)
			return xs[len(xs)/2]
		}
		worst := func(f func(result) float64) float64 {
			m := math.Inf(-1)
			for _, r := range rs {
				m = max(m, f(r))
			}
			return m
		}
		backlog := func(r result) float64 { return float64(r.backlog) }
		p50 := func(r result) float64 { return r.p50.Seconds() }
		p99 := func(r result) float64 { return r.p99.Seconds() }
		maxWait := func(r result) float64 { return r.maxWait.Seconds() }
		inForce := func(r result) float64 { return float64(r.maxInForce) }
		ip := func(r result) float64 { return float64(r.maxIP) }
		fmt.Fprintf(tw, "%s\t%.0f (%.0f)\t%.2f s (%.2f s)\t%.2f s (%.2f s)\t%.2f s (%.2f s)\t%.0f\t%.0f\t\n", c.name,
			med(backlog), worst(backlog), med(p50), worst(p50), med(p99), worst(p99), med(maxWait), worst(maxWait), worst(inForce), worst(ip))
		if worst(inForce) > float64(c.w) || worst(ip) > float64(c.w) {
			fmt.Fprintf(os.Stderr, "%s: the sum went above W=%d\n", c.name, c.w)
			failed = true
		}
	}
	tw.Flush()
	if failed {
		os.Exit(1)
	}
}

// poisson draws from Poisson(l) (Knuth; l is small per step).
func poisson(rng *rand.Rand, l float64) int {
	limit, k, p := math.Exp(-l), 0, 1.0
	for {
		p *= rng.Float64()
		if p <= limit {
			return k
		}
		k++
	}
}

func simulate(c config) result {
	rng := rand.New(rand.NewPCG(c.seed, 0x5eed))
	n := c.shards
	ready := make([][]time.Duration, n)   // arrival times, FIFO
	working := make([][]time.Duration, n) // finish times, FIFO (fixed service time)
	budget := make([]int, n)
	held := make([]int, n) // the leader's last knowledge of max(budget, in progress)
	for i := range budget {
		budget[i] = c.w / n
		held[i] = budget[i]
	}
	var waits []time.Duration
	var res result
	lambda := func(i int) float64 {
		if i == 0 {
			return c.rate * c.hot
		}
		return c.rate * (1 - c.hot) / float64(n-1)
	}
	inForce := func() (s, ip int) {
		for i := range n {
			s += max(budget[i], len(working[i]))
			ip += len(working[i])
		}
		return s, ip
	}
	check := func() {
		s, ip := inForce()
		res.maxInForce = max(res.maxInForce, s)
		res.maxIP = max(res.maxIP, ip)
	}
	steps := int(c.duration / c.step)
	every := 0
	if c.interval > 0 {
		every = int(c.interval / c.step)
	}
	for k := 0; k < steps; k++ {
		now := time.Duration(k) * c.step
		for i := range n {
			for len(working[i]) > 0 && working[i][0] <= now {
				working[i] = working[i][1:]
				res.done++
			}
			for range poisson(rng, lambda(i)*c.step.Seconds()) {
				ready[i] = append(ready[i], now-time.Duration(rng.Float64()*float64(c.step)))
			}
		}
		if every > 0 && k%every == 0 {
			rebalance(c, now, ready, working, budget, held, check)
		}
		for i := range n {
			for len(ready[i]) > 0 && len(working[i]) < budget[i] {
				w := now - ready[i][0]
				ready[i] = ready[i][1:]
				waits = append(waits, w)
				working[i] = append(working[i], now+c.service)
			}
		}
		check()
	}
	end := time.Duration(steps) * c.step
	for i := range n {
		res.backlog += len(ready[i])
		if len(ready[i]) > 0 {
			res.oldest = max(res.oldest, end-ready[i][0])
		}
	}
	slices.Sort(waits)
	if len(waits) > 0 {
		res.p50 = waits[len(waits)*50/100]
		res.p99 = waits[len(waits)*99/100]
		res.maxWait = waits[len(waits)-1]
	}
	return res
}

// rebalance is one round of the leader, as the Rebalancer does it.
func rebalance(c config, now time.Duration, ready, working [][]time.Duration, budget, held []int, check func()) {
	n := len(budget)
	reach := make([]bool, n)
	ds := make([]shardlimit.Demand, n)
	for i := range n {
		reach[i] = !(i == c.down && now >= c.downFrom && now < c.downTo)
		if reach[i] {
			held[i] = max(budget[i], len(working[i]))
			ds[i] = shardlimit.Demand{Ready: min(len(ready[i]), c.w), InProgress: len(working[i])}
		} else {
			ds[i] = shardlimit.Demand{Fixed: true, Held: held[i]}
		}
	}
	target := shardlimit.Allocate(c.w, ds)
	for i := range n {
		if reach[i] && target[i] < budget[i] {
			budget[i] = target[i]
			held[i] = max(budget[i], len(working[i]))
			check()
		}
	}
	raised := shardlimit.Raise(c.w, held, slices.Clone(budget), target)
	for i := range n {
		if reach[i] && raised[i] > budget[i] {
			budget[i] = raised[i]
			held[i] = max(budget[i], len(working[i]))
			check()
		}
	}
}
