package workq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/inbox"
	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/shardlimit"
	"github.com/workq/workq/internal/worker"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/timers"
	"github.com/workq/workq/workqtype"
)

// DefaultShard is the shard name of a Client made by NewClient, and of
// items whose shard nobody named (the single-database API and CLI).
const DefaultShard = "default"

// Shard is one PostgreSQL database of a sharded Client: its name, stable
// for as long as the database holds work (keys are placed by it), and a
// pool on it. Every shard must be migrated to the Client's schema.
type Shard struct {
	Name string
	Pool *pgxpool.Pool
}

// ShardingConfig configures how a sharded Client's workers drain its
// shards (Config.Sharding). A Client of NewShardedClient's one shard
// ignores DrainFirst and runs the GlobalLimits leader over its one shard
// (whose budget is then the limit); NewClient ignores it.
type ShardingConfig struct {
	// DrainFirst orders the shards as NewShardedClient got them: the
	// workers claim a (table, queue) of a shard only while every earlier
	// shard has nothing ready in it. Put a shard you move work off first,
	// and it is emptied before the others are served (new keys keep going
	// to it until it leaves the list). Default: every shard is served at
	// once, its share of the handler slots weighted by its backlog.
	DrainFirst bool
	// GlobalLimits are global limits W over every shard: at most W items
	// of a (table, queue) in progress across all of them. Each shard's
	// queue limit holds a budget, and a leader elected on the first shard
	// moves the budgets towards each shard's backlog every LimitInterval,
	// lowering before raising so that the budgets in force never sum above
	// W (package shardlimit; docs/scale-out.md). The leader runs with the
	// Client's maintenance (not when Maintenance.Disabled; `workq
	// shard-limit` runs it on its own). A limit set with `workq limit set`
	// on one shard is that shard's budget and is overwritten by the leader.
	GlobalLimits []GlobalLimit
	// LimitInterval is how often the leader moves the budgets (default
	// shardlimit.DefaultInterval, 1s).
	LimitInterval time.Duration
}

// shardSet is the shards of a sharded Client's front.
type shardSet struct {
	shards []*Client // in the order given (DrainFirst's)
	names  []string
	byName map[string]*Client
	rr     atomic.Uint64 // round-robin of unkeyed work
	shared *worker.Shared
}

// globalLimits is the leader of ShardingConfig.GlobalLimits a Client
// runs (r's Start and Stop).
type globalLimits struct {
	r  *shardlimit.Rebalancer
	of []shardlimit.Limit
}

// newGlobalLimits returns the leader of cfg's GlobalLimits over shards
// (nil without them, or when the maintenance is disabled).
func newGlobalLimits(shards []*Client, cfg Config, log *slog.Logger) (*globalLimits, error) {
	if len(cfg.Sharding.GlobalLimits) == 0 || cfg.Maintenance.Disabled {
		return nil, nil
	}
	ls := make([]shardlimit.Shard, len(shards))
	for i, sc := range shards {
		ls[i] = shardlimit.Shard{Name: sc.name, DB: sc.db}
	}
	r, err := shardlimit.New(ls, shardlimit.Options{Limits: limits(cfg.Sharding.GlobalLimits), Interval: cfg.Sharding.LimitInterval,
		Owner: cfg.ID, Logger: log.With("component", "shardlimit")})
	if err != nil {
		return nil, fmt.Errorf("workq: Sharding.GlobalLimits: %w", err)
	}
	return &globalLimits{r: r, of: limits(cfg.Sharding.GlobalLimits)}, nil
}

// zeroUnset gives every shard that answers (ok[i]) without a budget for a
// global limit the budget 0, before any worker claims: a shard without one
// would claim without limit until the leader's first round. A shard
// unreachable now is written by the leader when it answers.
func (g *globalLimits) zeroUnset(ctx context.Context, shards []*Client, ok []bool, log *slog.Logger) {
	for i, sc := range shards {
		if !ok[i] {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, shardCheckBound)
		err := shardlimit.ZeroUnset(cctx, sc.db, g.of)
		cancel()
		if err != nil {
			log.Warn("shard: setting the missing budgets of the global limits to 0 failed", "shard", sc.name, "err", err)
		}
	}
}

// start runs the leader until stopAndWait. It cannot fail: the Client
// starts once, and checked ctx.
func (g *globalLimits) start(ctx context.Context) { _ = g.r.Start(ctx) }

