package worker

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/workq/workq/workqtype"
)

// Config is the runtime's settings. A zero field takes its default (see
// DefaultConfig), so Config{} is a working configuration; Validate checks
// these fields and nothing else.
type Config struct {
	ID          string        // recorded on claimed rows and in the run archive; default "<hostname>-<pid>"
	Queues      []string      // job_runs queues the registered kinds serve; default ["default"]
	Concurrency int           // handlers running at once, per queue; default 100
	Batch       int           // most rows one claim takes; default 1000
	Lease       time.Duration // lease TTL, at least 1s; heartbeats run every Lease/3; default 30s
	// ExecTimeout is the hard deadline of one handler run: default 5m,
	// negative for none.
	ExecTimeout time.Duration
	Poll        time.Duration // claim poll interval when no notification arrives, at least 10ms; default 1s
	PollOnly    bool          // no LISTEN/NOTIFY (PgBouncer transaction pooling)
	// NoReclaim turns off the claim loops' own reaping of their queue's
	// expired leases before a claim (on by default; the maintenance reaper
	// does it too).
	NoReclaim     bool
	FlushInterval time.Duration // completions are flushed at least this often, at most 1s; default 5ms
	FlushBatch    int           // ... or as soon as this many wait; default 1000
	// DrainTimeout is how long in-flight handlers may finish on Stop:
	// default 10s, negative for none (cancel at once).
	DrainTimeout time.Duration
	RunsDir      string        // per-attempt meta.json and attempt.log ("" = off)
	RetainRuns   time.Duration // with RunsDir: attempt directories are deleted this long after they ended; default 7 days, negative keeps them
	// RetentionInterval is how often RunsDir is pruned; default 1m.
	RetentionInterval time.Duration
	BackoffBase       time.Duration // full-jitter retry backoff random(0, min(base*2^attempt, cap)); default 500ms
	BackoffCap        time.Duration // default 30s

	// QueueConcurrency overrides Concurrency for the queues it names (1 to
	// 10000 each). A key is a queue name and applies to that queue on every
	// table the worker serves: each (table, queue) runs at most that many
	// handlers at once, in this process.
	QueueConcurrency map[string]int
}

// DefaultConfig returns the defaults that a zero Config field takes.
func DefaultConfig() Config {
	return Config{
		ID:                workqtype.DefaultOwner(),
		Queues:            []string{"default"},
		Concurrency:       100,
		Batch:             1000,
		Lease:             30 * time.Second,
		ExecTimeout:       5 * time.Minute,
		Poll:              time.Second,
		FlushInterval:     5 * time.Millisecond,
		FlushBatch:        1000,
		DrainTimeout:      10 * time.Second,
		RetainRuns:        7 * 24 * time.Hour,
		RetentionInterval: time.Minute,
		BackoffBase:       500 * time.Millisecond,
		BackoffCap:        30 * time.Second,
	}
}

// WithDefaults returns c with every zero field set to its default and the
// negative "none" values of ExecTimeout, DrainTimeout and RetainRuns as 0:
// the configuration New runs with.
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
	set := func(v *time.Duration, def time.Duration) {
		switch {
		case *v == 0:
			*v = def
		case *v < 0:
			*v = 0
		}
	}
	if strings.TrimSpace(c.ID) == "" {
		c.ID = d.ID
	}
	if len(c.Queues) == 0 {
		c.Queues = d.Queues
	}
	if c.Concurrency == 0 {
		c.Concurrency = d.Concurrency
	}
	c.QueueConcurrency = maps.Clone(c.QueueConcurrency) // the caller may change its map later
	if c.Batch == 0 {
		c.Batch = d.Batch
	}
	if c.Lease == 0 {
		c.Lease = d.Lease
	}
	set(&c.ExecTimeout, d.ExecTimeout)
	if c.Poll == 0 {
		c.Poll = d.Poll
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = d.FlushInterval
	}
	if c.FlushBatch == 0 {
		c.FlushBatch = d.FlushBatch
	}
	set(&c.DrainTimeout, d.DrainTimeout)
	set(&c.RetainRuns, d.RetainRuns)
	if c.RetentionInterval == 0 {
		c.RetentionInterval = d.RetentionInterval
	}
	if c.BackoffBase == 0 {
		c.BackoffBase = d.BackoffBase
	}
	if c.BackoffCap == 0 {
		c.BackoffCap = max(d.BackoffCap, c.BackoffBase)
	}
	return c
}

// Validate returns every problem with c (after defaults), one per line,
// each wrapping workqtype.ErrInvalid.
func (c Config) Validate() error {
	c = c.WithDefaults()
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, workqtype.Invalid(field, fmt.Sprintf(format, args...)))
	}
	for _, q := range c.Queues {
		if !workqtype.ValidName(q) {
			bad("Queues", "queue %q is not a valid name (%s)", q, workqtype.NameRule)
		}
	}
	if c.Concurrency < 1 || c.Concurrency > 10000 {
		bad("Concurrency", "concurrency must be between 1 and 10000, got %d", c.Concurrency)
	}
	for _, q := range slices.Sorted(maps.Keys(c.QueueConcurrency)) {
		if !workqtype.ValidName(q) {
			bad("QueueConcurrency", "queue %q is not a valid name (%s)", q, workqtype.NameRule)
		}
		if n := c.QueueConcurrency[q]; n < 1 || n > 10000 {
			bad("QueueConcurrency", "concurrency of queue %q must be between 1 and 10000, got %d", q, n)
		}
	}
	if c.Batch < 1 || c.Batch > 10000 {
		bad("Batch", "batch must be between 1 and 10000, got %d", c.Batch)
	}
	if c.Lease < time.Second {
		bad("Lease", "lease must be at least 1s, got %s", c.Lease)
	}
	if c.Poll < 10*time.Millisecond {
		bad("Poll", "poll must be at least 10ms, got %s", c.Poll)
	}
	if c.FlushInterval < 0 || c.FlushInterval > time.Second {
		bad("FlushInterval", "flush interval must be between 0 and 1s, got %s", c.FlushInterval)
	}
	if c.FlushBatch < 1 {
		bad("FlushBatch", "flush batch must be at least 1, got %d", c.FlushBatch)
	}
	if c.BackoffBase <= 0 {
		bad("BackoffBase", "backoff base must be positive, got %s", c.BackoffBase)
	}
	if c.BackoffCap < c.BackoffBase {
		bad("BackoffCap", "backoff cap (%s) must be at least backoff base (%s)", c.BackoffCap, c.BackoffBase)
	}
	if c.RetentionInterval < time.Second {
		bad("RetentionInterval", "retention interval must be at least 1s, got %s", c.RetentionInterval)
	}
	return errors.Join(errs...)
}

// concurrencyOf returns how many handlers queue runs at once, per table:
// its QueueConcurrency, else Concurrency (after defaults).
func (c Config) concurrencyOf(queue string) int {
	if n, ok := c.QueueConcurrency[queue]; ok {
		return n
	}
	if c.Concurrency == 0 {
		return DefaultConfig().Concurrency
	}
	return c.Concurrency
}
