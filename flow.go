package workq

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/shardlist"
	"github.com/workq/workq/internal/worker"
	"github.com/workq/workq/workqtype"
)

// Throttle is a handler's result when the service it calls is overloaded
// (it answered 429 or 503, and retryAfter is its Retry-After): the item
// runs again after retryAfter without using an attempt, and no worker of
// any process starts another item of the same limit key (a job with a
// LimitKey) or else of the same queue until then. After that the key or
// queue starts at an adapted rate, lowered at each throttle and grown back
// step by step as it goes on (docs/concepts.md, "Flow control").
func Throttle(retryAfter time.Duration) error { return worker.Throttle(retryAfter, nil) }

// FlowLimit is one flow-control rule of a queue: at most Rate starts in
// any window of Period, and at most Concurrency items in progress at once,
// counted over every worker of every process. Kind narrows it to one kind
// of the queue (a job kind, a timer topic, an inbox source); PerKey makes
// it every limit key's, each key counted apart (job runs: EnqueueOpts.
// LimitKey). The queue's limit W (SetQueueLimit) and its pause still hold.
//
// On a sharded Client a rule without PerKey is split evenly over the
// shards it is set on (rounded down; a number below the number of shards
// is refused: set each shard's own with Shard); a rule per key is not
// split, because a job with a LimitKey goes to its key's shard.
type FlowLimit struct {
	Table Table  // required
	Queue string // required
	// Shard limits the call to one shard of a sharded Client ("": every
	// shard).
	Shard string
	// Kind is the job kind, timer topic or inbox source the rule is for
	// ("": the whole queue). The outbox takes rules of the whole queue
	// only: its claim keeps its order per partition key and cannot pass a
	// topic over.
	Kind string
	// PerKey counts the rule for each limit key apart (job runs only, Kind
	// empty); jobs without a key are not held by it. On a sharded Client
	// a key's jobs are on its shard unless a DedupKey or a unique key
	// placed one elsewhere, where it is counted apart.
	PerKey bool
	// Rate is the most starts in any window of Period (a sliding window,
	// not aligned to the clock); 0: no rate limit.
	Rate int
	// Period is the rate's window, whole milliseconds up to 24 hours;
	// 0: one second.
	Period time.Duration
	// Concurrency is the most items in progress at once (0: no limit; to
	// start none, PauseKind or PauseQueue). An item whose lease expired
	// counts until it is reaped.
	Concurrency int
}

func (l FlowLimit) rule() lease.FlowRule {
	return lease.FlowRule{Table: l.Table, Queue: l.Queue, Kind: l.Kind, PerKey: l.PerKey, Rate: l.Rate, Period: l.Period, Concurrency: l.Concurrency}
}

// String names the rule's scope: "table/queue", with "[kind]" or "[per key]".
func (l FlowLimit) String() string {
	s := QueueRef{Table: l.Table, Queue: l.Queue, Shard: l.Shard}.String()
	switch {
	case l.PerKey:
		s += "[per key]"
	case l.Kind != "":
		s += "[" + l.Kind + "]"
	}
	return s
}

// perShard is l's rule on each of shards shards: a queue's or kind's Rate
// and Concurrency divided evenly (rounded down, so the shards together
// never start or run more than l says); a rule per key is not divided (a
// key's jobs are on one shard). A number below the number of shards
// cannot be divided so and is refused: set it on each shard (l.Shard).
func (l FlowLimit) perShard(shards int) (lease.FlowRule, error) {
	r := l.rule()
	if l.PerKey || shards <= 1 {
		return r, nil
	}
	for _, n := range []struct {
		field string
		v     *int
	}{{"rate", &r.Rate}, {"concurrency", &r.Concurrency}} {
		if *n.v == 0 {
			continue
		}
		if *n.v < shards {
			return r, workqtype.Invalid(n.field, fmt.Sprintf("%s %d cannot be split over %d shards without going above it: "+
				"set at least %d, or set each shard's own (FlowLimit.Shard)", n.field, *n.v, shards, shards))
		}
		*n.v /= shards
	}
	return r, nil
}

