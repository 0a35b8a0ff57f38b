package shardlimit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/lock"
	"github.com/workq/workq/internal/startstop"
)

// Rebalancer moves the per-shard budgets of its limits towards demand while
// it leads (see the package documentation for the invariant it keeps).
// Run it in one or more processes: one of them leads at a time; Run it in
// the caller's goroutine, or Start and Stop it (package startstop's
// lifecycle: it starts once).
type Rebalancer struct {
	shards []Shard
	o      Options

	startstop.Lifecycle // Start once; Stop, Started, Stopped

	mu    sync.Mutex
	state [][]shardState // [limit][shard], this leadership's knowledge
	token int64          // the leader's token; 0 when not leading
}

// shardState is what the leader knows of one shard for one limit.
type shardState struct {
	known      bool // read during this leadership
	budget     int  // budget in force (an upper bound of it); -1: no limit row
	inProgress int
	ready      int
	held       int // max(budget, in progress); W or more for no limit row
}

// Budget is the leader's last knowledge of one shard's budget for one limit.
type Budget struct {
	Table lease.Table `json:"table"`
	Queue string      `json:"queue"`
	Shard string      `json:"shard"`
	// Known is false until the leader has read the shard; then Budget is
	// the budget in force (-1: the shard has no limit row, so no limit).
	Known      bool `json:"known"`
	Budget     int  `json:"budget"`
	InProgress int  `json:"in_progress"`
	Ready      int  `json:"ready"` // counted up to the demand cap
}

// New returns a Rebalancer over shards; shards[0] is the coordinator that
// holds the leader lock. It checks its arguments and touches no database.
func New(shards []Shard, o Options) (*Rebalancer, error) {
	o, err := o.withDefaults(shards)
	if err != nil {
		return nil, err
	}
	r := &Rebalancer{shards: append([]Shard(nil), shards...), o: o}
	r.reset(0)
	return r, nil
}

func (r *Rebalancer) reset(token int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.token = token
	r.state = make([][]shardState, len(r.o.Limits))
	for i := range r.state {
		r.state[i] = make([]shardState, len(r.shards))
	}
}

// Leading reports whether this Rebalancer leads now, with its token.
func (r *Rebalancer) Leading() (token int64, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.token, r.token != 0
}

// Budgets returns the leader's knowledge of every (limit, shard), limits in
// Options order, shards in list order; empty knowledge when not leading.
func (r *Rebalancer) Budgets() []Budget {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Budget
	for li, l := range r.o.Limits {
		for si, s := range r.shards {
			st := r.state[li][si]
			out = append(out, Budget{Table: l.Table, Queue: l.Queue, Shard: s.Name, Known: st.known,
				Budget: st.budget, InProgress: st.inProgress, Ready: st.ready})
		}
	}
	return out
}

// Run competes for the leader lock on the coordinator shard until ctx ends;
// while it leads it rebalances every Interval. It returns nil when ctx
// ends. While the coordinator cannot be reached nobody leads and the
// budgets stay as they are.
func (r *Rebalancer) Run(ctx context.Context) error {
	lo := lock.Options{TTL: r.o.LockTTL, Owner: r.o.Owner, Logger: r.o.Logger}
	coord := r.shards[0]
	for ctx.Err() == nil {
		l, err := lock.Acquire(ctx, coord.DB, r.o.LockName, lo)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			r.o.Logger.Warn("shardlimit: acquiring the leader lock on the coordinator failed; budgets stay as they are", "coordinator", coord.Name, "err", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(r.o.Interval):
			}
			continue
		}
		r.lead(ctx, l)
		relCtx, cancel := context.WithTimeout(context.Background(), r.o.ShardTimeout)
		_ = l.Release(relCtx)
		cancel()
		// Leadership ended (lost, or fenced out by a newer leader): let
		// another candidate take the lock before competing again.
		select {
		case <-ctx.Done():
		case <-time.After(r.o.Interval):
		}
	}
	return nil
}

// Start runs Run in a goroutine of its own until Stop; ctx only bounds the
// start, its values reach the rebalancer.
func (r *Rebalancer) Start(ctx context.Context) error {
	run, err := r.Begin(ctx)
	if err != nil {
		return fmt.Errorf("shardlimit: start: %w", err)
	}
	go func() {
		defer run.Stopped()
		run.Started()
		_ = r.Run(run.Context()) // nil when its context ends
	}()
	return nil
}

