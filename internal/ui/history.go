package ui

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/outage"
)

// Defaults of a Sampler.
const (
	DefaultSampleInterval = 10 * time.Second
	DefaultHistory        = time.Hour
	// DefaultSettle is how far behind the database clock the sampler counts
	// ended attempts: an attempt's finished_at is its transaction's start,
	// so one that commits a little later still lands in a later interval.
	DefaultSettle = 2 * time.Second
	maxQueues     = 500 // most (table, queue)s the history keeps
	// DefaultShardTimeout bounds one shard's sampling round (and the
	// dashboard's reads of one shard): a shard that is down costs a page
	// at most this long.
	DefaultShardTimeout = 3 * time.Second
)

// SampleSource is where one shard's samples come from: its depth, its
// ended attempts and its clock (as SamplerOptions' of one database).
type SampleSource struct {
	Name  string
	Depth func(ctx context.Context) ([]workq.QueueDepth, error)
	Ended func(ctx context.Context, after, until time.Time) ([]workq.EndedCount, error)
	Clock func(ctx context.Context) (time.Time, error)
}

// ClientSources are the sample sources of every shard of c (one for a
// Client of one database): the Client's QueueDepths, EndedBetween and
// DatabaseTime on each shard.
func ClientSources(c *workq.Client) ([]SampleSource, error) {
	var out []SampleSource
	for _, name := range c.Shards() {
		sc, err := c.Shard(name)
		if err != nil {
			return nil, err
		}
		out = append(out, SampleSource{Name: name, Depth: sc.QueueDepths, Ended: sc.EndedBetween, Clock: sc.DatabaseTime})
	}
	return out, nil
}

// ShardState is one shard's part in the latest sampling round.
type ShardState struct {
	Name string
	// Err is why the shard was left out of the latest round (nil: it was
	// sampled).
	Err error
	// SampledAt is the shard's clock at its last successful round (zero:
	// none yet); the counts are of that round.
	SampledAt                            time.Time
	Queues                               int // (table, queue)s with items
	Ready, Scheduled, InProgress, Failed int64
}

// SamplerOptions configure a Sampler. Client is where the samples come
// from (api.New passes its Client): its QueueDepths, EndedBetween and
// DatabaseTime, of every shard of a sharded Client. Depth, Ended and
// Clock are sampling sources of one database injected instead, so that
// another one (a metrics cache, a test's numbers) can stand in; Shards,
// instead, are the sources of every shard of a sharded workq: each sample
// is their sum. Set one of Client, Depth+Ended+Clock and Shards.
type SamplerOptions struct {
	Client *workq.Client
	Depth  func(ctx context.Context) ([]workq.QueueDepth, error)
	Ended  func(ctx context.Context, after, until time.Time) ([]workq.EndedCount, error)
	Clock  func(ctx context.Context) (time.Time, error)
	Logger *slog.Logger

	// Shards, when set (Depth, Ended and Clock unset), are read at once,
	// each bounded by ShardTimeout (0: DefaultShardTimeout), and summed: a
	// shard that fails or does not answer in time is left out of the
	// sample (ShardStates says so), and the others are sampled. Only when
	// every shard fails does the round fail.
	Shards       []SampleSource
	ShardTimeout time.Duration

	Interval time.Duration // between samples (0: 10s)
	History  time.Duration // how much the ring buffer keeps (0: 1h)
	Settle   time.Duration // lag of the ended-attempt count behind the clock (0: 2s; negative: none)
}

// QueueKey names one (table, queue).
type QueueKey struct {
	Table workq.Table
	Queue string
}

// QueueSample is one (table, queue) in one sample: its backlog at the
// sample's time and the attempts that ended since the previous sample, by
// outcome.
type QueueSample struct {
	Ready, Scheduled, InProgress, Failed int64
	OldestDue                            time.Duration
	Ended                                map[string]int64 // outcome -> attempts
}

// Sample is what one sampling round read.
type Sample struct {
	At     time.Time     // the database clock when the depth was read
	Span   time.Duration // the interval the Ended counts cover (0 for the first sample)
	Queues map[QueueKey]QueueSample
}