// SetFlowLimit sets the rule l (replacing the rule of the same table,
// queue, kind and PerKey). Claims follow it from their next claim on every
// process: a rule takes effect within a claim, not at a restart. An
// invalid rule is an error wrapping ErrInvalid and changes nothing.
func (c *Client) SetFlowLimit(ctx context.Context, l FlowLimit) (err error) {
	defer c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return err
	}
	if err := l.rule().Check(true); err != nil {
		return fmt.Errorf("workq: set flow limit %s: %w", l, err)
	}
	shards, err := c.shardsOf(l.Shard)
	if err != nil {
		return err
	}
	r, err := l.perShard(len(shards))
	if err != nil {
		return fmt.Errorf("workq: set flow limit %s: %w", l, err)
	}
	answers := shardlist.Each(ctx, shards, 0, func(ctx context.Context, sh shardlist.Shard) (struct{}, error) {
		return struct{}{}, lease.SetFlowRule(ctx, sh.DB, r)
	})
	return unavailable("set flow limit "+l.String(), answers)
}

// RemoveFlowLimit removes the rule l names (its Table, Queue, Shard, Kind
// and PerKey; the numbers are not read) and reports whether there was one.
func (c *Client) RemoveFlowLimit(ctx context.Context, l FlowLimit) (removed bool, err error) {
	defer c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return false, err
	}
	if err := l.rule().Check(false); err != nil {
		return false, fmt.Errorf("workq: remove flow limit %s: %w", l, err)
	}
	shards, err := c.shardsOf(l.Shard)
	if err != nil {
		return false, err
	}
	answers := shardlist.Each(ctx, shards, 0, func(ctx context.Context, sh shardlist.Shard) (bool, error) {
		return lease.RemoveFlowRule(ctx, sh.DB, l.rule())
	})
	for _, a := range answers {
		removed = removed || a.Value
	}
	return removed, unavailable("remove flow limit "+l.String(), answers)
}

// SetFairness says whether claims of the job-run queue q take its limit
// keys in turn, each key an equal share of every claim, so that one key's
// backlog does not starve the others (a queue with a rule per key is fair
// already). Jobs without a key are taken from the head of the queue, as
// one more share.
func (c *Client) SetFairness(ctx context.Context, q QueueRef, fair bool) (err error) {
	_, err = c.onQueue(ctx, q, "set fairness", func(ctx context.Context, db DB, t Table) (bool, error) {
		if t != TableJobRuns && q.Table == "" {
			return false, nil
		}
		return true, lease.SetFair(ctx, db, t, q.Queue, fair)
	})
	return err
}

// KindRef names one kind (job kind, timer topic, inbox source, outbox
// topic) of a queue.
type KindRef struct {
	Table Table // required
	Queue string
	Kind  string
	Shard string // "": every shard
}

func (k KindRef) String() string {
	return QueueRef{Table: k.Table, Queue: k.Queue, Shard: k.Shard}.String() + "[" + k.Kind + "]"
}

// PauseKind stops every worker of every process from starting items of
// one kind of a queue until ResumeKind; the queue's other kinds go on, and
// items in flight finish. It reports whether it paused a running kind. On
// the outbox, whose claim cannot pass a topic over, a paused topic holds
// the whole queue back while it lasts.
func (c *Client) PauseKind(ctx context.Context, k KindRef, opts *ActionOpts) (changed bool, err error) {
	if k.Table == "" {
		return false, fmt.Errorf("workq: pause kind %s: %w", k, QueueRef{Queue: k.Queue}.check(true))
	}
	by := actor(opts)
	return c.onQueue(ctx, QueueRef{Table: k.Table, Queue: k.Queue, Shard: k.Shard}, "pause kind", func(ctx context.Context, db DB, t Table) (bool, error) {
		return lease.PauseKind(ctx, db, t, k.Queue, k.Kind, by.Name, by.Reason)
	})
}

// ResumeKind lets workers start the kind again, and reports whether it
// was paused.
func (c *Client) ResumeKind(ctx context.Context, k KindRef) (changed bool, err error) {
	if k.Table == "" {
		return false, fmt.Errorf("workq: resume kind %s: %w", k, QueueRef{Queue: k.Queue}.check(true))
	}
	return c.onQueue(ctx, QueueRef{Table: k.Table, Queue: k.Queue, Shard: k.Shard}, "resume kind", func(ctx context.Context, db DB, t Table) (bool, error) {
		return lease.ResumeKind(ctx, db, t, k.Queue, k.Kind)
	})
}