// Stop ends the leadership (its lock released within ShardTimeout; a budget
// written stays in force for the next leader) and waits for it, at most
// until ctx ends. Calling it again waits for the same stop.
func (r *Rebalancer) Stop(ctx context.Context) error {
	if err := r.Lifecycle.Stop(ctx); err != nil {
		return fmt.Errorf("shardlimit: stop: %w", err)
	}
	return nil
}

// lead rebalances every Interval until ctx ends or the lock is lost.
func (r *Rebalancer) lead(ctx context.Context, l *lock.Lock) {
	defer r.reset(0)
	lctx, cancel := context.WithCancelCause(l.Context())
	defer cancel(nil)
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	defer stop()
	if err := r.catchUp(lctx, l); err != nil {
		if ctx.Err() == nil {
			r.o.Logger.Warn("shardlimit: lost the leader lock while catching up with the shards' tokens; stepping down", "token", l.Token(), "err", err)
		}
		return
	}
	r.reset(l.Token())
	r.o.Logger.Info("shardlimit: leading", "token", l.Token(), "shards", len(r.shards), "limits", len(r.o.Limits))
	ls := &leadership{passed: make([]bool, len(r.shards))}
	tick := time.NewTicker(r.o.Interval)
	defer tick.Stop()
	for {
		err := r.round(lctx, l, ls)
		if lctx.Err() != nil {
			if ctx.Err() == nil {
				r.o.Logger.Warn("shardlimit: leadership lost; budgets stay as they are until a leader is back", "token", l.Token(), "cause", context.Cause(lctx))
			}
			return
		}
		var stale *staleFenceError
		if errors.As(err, &stale) {
			// A shard not read yet in this leadership remembers a token
			// from before the coordinator changed: advance past it (only
			// while still holding the lock) and run the round again now.
			if err := r.advance(lctx, l, ls, stale); err != nil {
				r.o.Logger.Warn("shardlimit: stepping down", "token", l.Token(), "err", err)
				return
			}
			continue
		}
		if errors.Is(err, ErrFenced) || errors.Is(err, lock.ErrLost) {
			r.o.Logger.Warn("shardlimit: a newer leader exists; stepping down", "token", l.Token(), "err", err)
			if errors.Is(err, ErrFenced) {
				if held, herr := l.Held(lctx); herr == nil && held {
					// Fenced on a shard that had accepted this leadership's
					// token, while this lock still holds: the newer token
					// comes from a leader holding the lock on another
					// coordinator, a Rebalancer run with another first shard.
					r.o.Logger.Error("shardlimit: another leader writes these shards with a different coordinator (first shard); run every Rebalancer with the same shard list",
						"coordinator", r.shards[0].Name, "token", l.Token())
				}
			}
			return
		}
		if err != nil {
			r.o.Logger.Warn("shardlimit: rebalance round failed", "err", err)
		}
		select {
		case <-lctx.Done():
		case <-tick.C:
		}
	}
}

// leadership is what one leadership tracks beyond the shards' budgets.
type leadership struct {
	passed   []bool // the shard accepted this leadership's token (a fenced read succeeded)
	advances int    // token advances made after the start, for stale fences
}

// staleFenceError is a round's refusal on shards that had not accepted
// this leadership's token yet, with the greatest token their fence rows
// hold: fences left by a leader of an earlier coordinator.
type staleFenceError struct {
	shards []string
	seen   int64
}

func (e *staleFenceError) Error() string {
	return fmt.Sprintf("shards %v remember token %d, written before this leadership read them", e.shards, e.seen)
}

func (e *staleFenceError) Unwrap() error { return ErrFenced }

// fencedError is the fence's refusal of token on one shard, with the
// greater token its fence row holds.
type fencedError struct {
	token, seen int64
}

func (e *fencedError) Error() string {
	return fmt.Sprintf("token %d, fence at %d: %s", e.token, e.seen, ErrFenced)
}

func (e *fencedError) Unwrap() error { return ErrFenced }