// stopAndWait ends the leader's Run and returns the wait for it, at most
// maintenanceStopBound, for the caller to call once it has stopped the
// rest: the leader releases its lock within its shard timeout; a budget it
// wrote stays in force for the next leader. Stop's ctx does not cut it
// short, so the lock is released before Stop returns.
func (g *globalLimits) stopAndWait() (wait func()) {
	if g == nil {
		return func() {}
	}
	stopped, err := g.r.RequestStop()
	if err != nil { // never started
		return func() {}
	}
	return func() {
		t := time.NewTimer(maintenanceStopBound)
		defer t.Stop()
		select {
		case <-stopped:
		case <-t.C:
		}
	}
}

// NewShardedClient returns a Client over several PostgreSQL databases
// (shards) that serve one logical queue. Each shard has its own workers'
// claim loops, one LISTEN connection and its own maintenance leader; the
// workers of every shard draw from one set of handler slots
// (Config.MaxWorkers and QueueConfig.MaxWorkers per queue are the total over the shards,
// shared by backlog, or DrainFirst).
//
// Work is placed on a shard by rendezvous hashing of its key (ShardOf):
// the dedup key or unique key of a job, the partition key of an outbox
// message (else its MessageID when the caller set one: OutboxKey), the
// (source, message id) of an inbox message, the name of a schedule. So
// every guarantee about a key (per-key order, de-duplication, uniqueness)
// holds: a key never leaves its shard. Work without a key (and timers)
// goes round-robin. A handler's Job.Shard (Message.Shard) names its
// item's shard. What runs in the caller's transaction runs on
// the database of that transaction: name it with Shard (client.Shard(name)
// returns the Client of one shard, whose ...Tx methods, Cancel and
// CancelTimer work as a single-database Client's). Results carry the shard
// (Enqueued.Shard, outbox.Sent.Shard...): an item is (shard, id).
//
// Names are 1-128 of A-Z a-z 0-9 _ . : -, unique; pools distinct. With one
// shard it is NewClient with that shard's name. Bad input is an error
// wrapping ErrInvalid.
func NewShardedClient(shards []Shard, cfg Config) (*Client, error) {
	if err := checkShards(shards); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if len(shards) == 1 {
		// NewClient with the shard's name, which runs the leader of
		// GlobalLimits over its one shard (its budget is the limit).
		c, err := newClient(shards[0].Pool, cfg, shards[0].Name, nil, 0)
		if err != nil {
			return nil, err
		}
		if c.limits, err = newGlobalLimits([]*Client{c}, cfg, log); err != nil {
			return nil, err
		}
		return c, nil
	}
	m, err := clientMetrics(cfg) // one set for every shard
	if err != nil {
		return nil, fmt.Errorf("workq config: MetricsRegisterer: %w", err)
	}
	set := &shardSet{byName: map[string]*Client{},
		shared: worker.NewShared(worker.SharedOptions{DrainFirst: cfg.Sharding.DrainFirst})}
	for i, sh := range shards {
		scfg := cfg
		scfg.Logger = log.With("shard", sh.Name)
		if m != nil {
			// Each shard's leader has gauges of its own (shard=name).
			scfg.MetricsRegisterer, scfg.Maintenance.observer = m, m.MaintenanceOf(sh.Name)
		}
		c, err := newClient(sh.Pool, scfg, sh.Name, set.shared, i)
		if err != nil {
			return nil, fmt.Errorf("shard %s: %w", sh.Name, err)
		}
		c.view = true
		set.shards = append(set.shards, c)
		set.names = append(set.names, sh.Name)
		set.byName[sh.Name] = c
	}
	limits, err := newGlobalLimits(set.shards, cfg, log)
	if err != nil {
		return nil, err
	}
	first := set.shards[0]
	return &Client{pool: first.pool, rw: first.rw, db: first.db, log: log, jobs: first.jobs, outbox: first.outbox, inbox: first.inbox,
		timers: first.timers, sched: first.sched, enqueueMW: first.enqueueMW, run: first.run, set: set, limits: limits,
		ev: newClientEvents(log), kinds: first.kinds,
		periodic: first.periodic, flow: first.flow}, nil
}