// FlowLimitInfo is one rule with its use now (FlowStatus).
type FlowLimitInfo struct {
	FlowLimit           // Shard names the database whose rule it is
	UpdatedAt time.Time // when it was last set
	// Started is how many items the rule's scope started in the window
	// that ends now (a rule per key: the busiest key's).
	Started int
	// InProgress is how many items of the rule's scope are in progress
	// now, also those whose lease expired until they are reaped, as a
	// concurrency counts them (a rule per key: the busiest key's).
	InProgress int
	// ActiveKeys (a rule per key) is how many keys started items in the
	// window.
	ActiveKeys int
	// ThrottledUntil is when the scope's throttle ends (zero: not
	// throttled; a rule per key: see FlowStatus.Throttles).
	ThrottledUntil time.Time
}

// ThrottleInfo is one scope that is throttled (Throttle) or still adapting
// its rate after a throttle.
type ThrottleInfo struct {
	Table Table
	Queue string
	Shard string
	Kind  string // "" unless a kind's
	Key   string // "" unless a limit key's
	// Until is when the throttle ends (zero: it has; the scope adapts).
	Until time.Time
	// Rate is the starts per second the scope may make while it adapts
	// (0: not limited by the adaptation).
	Rate float64
	// StartedLastSecond is how many items the scope started in the last
	// second.
	StartedLastSecond int
}

// KindPauseInfo is one paused kind.
type KindPauseInfo struct {
	KindRef
	PausedAt time.Time
	PausedBy string
	Reason   string
}

// FlowQueueInfo is one queue under flow control.
type FlowQueueInfo struct {
	Table Table
	Queue string
	Shard string
	// Fair is true when claims take the queue's limit keys in turn.
	Fair bool
	// Auto is true for a queue under flow control because of a throttle
	// alone: it leaves it when its adaptation ends.
	Auto bool
}

// FlowStatus is everything under flow control: the queues, their rules
// with their use now, paused kinds, and throttled or adapting scopes,
// sorted by table, queue and shard.
type FlowStatus struct {
	Queues      []FlowQueueInfo
	Limits      []FlowLimitInfo
	PausedKinds []KindPauseInfo
	Throttles   []ThrottleInfo

	// keys is the use of the limit keys Client.WaitsFor read (nil from
	// FlowStatus): what WaitsFor needs to say a key's rule holds it;
	// inProgress the items in progress of the scopes of rules with a
	// concurrency it read (the queue: kind "").
	keys       map[flowKeyRef]lease.FlowKeyUse
	inProgress map[flowScopeRef]int64
}

// flowScopeRef names a queue's scope (kind "": the queue's own) of a
// shard.
type flowScopeRef struct {
	table              Table
	queue, shard, kind string
}

// flowKeyRef names one limit key of a job-run queue of a shard, and the
// window its starts were counted over.
type flowKeyRef struct {
	queue, shard, key string
	period            time.Duration
}

// FlowStatus reads the flow control of every shard.
func (c *Client) FlowStatus(ctx context.Context) (_ FlowStatus, err error) {
	defer c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return FlowStatus{}, err
	}
	answers, err := onEveryShard(ctx, c, "read flow control", func(ctx context.Context, sh shardlist.Shard) (lease.FlowStatus, error) {
		return lease.ReadFlow(ctx, sh.DB)
	})
	if err != nil {
		return FlowStatus{}, err
	}
	var out FlowStatus
	for _, a := range answers {
		out.add(a.Shard, a.Value)
	}
	out.sort()
	return out, nil
}

