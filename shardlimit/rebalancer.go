package shardlimit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/lease"
	"github.com/workq/workq/lock"
)

// Rebalancer moves the per-shard budgets of its limits towards demand while
// it leads (see the package documentation for the invariant it keeps).
// Run it in one or more processes: one of them leads at a time.
type Rebalancer struct {
	shards []Shard
	o      Options

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

// lead rebalances every Interval until ctx ends or the lock is lost.
func (r *Rebalancer) lead(ctx context.Context, l *lock.Lock) {
	r.reset(l.Token())
	defer r.reset(0)
	r.o.Logger.Info("shardlimit: leading", "token", l.Token(), "shards", len(r.shards), "limits", len(r.o.Limits))
	lctx, cancel := context.WithCancelCause(l.Context())
	defer cancel(nil)
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	defer stop()
	tick := time.NewTicker(r.o.Interval)
	defer tick.Stop()
	for {
		err := r.round(lctx, l)
		if lctx.Err() != nil {
			if ctx.Err() == nil {
				r.o.Logger.Warn("shardlimit: leadership lost; budgets stay as they are until a leader is back", "token", l.Token(), "cause", context.Cause(lctx))
			}
			return
		}
		if errors.Is(err, ErrFenced) || errors.Is(err, lock.ErrLost) {
			r.o.Logger.Warn("shardlimit: a newer leader exists; stepping down", "token", l.Token(), "err", err)
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

// round reads every shard, then moves each limit's budgets: lowerings
// first, raises once they all committed.
func (r *Rebalancer) round(ctx context.Context, l *lock.Lock) error {
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
	for i, g := range got {
		if errors.Is(g.err, ErrFenced) {
			return fmt.Errorf("read shard %s: %w", r.shards[i].Name, g.err)
		}
		if g.err != nil {
			r.o.Logger.Warn("shardlimit: shard unreachable; its budget stays in force", "shard", r.shards[i].Name, "err", g.err)
			continue
		}
		reach[i] = true
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

const fenceSQL = `insert into workq.workq_locks as l (name, owner, token, expires_at, acquired_at, renewed_at)
values ($1, $2, $3, clock_timestamp(), clock_timestamp(), clock_timestamp())
on conflict (name) do update set owner = excluded.owner, token = excluded.token, renewed_at = excluded.renewed_at
where l.token <= excluded.token
returning token`

// fence takes the shard's fence row for token in tx, and refuses with
// ErrFenced when a newer leader has been there. The row stays locked until
// tx ends, so leaders' transactions on one shard take turns.
func (r *Rebalancer) fence(ctx context.Context, tx pgx.Tx, token int64) error {
	var got int64
	err := tx.QueryRow(ctx, fenceSQL, r.o.LockName+".fence", r.o.Owner, token).Scan(&got)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("token %d: %w", token, ErrFenced)
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