// Sampler keeps the dashboard's history: every Interval it reads the depth
// of every (table, queue) (from the partial indexes: its cost is the
// backlog) and counts the attempts that ended since the previous round
// (one range of the run archive's finished_at index: each attempt is
// counted once), in a ring buffer of History/Interval samples. The history
// lives in memory: it starts empty when the process starts.
type Sampler struct {
	o      SamplerOptions
	log    *slog.Logger
	outage *outage.Log // its rounds' database failures, as one outage
	poke   chan struct{}

	sources []SampleSource // Shards, or the one of Depth, Ended and Clock
	sharded bool

	mu      sync.Mutex
	ring    []Sample    // oldest first once full; len <= cap
	next    int         // where the next sample goes when the ring is full
	last    []time.Time // per source: upper bound of its last ended-attempt count
	lastErr error
	states  []ShardState // per source, of the latest round (sharded only)
}

// NewSampler returns a Sampler; Run samples.
func NewSampler(o SamplerOptions) (*Sampler, error) {
	if o.Client != nil {
		if o.Depth != nil || o.Ended != nil || o.Clock != nil || len(o.Shards) > 0 {
			return nil, errors.New("ui: SamplerOptions takes Client, or Shards, or Depth, Ended and Clock, not several")
		}
		src, err := ClientSources(o.Client)
		if err != nil {
			return nil, fmt.Errorf("ui: %w", err)
		}
		if len(src) == 1 {
			o.Depth, o.Ended, o.Clock = src[0].Depth, src[0].Ended, src[0].Clock
		} else {
			o.Shards = src
		}
	}
	sources := o.Shards
	if len(sources) == 0 {
		if o.Depth == nil || o.Ended == nil || o.Clock == nil {
			return nil, errors.New("ui: SamplerOptions needs Depth, Ended and Clock")
		}
		sources = []SampleSource{{Depth: o.Depth, Ended: o.Ended, Clock: o.Clock}}
	} else if o.Depth != nil || o.Ended != nil || o.Clock != nil {
		return nil, errors.New("ui: SamplerOptions takes Shards or Depth, Ended and Clock, not both")
	}
	for _, src := range o.Shards {
		if src.Depth == nil || src.Ended == nil || src.Clock == nil {
			return nil, fmt.Errorf("ui: SamplerOptions: shard %q needs Depth, Ended and Clock", src.Name)
		}
	}
	if o.ShardTimeout == 0 {
		o.ShardTimeout = DefaultShardTimeout
	}
	if o.ShardTimeout < 0 {
		return nil, fmt.Errorf("ui: shard timeout %s must not be negative", o.ShardTimeout)
	}
	if o.Interval == 0 {
		o.Interval = DefaultSampleInterval
	}
	if o.History == 0 {
		o.History = DefaultHistory
	}
	if o.Interval < 0 || o.History < o.Interval {
		return nil, fmt.Errorf("ui: sample interval %s must be positive and at most the history %s", o.Interval, o.History)
	}
	if o.Settle == 0 {
		o.Settle = DefaultSettle
	}
	if o.Settle < 0 {
		o.Settle = 0
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	n := int(o.History / o.Interval)
	s := &Sampler{o: o, log: o.Logger, outage: outage.New(o.Logger, "dashboard sampler"), poke: make(chan struct{}, 1), ring: make([]Sample, 0, n), sources: sources,
		sharded: len(o.Shards) > 0, last: make([]time.Time, len(sources))}
	if s.sharded {
		for _, src := range sources {
			s.states = append(s.states, ShardState{Name: src.Name})
		}
	}
	return s, nil
}

// Interval is the time between samples.
func (s *Sampler) Interval() time.Duration { return s.o.Interval }

// warmUpEvery is how often Run samples during its first Interval.
const warmUpEvery = time.Second

// Run samples at once, then every Interval (and when poked), until ctx
// ends. During its first Interval it samples every second (warmUpEvery, or
// Interval if shorter): a first sample taken just before work arrived (the
// API started before the enqueues, as in workq run) or that failed (the
// schema migrated a moment later) would otherwise leave the overview empty
// for a whole Interval while the API already shows the work. These extra
// samples are the oldest, so the ring drops them first and the window is
// unchanged. A failed round is logged and retried at the next tick.
func (s *Sampler) Run(ctx context.Context) {
	t := time.NewTicker(s.o.Interval)
	defer t.Stop()
	fast := min(warmUpEvery, s.o.Interval)
	warmEnd := time.Now().Add(s.o.Interval)
	for {
		switch err := s.SampleOnce(ctx); {
		case err == nil:
			s.outage.OK()
		case ctx.Err() != nil, s.outage.Failed(err):
		default:
			s.log.Warn("dashboard sampler", "err", err)
		}
		var warm <-chan time.Time
		if fast < s.o.Interval && time.Until(warmEnd) > fast {
			warm = time.After(fast)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.poke:
		case <-warm:
		}
	}
}

// Poke asks Run for a sample now (after an action the dashboard made),
// without waiting for it.
func (s *Sampler) Poke() {
	select {
	case s.poke <- struct{}{}:
	default:
	}
}

// sourceRound is what one source's part of a round read.
type sourceRound struct {
	now   time.Time
	depth []workq.QueueDepth
	ended []workq.EndedCount
	until time.Time // the new upper bound of its ended-attempt count
	span  time.Duration
	err   error
}

// sampleSource reads one source: its clock, its depth and the attempts
// that ended since its previous round.
func (s *Sampler) sampleSource(ctx context.Context, i int) (r sourceRound) {
	src := s.sources[i]
	if r.now, r.err = src.Clock(ctx); r.err != nil {
		return r
	}
	if r.depth, r.err = src.Depth(ctx); r.err != nil {
		return r
	}
	r.until = r.now.Add(-s.o.Settle)
	s.mu.Lock()
	after := s.last[i]
	s.mu.Unlock()
	if !after.IsZero() && r.until.After(after) {
		if r.ended, r.err = src.Ended(ctx, after, r.until); r.err != nil {
			return r
		}
		r.span = r.until.Sub(after)
	}
	return r
}

// SampleOnce takes one sample: of every shard, at once and each bounded
// by ShardTimeout, when sharded.
func (s *Sampler) SampleOnce(ctx context.Context) error {
	rounds := make([]sourceRound, len(s.sources))
	if !s.sharded {
		rounds[0] = s.sampleSource(ctx, 0)
	} else {
		var wg sync.WaitGroup
		for i := range s.sources {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sctx, cancel := context.WithTimeout(ctx, s.o.ShardTimeout)
				defer cancel()
				rounds[i] = s.sampleSource(sctx, i)
			}()
		}
		wg.Wait()
	}
	var errs []error
	smp := Sample{Queues: map[QueueKey]QueueSample{}}
	sampled := false
	for i, r := range rounds {
		if r.err != nil {
			if s.sharded {
				r.err = fmt.Errorf("shard %s: %w", s.sources[i].Name, r.err)
			}
			errs = append(errs, r.err)
			continue
		}
		if !sampled {
			smp.At = r.now // the first shard that answered tells the time
			sampled = true
		}
		smp.Span = max(smp.Span, r.span)
		for _, d := range r.depth {
			k := QueueKey{d.Table, d.Queue}
			q, ok := smp.Queues[k]
			if !ok && len(smp.Queues) >= maxQueues {
				continue
			}
			q.Ready += d.Ready
			q.Scheduled += d.Scheduled
			q.InProgress += d.InProgress
			q.Failed += d.Failed
			q.OldestDue = max(q.OldestDue, d.OldestReadyAge)
			smp.Queues[k] = q
		}
		for _, e := range r.ended {
			k := QueueKey{e.Table, e.Queue}
			q, ok := smp.Queues[k]
			if !ok && len(smp.Queues) >= maxQueues {
				continue
			}
			if q.Ended == nil {
				q.Ended = map[string]int64{}
			}
			q.Ended[e.Outcome] += e.Count
			smp.Queues[k] = q
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sharded {
		for i, r := range rounds {
			st := &s.states[i]
			st.Err = r.err
			if r.err != nil {
				continue
			}
			st.SampledAt, st.Queues = r.now, len(r.depth)
			st.Ready, st.Scheduled, st.InProgress, st.Failed = 0, 0, 0, 0
			for _, d := range r.depth {
				st.Ready += d.Ready
				st.Scheduled += d.Scheduled
				st.InProgress += d.InProgress
				st.Failed += d.Failed
			}
		}
	}
	if !sampled {
		s.lastErr = errs[0]
		if len(errs) > 1 {
			s.lastErr = errors.Join(errs...)
		}
		return s.lastErr
	}
	for i, r := range rounds {
		if r.err == nil && (s.last[i].IsZero() || r.until.After(s.last[i])) {
			s.last[i] = r.until
		}
	}
	s.lastErr = nil
	if len(s.ring) < cap(s.ring) {
		s.ring = append(s.ring, smp)
	} else {
		s.ring[s.next] = smp
		s.next = (s.next + 1) % len(s.ring)
	}
	if len(errs) > 0 {
		s.log.Warn("dashboard sampler: shards left out of this sample", "err", errors.Join(errs...))
	}
	return nil
}

// ShardStates is every shard's part in the latest round (nil unless the
// Sampler has Shards).
func (s *Sampler) ShardStates() []ShardState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.states)
}