// add appends one shard's flow status, as the Client's types.
func (s *FlowStatus) add(shard string, ls lease.FlowStatus) {
	for _, q := range ls.Queues {
		s.Queues = append(s.Queues, FlowQueueInfo{Table: Table(q.WorkTable), Queue: q.Queue, Shard: shard, Fair: q.Fair, Auto: q.Auto})
	}
	for _, r := range ls.Rules {
		l := FlowLimitInfo{FlowLimit: FlowLimit{Table: Table(r.WorkTable), Queue: r.Queue, Shard: shard, Kind: r.Kind, PerKey: r.PerKey,
			Period: time.Duration(r.PeriodMs) * time.Millisecond}, UpdatedAt: r.UpdatedAt,
			Started: int(r.Started), InProgress: int(r.InProgress), ActiveKeys: int(r.ActiveKeys)}
		if r.Rate != nil {
			l.Rate = int(*r.Rate)
		} else {
			l.Period = 0
		}
		if r.Concurrency != nil {
			l.Concurrency = int(*r.Concurrency)
		}
		if r.PerKey {
			l.Started = int(r.BusiestKeyStarted)
		}
		if r.ThrottledUntilMs > 0 {
			l.ThrottledUntil = time.UnixMilli(r.ThrottledUntilMs)
		}
		s.Limits = append(s.Limits, l)
	}
	for _, p := range ls.PausedKinds {
		k := KindPauseInfo{KindRef: KindRef{Table: Table(p.WorkTable), Queue: p.Queue, Kind: p.Kind, Shard: shard}, PausedAt: p.PausedAt, PausedBy: p.PausedBy}
		if p.Reason != nil {
			k.Reason = *p.Reason
		}
		s.PausedKinds = append(s.PausedKinds, k)
	}
	for _, t := range ls.Throttles {
		ti := ThrottleInfo{Table: Table(t.WorkTable), Queue: t.Queue, Shard: shard, Kind: t.Kind, Key: t.Key, Rate: t.AdaptRate,
			StartedLastSecond: int(t.StartedLastSecond)}
		if t.ThrottledUntil != nil && time.Until(*t.ThrottledUntil) > 0 {
			ti.Until = *t.ThrottledUntil
		}
		s.Throttles = append(s.Throttles, ti)
	}
}

// sort orders every list by table, queue and shard.
func (s *FlowStatus) sort() {
	key := func(t Table, q, shard string) string { return string(t) + "\x00" + q + "\x00" + shard }
	slices.SortStableFunc(s.Queues, func(a, b FlowQueueInfo) int {
		return strings.Compare(key(a.Table, a.Queue, a.Shard), key(b.Table, b.Queue, b.Shard))
	})
	slices.SortStableFunc(s.Limits, func(a, b FlowLimitInfo) int {
		return strings.Compare(key(a.Table, a.Queue, a.Shard), key(b.Table, b.Queue, b.Shard))
	})
	slices.SortStableFunc(s.PausedKinds, func(a, b KindPauseInfo) int {
		return strings.Compare(key(a.Table, a.Queue, a.Shard), key(b.Table, b.Queue, b.Shard))
	})
	slices.SortStableFunc(s.Throttles, func(a, b ThrottleInfo) int {
		return strings.Compare(key(a.Table, a.Queue, a.Shard), key(b.Table, b.Queue, b.Shard))
	})
}

// WaitsFor says what holds an item of table's queue back now, as the
// item's page and `workq jobs show` print it: each paused kind (on the
// outbox, any paused topic of the queue), each throttle of its scopes
// (queue, kind, limit key), an adapting scope that used its adapted rate
// in the last second, and each rule of the queue or the kind whose rate
// window is used up. kind is its kind (the topic, the inbox's source), key
// its limit key ("": none); shard its database ("": any of s). It reads s
// only, and s from Client.FlowStatus holds no counts of items in progress:
// a rule's concurrency (of the queue, a kind, each key) and a key's rate
// are said only by Client.WaitsFor, which reads them for the item. An
// empty answer means none of these holds it (its queue's pause and W are
// in QueueInfo).
func (s FlowStatus) WaitsFor(table Table, queue, shard, kind, key string) []string {
	var out []string
	same := func(t Table, q, sh string) bool { return t == table && q == queue && (shard == "" || sh == shard) }
	for _, p := range s.PausedKinds {
		switch {
		case !same(p.Table, p.Queue, p.Shard):
		case p.Kind == kind:
			out = append(out, fmt.Sprintf("kind %s paused by %s", kind, p.PausedBy))
		case table == TableOutbox:
			out = append(out, fmt.Sprintf("topic %s of queue %s paused by %s (the outbox's claim cannot pass a topic over)", p.Kind, queue, p.PausedBy))
		}
	}
	for _, t := range s.Throttles {
		if !same(t.Table, t.Queue, t.Shard) || (t.Kind != "" && t.Kind != kind) || (t.Key != "" && t.Key != key) {
			continue
		}
		scope := "queue " + queue
		switch {
		case t.Key != "":
			scope = "key " + key
		case t.Kind != "":
			scope = "kind " + kind
		}
		switch {
		case !t.Until.IsZero():
			out = append(out, fmt.Sprintf("%s throttled until %s", scope, t.Until.UTC().Format(time.RFC3339)))
		case t.Rate > 0 && float64(t.StartedLastSecond) >= math.Floor(t.Rate):
			out = append(out, fmt.Sprintf("%s adapting after a throttle: its rate of %.0f starts/s used (%d in the last second)", scope, t.Rate, t.StartedLastSecond))
		}
	}
	for _, l := range s.Limits {
		if !same(l.Table, l.Queue, l.Shard) || (l.Kind != "" && l.Kind != kind) || (l.PerKey && key == "") {
			continue
		}
		period := l.Period
		if period == 0 {
			period = time.Second
		}
		if !l.PerKey {
			scope := "queue " + queue
			if l.Kind != "" {
				scope = "kind " + kind
			}
			if n, ok := s.inProgress[flowScopeRef{l.Table, l.Queue, l.Shard, l.Kind}]; ok && l.Concurrency > 0 && n >= int64(l.Concurrency) {
				out = append(out, fmt.Sprintf("%s at its concurrency (%d of %d in progress)", scope, n, l.Concurrency))
			}
			if l.Rate > 0 && l.Started >= l.Rate {
				out = append(out, fmt.Sprintf("%s rate limit used (%d of %d per %s)", scope, l.Started, l.Rate, period))
			}
			continue
		}
		u, ok := s.keys[flowKeyRef{queue: l.Queue, shard: l.Shard, key: key, period: period}]
		if !ok {
			continue
		}
		if l.Concurrency > 0 && u.InProgress >= int64(l.Concurrency) {
			out = append(out, fmt.Sprintf("key %s at its concurrency (%d of %d in progress)", key, u.InProgress, l.Concurrency))
		}
		if l.Rate > 0 && u.Started >= int64(l.Rate) {
			out = append(out, fmt.Sprintf("key %s rate limit used (%d of %d per %s)", key, u.Started, l.Rate, period))
		}
	}
	return out
}

