package test

// The history checker's flow-control rules (issue 30): a rate limit of a
// queue in every sliding window, and a concurrency limit per limit key.

import (
	"sort"
	"strings"
	"time"
)

// flowRate is a queue's rate rule as the checker reads it: at most Rate
// starts in any window of Period.
type flowRate struct {
	Rate   int
	Period time.Duration
}

// checkRate: the claims of the queue, at the time the database logs them
// (the claim statement's now(): the run archive's started_at, what the flow
// log counts), never put more than r.Rate starts in a window of r.Period.
// Every window that starts at a claim is checked (the window with the most
// starts always begins at one), half-open [start, start+Period) as the
// claim counts them. It returns the most starts any window had.
func (h *history) checkRate(qk string, r flowRate, add func(*itemHistory, string, ...any)) int {
	table, queue, _ := strings.Cut(qk, "/")
	type start struct {
		at time.Time
		it *itemHistory
	}
	var starts []start
	for _, it := range h.Items {
		if it.Table != table || it.Queue != queue {
			continue
		}
		for _, l := range it.Leases {
			starts = append(starts, start{l.Events[0].StmtAt, it})
		}
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i].at.Before(starts[j].at) })
	most, j := 0, 0
	for i, s := range starts {
		for j < len(starts) && starts[j].at.Before(s.at.Add(r.Period)) {
			j++
		}
		n := j - i
		if n > r.Rate && n > most {
			add(s.it, "%s: %d starts in the %s from %s, limit %d", qk, n, r.Period, ts(s.at), r.Rate)
		}
		most = max(most, n)
	}
	return most
}

// checkKeyConcurrency: the items of each limit key of the queue are never
// more than n in progress at once, in the database (a lease from its claim
// to its end, a completion or a reap: an expired lease still counts until
// it is reaped, as the claim counts it) nor at the receiver (handler runs).
// The lease events are stamped with clock_timestamp() inside the claim and
// the end, so a claim that saw an end committed is stamped after it. It
// returns the most keys seen in progress at once (that the keys ran side
// by side, each held to n).
func (h *history) checkKeyConcurrency(qk string, n int, eps time.Duration, add func(*itemHistory, string, ...any)) int {
	table, queue, _ := strings.Cut(qk, "/")
	byKey := map[string][]*itemHistory{}
	for _, it := range h.Items {
		if it.Table == table && it.Queue == queue && it.Key != nil {
			byKey[*it.Key] = append(byKey[*it.Key], it)
		}
	}
	never := time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	leaseEnd := func(l *leaseSpan) time.Time {
		if l.End != nil {
			return *l.End
		}
		return never
	}
	var all []span
	for key, items := range byKey {
		leases, handlers := spansOf(items, eps, leaseEnd)
		all = append(all, leases...)
		for _, c := range []struct {
			what  string
			spans []span
		}{{"in progress", leases}, {"at the receiver", handlers}} {
			worst := 0
			for _, s := range c.spans {
				in := 0
				for _, o := range c.spans {
					if !o.start.After(s.start) && o.end.After(s.start) {
						in++
					}
				}
				if in > n && in > worst {
					worst = in
					add(s.it, "key %s/%s: %d %s at %s, limit %d", qk, key, in, c.what, ts(s.start), n)
				}
			}
		}
	}
	// the most distinct keys in progress at one claim
	most := 0
	for _, s := range all {
		keys := map[string]bool{}
		for _, o := range all {
			if !o.start.After(s.start) && o.end.After(s.start) {
				keys[*o.it.Key] = true
			}
		}
		most = max(most, len(keys))
	}
	return most
}