// Samples returns the samples held, oldest first, and the error of the
// last round (nil when it succeeded).
func (s *Sampler) Samples() ([]Sample, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Sample, 0, len(s.ring))
	out = append(out, s.ring[s.next:]...)
	out = append(out, s.ring[:s.next]...)
	return out, s.lastErr
}

// Latest returns the newest sample (false when there is none yet).
func (s *Sampler) Latest() (Sample, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ring) == 0 {
		return Sample{}, false
	}
	i := len(s.ring) - 1
	if len(s.ring) == cap(s.ring) {
		i = (s.next + len(s.ring) - 1) % len(s.ring)
	}
	return s.ring[i], true
}

// Outcomes the charts draw, in order; the others (snoozed, released) are
// summed as "other".
var chartOutcomes = []string{"done", "retry", "failed", "expired", "other"}

// Series is the history of one selection (one (table, queue), or all of
// them) as the charts draw it: per sample, the backlog and the attempts
// that ended per second by outcome.
type Series struct {
	Interval   float64              `json:"interval_seconds"`
	Times      []int64              `json:"times"` // unix milliseconds of each sample
	Ready      []int64              `json:"ready"`
	InProgress []int64              `json:"in_progress"`
	Rates      map[string][]float64 `json:"rates"` // outcome -> attempts ended per second in the interval before each sample
	Outcomes   []string             `json:"outcomes"`
	Queues     []QueueKey           `json:"-"`
}