// catchUp runs when a leadership begins, before its first round. The
// leader's token comes from the lock row on the coordinator, but the
// fence rows on the shards may remember greater tokens: those of leaders
// that held the lock on another coordinator (the shard list was
// reordered, a shard put first to drain it, a new coordinator database),
// whose tokens grew on another lock row (with the timeline epoch in their
// high bits after a failover there). Left alone, every fenced statement
// would be refused, and budgets would freeze. So catchUp reads, on every
// shard it reaches, the greatest of the fence row and (on the other
// shards) the row of the lock itself, which an earlier coordinator's
// leader may have acquired but not yet written anywhere, and advances the
// lock's token past it (lock.Advance). The advance is one statement on
// the coordinator fenced by the lock's current token, so only the holder
// of the coordinator lock, the single source of leadership, can advance:
// a leader that lost the lock (stalled past its TTL) cannot, and is still
// fenced out by its successor, whose token is then greater than every
// token any shard had seen when it started. A shard it cannot reach now
// is caught up with in the round that first reaches it (advance).
func (r *Rebalancer) catchUp(ctx context.Context, l *lock.Lock) error {
	seen := make([]int64, len(r.shards))
	errs := make([]error, len(r.shards))
	parallel(len(r.shards), func(i int) {
		sctx, cancel := context.WithTimeout(ctx, r.o.ShardTimeout)
		defer cancel()
		errs[i] = r.shards[i].DB.QueryRow(sctx, `select coalesce(max(token), 0) from workq.workq_locks
			where name = $1 or (name = $2 and $3)`, r.o.LockName+".fence", r.o.LockName, i != 0).Scan(&seen[i])
	})
	if err := ctx.Err(); err != nil {
		return err
	}
	var top int64
	for i, err := range errs {
		if err != nil {
			r.o.Logger.Warn("shardlimit: could not read a shard's fence when starting to lead; it is caught up with once reached", "shard", r.shards[i].Name, "err", err)
			continue
		}
		top = max(top, seen[i])
	}
	if top < l.Token() {
		return nil
	}
	from := l.Token()
	if err := l.Advance(ctx, top+1); err != nil {
		if errors.Is(err, lock.ErrLost) || ctx.Err() != nil {
			return err
		}
		// The coordinator did not answer: lead with the token as it is;
		// the rounds are refused by the fences and advance again.
		r.o.Logger.Warn("shardlimit: advancing the leader token failed; retrying in the rounds", "token", from, "err", err)
		return nil
	}
	r.o.Logger.Info("shardlimit: leader token advanced past the shards' fences (the coordinator changed)", "from", from, "to", l.Token())
	return nil
}

// advance moves the leader's token past a stale fence found in a round,
// at most once per shard in a leadership: a shard that was unreachable
// when the leadership began is caught up with once, and a fence that
// rises again is another live leader's (see the step-down in lead).
func (r *Rebalancer) advance(ctx context.Context, l *lock.Lock, ls *leadership, e *staleFenceError) error {
	if ls.advances >= len(r.shards) {
		return fmt.Errorf("fences refused this leader %d times after advancing its token; another leader must be writing them: %w", ls.advances, e)
	}
	ls.advances++
	from := l.Token()
	if err := l.Advance(ctx, e.seen+1); err != nil {
		return err
	}
	r.mu.Lock()
	r.token = l.Token()
	r.mu.Unlock()
	r.o.Logger.Info("shardlimit: leader token advanced past a shard's fence", "shards", e.shards, "fence", e.seen, "from", from, "to", l.Token())
	return nil
}