func checkShards(shards []Shard) error {
	if len(shards) == 0 {
		return workqtype.Invalid("shards", "a sharded Client needs at least one shard")
	}
	var errs []error
	names := map[string]bool{}
	pools := map[*pgxpool.Pool]string{}
	for i, sh := range shards {
		switch {
		case !workqtype.ValidName(sh.Name):
			errs = append(errs, workqtype.Invalid("shards", fmt.Sprintf("shard %d: name %q is not a valid name (%s)", i, sh.Name, workqtype.NameRule)))
		case names[sh.Name]:
			errs = append(errs, workqtype.Invalid("shards", fmt.Sprintf("shard %d: name %q is given twice", i, sh.Name)))
		}
		names[sh.Name] = true
		switch {
		case sh.Pool == nil:
			errs = append(errs, workqtype.Invalid("shards", fmt.Sprintf("shard %q has no pool", sh.Name)))
		case pools[sh.Pool] != "":
			errs = append(errs, workqtype.Invalid("shards", fmt.Sprintf("shards %q and %q have the same pool", pools[sh.Pool], sh.Name)))
		default:
			pools[sh.Pool] = sh.Name
		}
	}
	return errors.Join(errs...)
}

// ShardName returns the Client's shard: DefaultShard for NewClient, the
// shard's name for a Client of one shard, "" for a sharded Client.
func (c *Client) ShardName() string { return c.name }

// Shards returns the names of the Client's shards, in order.
func (c *Client) Shards() []string {
	if c.set == nil {
		return []string{c.name}
	}
	return slices.Clone(c.set.names)
}

// Shard returns the Client of the shard called name: its ...Tx methods
// run in a transaction on that shard's database, its Cancel, CancelTimer
// and Pool are that shard's. A Client of one shard returns itself for its
// own name (and for ""). It is part of the sharded Client: start and stop
// that one. An unknown name is an error wrapping ErrInvalid.
func (c *Client) Shard(name string) (*Client, error) {
	if c.set == nil {
		if name == c.name || name == "" {
			return c, nil
		}
		return nil, workqtype.Invalid("shard", fmt.Sprintf("no shard %q (the Client's one shard is %q)", name, c.name))
	}
	if s, ok := c.set.byName[name]; ok {
		return s, nil
	}
	return nil, workqtype.Invalid("shard", fmt.Sprintf("no shard %q (the shards are %q)", name, c.set.names))
}

// ShardFor returns the shard a key goes to (see NewShardedClient): to open
// the transaction of keyed work on its shard. The keys are those a Client
// routes by: a job's DedupKey, an outbox PartitionKey, OutboxKey(partition
// key, message id), InboxKey(source, id), ScheduleKey(name) (a job's:
// ShardForArgs); other strings (a tenant, an account) are placed
// the same way, for an application that keys its own data so.
func (c *Client) ShardFor(key string) string {
	if c.set == nil {
		return c.name
	}
	return ShardOf(c.set.names, key)
}

// ShardForArgs returns the shard Enqueue puts a job of args and opts on:
// the shard of its route key, its DedupKey, else for a unique job its
// unique key without the period (the key internal to Unique), else its
// LimitKey (LimitKey(key): all the jobs of a limit key on one shard, whose
// per-key limits then count them all; a job with a dedup or unique key
// goes where that key does, whatever its limit key). Open the
// transaction of EnqueueTx on it (client.Shard(name)) so that the job's
// key is checked where the front's Enqueue checks it. A job without a key
// has no shard of its own: it returns "" and nil (Enqueue spreads such
// jobs round-robin; any shard's EnqueueTx may take one). A Client that is
// not sharded returns its ShardName. Enqueue middleware is not run: a
// middleware that changes a job's key changes its shard. An invalid job
// is an error wrapping ErrInvalid, as Enqueue's.
func (c *Client) ShardForArgs(args Args, opts *EnqueueOpts) (string, error) {
	j, err := job(args, opts)
	if err != nil {
		return "", err
	}
	k, err := c.jobs.RouteKey(j)
	if err != nil {
		return "", err
	}
	switch {
	case c.set == nil:
		return c.name, nil
	case k == "":
		return "", nil
	}
	return ShardOf(c.set.names, k), nil
}

// Route keys of the kinds of work (workqtype.ShardKey...).
func routeSchedule(name string) string    { return workqtype.ShardKeySchedule(name) }
func routeInbox(source, id string) string { return workqtype.ShardKeyInbox(source, id) }