// SeriesOf returns the history of the samples for the queues match accepts.
func SeriesOf(samples []Sample, interval time.Duration, match func(QueueKey) bool) Series {
	out := Series{Interval: interval.Seconds(), Times: []int64{}, Ready: []int64{}, InProgress: []int64{},
		Rates: map[string][]float64{}, Outcomes: chartOutcomes}
	for _, o := range chartOutcomes {
		out.Rates[o] = []float64{}
	}
	seen := map[QueueKey]bool{}
	for _, smp := range samples {
		var ready, inProgress int64
		ended := map[string]int64{}
		for k, q := range smp.Queues {
			if !match(k) {
				continue
			}
			seen[k] = true
			ready += q.Ready
			inProgress += q.InProgress
			for o, n := range q.Ended {
				if !slices.Contains(chartOutcomes[:4], o) {
					o = "other"
				}
				ended[o] += n
			}
		}
		out.Times = append(out.Times, smp.At.UnixMilli())
		out.Ready = append(out.Ready, ready)
		out.InProgress = append(out.InProgress, inProgress)
		for _, o := range chartOutcomes {
			rate := 0.0
			if smp.Span > 0 {
				rate = float64(ended[o]) / smp.Span.Seconds()
			}
			out.Rates[o] = append(out.Rates[o], rate)
		}
	}
	for k := range seen {
		out.Queues = append(out.Queues, k)
	}
	sort.Slice(out.Queues, func(i, j int) bool { return keyLess(out.Queues[i], out.Queues[j]) })
	return out
}

func keyLess(a, b QueueKey) bool {
	if a.Table != b.Table {
		return a.Table < b.Table
	}
	return a.Queue < b.Queue
}

// endedIn sums, per (table, queue) and outcome, the attempts that ended in
// the samples held (the history window).
func endedIn(samples []Sample) map[QueueKey]map[string]int64 {
	out := map[QueueKey]map[string]int64{}
	for _, smp := range samples {
		for k, q := range smp.Queues {
			for o, n := range q.Ended {
				if out[k] == nil {
					out[k] = map[string]int64{}
				}
				out[k][o] += n
			}
		}
	}
	return out
}