// round reads every shard, then moves each limit's budgets: lowerings
// first, raises once they all committed.
func (r *Rebalancer) round(ctx context.Context, l *lock.Lock, ls *leadership) error {
	token := l.Token()
	type obs struct {
		rows []observation
		err  error
	}
	got := make([]obs, len(r.shards))
	parallel(len(r.shards), func(i int) {
		got[i].rows, got[i].err = r.observe(ctx, r.shards[i], token)
	})
	if err := ctx.Err(); err != nil {
		return err
	}
	reach := make([]bool, len(r.shards))
	var stale *staleFenceError
	for i, g := range got {
		var fe *fencedError
		if errors.As(g.err, &fe) && !ls.passed[i] {
			if stale == nil {
				stale = &staleFenceError{}
			}
			stale.shards = append(stale.shards, r.shards[i].Name)
			stale.seen = max(stale.seen, fe.seen)
			continue
		}
		if errors.Is(g.err, ErrFenced) {
			return fmt.Errorf("read shard %s: %w", r.shards[i].Name, g.err)
		}
		if g.err != nil {
			r.o.Logger.Warn("shardlimit: shard unreachable; its budget stays in force", "shard", r.shards[i].Name, "err", g.err)
			continue
		}
		reach[i] = true
		ls.passed[i] = true
	}
	if stale != nil {
		// Nothing is written this round: the caller advances the token
		// and runs the round again.
		return stale
	}
	var errs []error
	for li, lim := range r.o.Limits {
		r.mu.Lock()
		for si := range r.shards {
			if reach[si] {
				o := got[si].rows[li]
				r.state[li][si] = shardState{known: true, budget: o.budget, inProgress: o.inProgress, ready: o.ready,
					held: heldOf(o.budget, o.inProgress, lim.W)}
			}
		}
		r.mu.Unlock()
		if err := r.rebalance(ctx, l, li, reach); err != nil {
			if errors.Is(err, ErrFenced) || errors.Is(err, lock.ErrLost) {
				return err
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// heldOf is the capacity a shard may use: max(budget, in progress), at
// least W for a shard without a limit row.
func heldOf(budget, inProgress, w int) int {
	if budget < 0 {
		return max(w, inProgress)
	}
	return max(budget, inProgress)
}

// rebalance moves one limit's budgets in two phases.
func (r *Rebalancer) rebalance(ctx context.Context, l *lock.Lock, li int, reach []bool) error {
	lim := r.o.Limits[li]
	n := len(r.shards)
	r.mu.Lock()
	st := append([]shardState(nil), r.state[li]...)
	r.mu.Unlock()
	ds := make([]Demand, n)
	for i, s := range st {
		if !reach[i] && !s.known {
			return fmt.Errorf("%s/%s: shard %s is unreachable and its budget unknown: no budget moves this round",
				lim.Table, lim.Queue, r.shards[i].Name)
		}
		ds[i] = Demand{Ready: s.ready, InProgress: s.inProgress, Fixed: !reach[i], Held: s.held}
	}
	target := Allocate(lim.W, ds)

	// Phase 1: lower.
	var lower []int
	for i, s := range st {
		if reach[i] && (s.budget < 0 || target[i] < s.budget) {
			lower = append(lower, i)
		}
	}
	if err := r.apply(ctx, l.Token(), li, lower, target, st); err != nil {
		return err
	}
	// Phase 2: raise, only once every lowering committed (or failed: a
	// failed lowering counts with its old budget) and the lock still holds.
	held := make([]int, n)
	current := make([]int, n)
	for i, s := range st {
		held[i] = s.held
		current[i] = s.budget
		if s.budget < 0 {
			current[i] = max(lim.W, s.inProgress)
		}
	}
	raised := Raise(lim.W, held, current, target)
	var raise []int
	for i := range raised {
		if reach[i] && raised[i] > current[i] {
			raise = append(raise, i)
		}
	}
	if len(raise) == 0 {
		return nil
	}
	ok, err := l.Held(ctx)
	if err != nil {
		return fmt.Errorf("%s/%s: check the leader lock before raising: %w", lim.Table, lim.Queue, err)
	}
	if !ok {
		return fmt.Errorf("%s/%s: before raising: %w", lim.Table, lim.Queue, lock.ErrLost)
	}
	return r.apply(ctx, l.Token(), li, raise, raised, st)
}

// apply writes budgets[i] on each shard of idx, in parallel, and updates
// st and the leader's state. A write that failed may have committed: the
// shard then counts with the larger of its old and new budget.
func (r *Rebalancer) apply(ctx context.Context, token int64, li int, idx []int, budgets []int, st []shardState) error {
	lim := r.o.Limits[li]
	ips := make([]int, len(idx))
	errs := make([]error, len(idx))
	parallel(len(idx), func(k int) {
		ips[k], errs[k] = r.set(ctx, r.shards[idx[k]], token, lim, budgets[idx[k]])
	})
	var fenced error
	r.mu.Lock()
	for k, i := range idx {
		s := &st[i]
		b := budgets[i]
		if errs[k] != nil {
			if errors.Is(errs[k], ErrFenced) {
				fenced = errs[k]
			}
			r.o.Logger.Warn("shardlimit: setting a budget failed; counting the larger of the old and new budget as in force",
				"shard", r.shards[i].Name, "table", lim.Table, "queue", lim.Queue, "budget", b, "err", errs[k])
			if s.budget >= 0 && b > s.budget {
				s.budget = b
			}
			s.held = max(s.held, heldOf(s.budget, s.inProgress, lim.W))
		} else {
			r.o.Logger.Debug("shardlimit: budget set", "shard", r.shards[i].Name, "table", lim.Table, "queue", lim.Queue, "from", s.budget, "to", b, "in_progress", ips[k])
			wasUnlimited := s.budget < 0
			s.budget, s.inProgress = b, ips[k]
			s.held = heldOf(b, ips[k], lim.W)
			if wasUnlimited {
				// A claim that found no limit row does not wait for the new
				// row: until the next read, count the shard as unlimited.
				s.held = max(s.held, lim.W)
			}
		}
		r.state[li][i] = *s
	}
	r.mu.Unlock()
	if fenced != nil {
		return fenced
	}
	return nil
}

func parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); f(i) }()
	}
	wg.Wait()
}

// observation is one shard's state for one limit.
type observation struct {
	budget, inProgress, ready int
}