// InboxKey is the key ShardFor takes for an inbox message.
func InboxKey(source, messageID string) string { return workqtype.ShardKeyInbox(source, messageID) }

// PartitionKey is the key ShardFor takes for an outbox partition key.
func PartitionKey(key string) string { return workqtype.ShardKeyPartition(key) }

// OutboxKey is the key ShardFor takes for an outbox message: its
// partition key's, else (no partition key) its MessageID's when set, else
// "" (round-robin; see workqtype.ShardKeyOutbox).
func OutboxKey(partitionKey string, messageID uuid.UUID) string {
	return workqtype.ShardKeyOutbox(partitionKey, messageID)
}

// DedupKey is the key ShardFor takes for a job's DedupKey.
func DedupKey(key string) string { return workqtype.ShardKeyDedup(key) }

// LimitKey is the key ShardFor takes for a job's LimitKey (of a job
// without a DedupKey or Unique, which route it instead).
func LimitKey(key string) string { return workqtype.ShardKeyLimit(key) }

// ScheduleKey is the key ShardFor takes for a schedule's name.
func ScheduleKey(name string) string { return workqtype.ShardKeySchedule(name) }

// pick returns the shard of route key k ("": the next round-robin shard).
func (s *shardSet) pick(k string) *Client {
	if k == "" {
		return s.shards[int((s.rr.Add(1)-1)%uint64(len(s.shards)))]
	}
	return s.shards[rendezvous(s.names, k)]
}

// errShardTx refuses a transaction on a sharded Client, which cannot tell
// which database the transaction is on.
func (c *Client) errShardTx(what string) error {
	return workqtype.Invalid("shard", fmt.Sprintf("%s on a sharded Client: name the transaction's database with client.Shard(name).%s", what, what))
}

// errShardID refuses an operation by id on a sharded Client: an id is
// unique per shard only.
func (c *Client) errShardID(what string) error {
	return workqtype.Invalid("shard", fmt.Sprintf("%s on a sharded Client: an id names an item of one shard; use client.Shard(name).%s with the shard the enqueue reported", what, what))
}

// group splits n items into per-shard batches by their route keys (""
// keys all go to one round-robin shard per call): the index lists per
// shard, in shard order.
func (s *shardSet) group(keys []string) map[*Client][]int {
	out := map[*Client][]int{}
	var rr *Client
	for i, k := range keys {
		var sc *Client
		if k == "" {
			if rr == nil {
				rr = s.pick("")
			}
			sc = rr
		} else {
			sc = s.pick(k)
		}
		out[sc] = append(out[sc], i)
	}
	return out
}

// each runs f for each shard's batch, in shard order, and stops at the
// first error (naming the shard): the batches of earlier shards stay
// written.
func (s *shardSet) each(groups map[*Client][]int, f func(sc *Client, idx []int) error) error {
	for _, sc := range s.shards {
		idx, ok := groups[sc]
		if !ok {
			continue
		}
		if err := f(sc, idx); err != nil {
			return fmt.Errorf("shard %s: %w", sc.name, workqtype.NotMigrated(err, sc.Schema()))
		}
	}
	return nil
}

// subset returns the elements of in at idx, in that order: one shard's
// part of a batch.
func subset[T any](in []T, idx []int) []T {
	out := make([]T, len(idx))
	for i, x := range idx {
		out[i] = in[x]
	}
	return out
}

// --- jobs