// declaredFlowLimits are the flow limits declared in code: cfg's and its
// workers' (WorkerWithFlowLimits).
func declaredFlowLimits(cfg Config) []FlowLimit {
	out := slices.Clone(cfg.FlowLimits)
	if cfg.Workers != nil {
		out = append(out, cfg.Workers.flow...)
	}
	return out
}

// validateFlowLimits checks Config.FlowLimits.
func validateFlowLimits(ls []FlowLimit) error {
	var errs []error
	for i, l := range ls {
		if err := l.rule().Check(true); err != nil {
			errs = append(errs, fmt.Errorf("FlowLimits[%d] (%s): %w", i, l, err))
		}
	}
	return errors.Join(errs...)
}

// applyFlowLimits sets the flow limits declared in code on every shard, at
// Start. A Client of one database fails Start when it cannot; a sharded
// Client starts with a shard down (as it does for everything else), sets
// the limits on the shards that answer within declaredLimitsWait and logs
// the others, which get them at a later Start (or with workq flow set).
func (c *Client) applyFlowLimits(ctx context.Context) error {
	if len(c.flow) == 0 {
		return nil
	}
	if c.set == nil {
		for _, l := range c.flow {
			if err := c.SetFlowLimit(ctx, l); err != nil {
				return fmt.Errorf("workq: start: declared flow limit %s: %w", l, err)
			}
		}
		return nil
	}
	shards, _ := c.shardsOf("")
	answers := shardlist.Each(ctx, shards, declaredLimitsWait, func(ctx context.Context, sh shardlist.Shard) (struct{}, error) {
		for _, l := range c.flow {
			r, err := l.perShard(len(shards))
			if err != nil {
				return struct{}{}, err
			}
			if err := lease.SetFlowRule(ctx, sh.DB, r); err != nil {
				return struct{}{}, fmt.Errorf("declared flow limit %s: %w", l, err)
			}
		}
		return struct{}{}, nil
	})
	for _, a := range answers {
		if a.Err != nil {
			if errors.Is(a.Err, ErrInvalid) {
				return fmt.Errorf("workq: start: shard %s: %w", a.Shard, a.Err)
			}
			c.log.Warn("workq: declared flow limits not set on a shard that did not answer; they are set at a later Start",
				"shard", a.Shard, "err", a.Err)
		}
	}
	return nil
}

// declaredLimitsWait bounds how long a sharded Client's Start waits for a
// shard to take its declared flow limits.
const declaredLimitsWait = 5 * time.Second