// fenceSQL raises the fence row to the token, or refuses a smaller one.
// An equal token passes only for the same owner: tokens are unique on one
// coordinator, but two coordinators' lock rows can hand out the same one.
const fenceSQL = `insert into workq.workq_locks as l (name, owner, token, expires_at, acquired_at, renewed_at)
values ($1, $2, $3, clock_timestamp(), clock_timestamp(), clock_timestamp())
on conflict (name) do update set owner = excluded.owner, token = excluded.token, renewed_at = excluded.renewed_at
where l.token < excluded.token or (l.token = excluded.token and l.owner = excluded.owner)
returning token`

// fence takes the shard's fence row for token in tx, and refuses with
// ErrFenced (a *fencedError) when a newer leader has been there. The row
// stays locked until tx ends, so leaders' transactions on one shard take
// turns.
func (r *Rebalancer) fence(ctx context.Context, tx pgx.Tx, token int64) error {
	var got int64
	err := tx.QueryRow(ctx, fenceSQL, r.o.LockName+".fence", r.o.Owner, token).Scan(&got)
	if errors.Is(err, pgx.ErrNoRows) {
		var seen int64
		if err := tx.QueryRow(ctx, `select token from workq.workq_locks where name = $1`, r.o.LockName+".fence").Scan(&seen); err != nil {
			return fmt.Errorf("token %d: read the fence that refused it: %w (%w)", token, err, ErrFenced)
		}
		return &fencedError{token: token, seen: seen}
	}
	if err != nil {
		return fmt.Errorf("fence: %w", err)
	}
	return nil
}

// counts reads the in-progress count of (table, queue) and its ready and
// due count up to limit.
func counts(ctx context.Context, tx pgx.Tx, table lease.Table, queue string, limit int) (inProgress, ready int, err error) {
	// table is one of lease's closed set of names (lease.CheckLimit), and
	// the workq. qualifier is the one a schema wrapper rewrites.
	t := "workq." + string(table)
	q := `select (select count(*) from ` + t + ` where queue = $1 and status = 1 and locked_until > now())::int,
	 (select count(*) from (select 1 from ` + t + ` where queue = $1 and status = 0 and run_at <= now() limit $2) r)::int`
	if err := tx.QueryRow(ctx, q, queue, limit).Scan(&inProgress, &ready); err != nil {
		return 0, 0, fmt.Errorf("count %s/%s: %w", table, queue, err)
	}
	return inProgress, ready, nil
}

// observe reads every limit's budget, in-progress and ready counts on one
// shard, fenced.
func (r *Rebalancer) observe(ctx context.Context, s Shard, token int64) ([]observation, error) {
	ctx, cancel := context.WithTimeout(ctx, r.o.ShardTimeout)
	defer cancel()
	var out []observation
	err := pgx.BeginFunc(ctx, s.DB, func(tx pgx.Tx) error {
		if err := r.fence(ctx, tx, token); err != nil {
			return err
		}
		out = out[:0]
		for _, lim := range r.o.Limits {
			o := observation{budget: -1}
			err := tx.QueryRow(ctx, `select max_in_progress from workq.queue_limits where work_table = $1 and queue = $2`,
				string(lim.Table), lim.Queue).Scan(&o.budget)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("read the limit of %s/%s: %w", lim.Table, lim.Queue, err)
			}
			capAt := r.o.DemandCap
			if capAt == 0 {
				capAt = lim.W
			}
			if o.inProgress, o.ready, err = counts(ctx, tx, lim.Table, lim.Queue, capAt); err != nil {
				return err
			}
			out = append(out, o)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("shard %s: %w", s.Name, err)
	}
	return out, nil
}

// set writes one budget on one shard, fenced, and returns the in-progress
// count read after the write took the limit row: every claim made under the
// old budget has committed by then (a claim holds that row until it
// commits), and no claim after the commit can exceed max(budget, that
// count).
func (r *Rebalancer) set(ctx context.Context, s Shard, token int64, lim Limit, budget int) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, r.o.ShardTimeout)
	defer cancel()
	var ip int
	err := pgx.BeginFunc(ctx, s.DB, func(tx pgx.Tx) error {
		if err := r.fence(ctx, tx, token); err != nil {
			return err
		}
		if err := lease.SetLimit(ctx, tx, lim.Table, lim.Queue, budget); err != nil {
			return err
		}
		var err error
		ip, _, err = counts(ctx, tx, lim.Table, lim.Queue, 0)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("shard %s: set the budget of %s/%s to %d: %w", s.Name, lim.Table, lim.Queue, budget, err)
	}
	return ip, nil
}