func (c *Client) shardedEnqueue(ctx context.Context, jobs []jobq.Job) ([]Enqueued, error) {
	keys := make([]string, len(jobs))
	for i, j := range jobs {
		k, err := c.jobs.RouteKey(j)
		if err != nil {
			return nil, indexed(err, i, len(jobs) == 1)
		}
		keys[i] = k
	}
	out := make([]Enqueued, len(jobs))
	err := c.set.each(c.set.group(keys), func(sc *Client, idx []int) error {
		if len(jobs) == 1 {
			r, err := sc.jobs.Enqueue(ctx, sc.db, jobs[0])
			out[0] = Enqueued{ID: r.ID, Duplicate: r.Duplicate, Shard: sc.name}
			return err
		}
		part := subset(jobs, idx)
		rs, err := sc.enqueueBatch(ctx, sc.db, part)
		if err != nil {
			return err
		}
		for i, x := range idx {
			out[x] = Enqueued{ID: rs[i].ID, Duplicate: rs[i].Duplicate, Shard: sc.name}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// --- outbox

func (c *Client) shardedSend(ctx context.Context, msgs []outbox.Message) ([]outbox.Sent, error) {
	keys := make([]string, len(msgs))
	for i, m := range msgs {
		if m.JoinID != 0 {
			return nil, indexed(workqtype.Invalid("join_id", "a join lives on one shard: send its members with client.Shard(name).Send on the join's shard"), i, len(msgs) == 1)
		}
		keys[i] = workqtype.ShardKeyOutbox(m.PartitionKey, m.MessageID)
	}
	out := make([]outbox.Sent, len(msgs))
	err := c.set.each(c.set.group(keys), func(sc *Client, idx []int) error {
		part := subset(msgs, idx)
		var rs []outbox.Sent
		var err error
		if len(msgs) == 1 {
			var r outbox.Sent
			r, err = sc.outbox.Send(ctx, sc.db, part[0])
			rs = []outbox.Sent{r}
		} else {
			rs, err = sc.outbox.SendMany(ctx, sc.db, part)
		}
		if err != nil {
			return err
		}
		for i, x := range idx {
			out[x] = rs[i]
			out[x].Shard = sc.name
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// --- inbox

// shardedReceive receives msgs on their shards. As inbox.ReceiveMany
// does, a conflict does not stop the batch: every shard receives its
// messages, every result is returned, and the error joins one
// *inbox.ConflictError per conflicting message, its Index the message's
// in msgs (one message: that *inbox.ConflictError itself, as Receive
// returns it). Any other error stops at its shard (the shards before it
// stay written) and returns no results.
func (c *Client) shardedReceive(ctx context.Context, msgs []inbox.Message) ([]inbox.Received, error) {
	keys := make([]string, len(msgs))
	for i, m := range msgs {
		keys[i] = routeInbox(m.Source, m.MessageID)
	}
	out := make([]inbox.Received, len(msgs))
	var conflicts []error
	err := c.set.each(c.set.group(keys), func(sc *Client, idx []int) error {
		part := subset(msgs, idx)
		var rs []inbox.Received
		var err error
		if len(msgs) == 1 {
			var r inbox.Received
			r, err = sc.inbox.Receive(ctx, sc.db, part[0])
			rs = []inbox.Received{r}
		} else {
			rs, err = sc.inbox.ReceiveMany(ctx, sc.db, part)
		}
		if err != nil && (!errors.Is(err, inbox.ErrConflict) || len(rs) != len(idx)) {
			return err
		}
		for i, x := range idx {
			out[x] = rs[i]
			out[x].Shard = sc.name
		}
		for _, ce := range conflictErrors(err) {
			g := *ce
			g.Index = idx[ce.Index]
			conflicts = append(conflicts, &g)
		}
		return nil
	})
	if err != nil {
		return nil, errors.Join(append([]error{err}, conflicts...)...)
	}
	switch {
	case len(conflicts) == 0:
		return out, nil
	case len(msgs) == 1:
		return out, conflicts[0]
	}
	slices.SortFunc(conflicts, func(a, b error) int { return a.(*inbox.ConflictError).Index - b.(*inbox.ConflictError).Index })
	return out, fmt.Errorf("receive %d messages: %d conflict(s): %w", len(msgs), len(conflicts), errors.Join(conflicts...))
}

// conflictErrors returns the *inbox.ConflictError in err's tree, in order.
func conflictErrors(err error) []*inbox.ConflictError {
	if err == nil {
		return nil
	}
	if ce, ok := err.(*inbox.ConflictError); ok {
		return []*inbox.ConflictError{ce}
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return conflictErrors(u.Unwrap())
	case interface{ Unwrap() []error }:
		var out []*inbox.ConflictError
		for _, e := range u.Unwrap() {
			out = append(out, conflictErrors(e)...)
		}
		return out
	}
	return nil
}

// --- timers

func (c *Client) shardedSchedule(ctx context.Context, ts []timers.Timer) ([]timers.Scheduled, error) {
	sc := c.set.pick("")
	var rs []timers.Scheduled
	var err error
	if len(ts) == 1 {
		var r timers.Scheduled
		r, err = sc.timers.Schedule(ctx, sc.db, ts[0])
		rs = []timers.Scheduled{r}
	} else {
		rs, err = sc.timers.ScheduleMany(ctx, sc.db, ts)
	}
	if err != nil {
		return nil, fmt.Errorf("shard %s: %w", sc.name, workqtype.NotMigrated(err, sc.Schema()))
	}
	for i := range rs {
		rs[i].Shard = sc.name
	}
	return rs, nil
}

// --- lifecycle

// startSharded starts every shard. A shard whose schema cannot be read
// within shardCheckBound (down, unreachable) is started anyway and logged:
// its workers and maintenance retry until it answers, and the other shards
// work meanwhile. A shard whose schema is behind fails Start (a deploy
// error, not an outage), as does every shard being unreachable.
func (c *Client) startSharded(ctx context.Context) error {
	errs := make([]error, len(c.set.shards))
	var wg sync.WaitGroup
	for i, sc := range c.set.shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, shardCheckBound)
			defer cancel()
			if errs[i] = sc.checkSchema(cctx); errs[i] == nil {
				sc.checkSyncCommit(cctx) // each shard's own warnings (design §26)
			}
		}()
	}
	wg.Wait()
	down := 0
	for i, err := range errs {
		sc := c.set.shards[i]
		switch {
		case err == nil:
		case errors.Is(err, ErrSchemaBehind):
			return fmt.Errorf("shard %s: %w", sc.name, err)
		default:
			down++
			c.log.Warn("shard unreachable at start: its workers and maintenance retry until it answers", "shard", sc.name, "err", err)
		}
	}
	if down == len(errs) {
		return fmt.Errorf("workq: no shard answers: %w", errors.Join(errs...))
	}
	// Before any worker claims, a shard without a budget for a global
	// limit gets 0 (claims nothing) for the leader to raise
	// (docs/scale-out.md).
	if c.limits != nil {
		ok := make([]bool, len(errs))
		for i, err := range errs {
			ok[i] = err == nil
		}
		c.limits.zeroUnset(ctx, c.set.shards, ok, c.log)
	}
	var started []*Client
	for _, sc := range c.set.shards {
		if err := sc.startParts(ctx); err != nil {
			for _, s := range started {
				_ = s.stopParts(context.WithoutCancel(ctx))
			}
			return fmt.Errorf("shard %s: %w", sc.name, err)
		}
		started = append(started, sc)
	}
	if c.limits != nil {
		c.limits.start(ctx)
	}
	return nil
}

// shardCheckBound bounds the schema check of each shard at Start.
const shardCheckBound = 5 * time.Second

// stopSharded stops every shard at once (each within Stop's bound).
func (c *Client) stopSharded(ctx context.Context) error {
	defer c.limits.stopAndWait()()
	errs := make([]error, len(c.set.shards))
	var wg sync.WaitGroup
	for i, sc := range c.set.shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := sc.stopParts(ctx); err != nil {
				errs[i] = fmt.Errorf("shard %s: %w", sc.name, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// shardedEnqueueManyFast is EnqueueManyFast on a sharded Client: the jobs
// are checked and routed (by their limit keys; the fast path takes no
// dedup or unique key), then each shard's part is copied there.
func (c *Client) shardedEnqueueManyFast(ctx context.Context, params []EnqueueParams) (int64, error) {
	jobs := make([]jobq.Job, len(params))
	keyed := false
	for i, p := range params {
		j, err := job(p.Args, p.Opts)
		if err != nil {
			return 0, indexed(err, i, false)
		}
		jobs[i] = j
		keyed = keyed || j.LimitKey != "" || j.DedupKey != "" || !j.Unique.IsZero()
	}
	if !keyed { // one shard's COPY checks the whole batch: no second check
		sc := c.set.pick("")
		n, err := sc.EnqueueManyFast(ctx, params)
		if err != nil {
			return n, fmt.Errorf("shard %s: %w", sc.name, err)
		}
		return n, nil
	}
	keys := make([]string, len(params))
	for i, j := range jobs { // RouteKey checks every job, before any shard writes
		k, err := c.jobs.RouteKey(j)
		if err != nil {
			return 0, indexed(err, i, false)
		}
		keys[i] = k
	}
	var total int64
	err := c.set.each(c.set.group(keys), func(sc *Client, idx []int) error {
		n, err := sc.EnqueueManyFast(ctx, subset(params, idx))
		total += n
		return err
	})
	return total, err
}
