// Package maintain runs workq's maintenance: periodic tasks (reaping
// expired leases, materialising schedules, failing overdue joins,
// retention) that each do a bounded, idempotent round of short statements.
// Tasks run on one process at a time, the leader: the holder of a fenced
// lock (package lock). When the leader dies another process takes over
// within the lock's TTL; a leader that loses the lock stops its tasks
// (their context is cancelled) before another can start them. Run it
// embedded, inside `workq run`, or as `workq maintain`.
package maintain

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/workq/workq/internal/ha"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/lock"
	"github.com/workq/workq/internal/outage"
	"github.com/workq/workq/internal/startstop"
	"github.com/workq/workq/workqtype"
)

// Task is one maintenance task.
type Task struct {
	Name  string        // a valid name (workqtype.ValidName), unique in the service
	Every time.Duration // how often a round runs (at least 10ms)
	// Run does one round and returns how many rows it handled. token is the
	// leader lock's fencing token: a task whose writes must never overlap
	// a newer leader's checks it in its statements (see package lock). ctx
	// ends when the leadership ends.
	Run func(ctx context.Context, token int64) (int64, error)
}

// Options configure the service; zero values take the defaults.
type Options struct {
	Logger   *slog.Logger
	LockName string        // default "workq.maintenance"
	LockTTL  time.Duration // default lock.DefaultTTL (15s)
	Owner    string        // default: host-pid
	// RetryInterval is how often a follower tries to become the leader
	// (default LockTTL/4).
	RetryInterval time.Duration
	// Observer is told about leadership, task rounds, reaps and stuck
	// items (metrics); nil: none. See Observer.
	Observer Observer
}

// DefaultLockName is the lock the maintenance leader holds.
const DefaultLockName = "workq.maintenance"

// TaskStats counts one task's rounds.
type TaskStats struct {
	Name      string    `json:"name"`
	Rounds    int64     `json:"rounds"`
	Rows      int64     `json:"rows"`
	Errors    int64     `json:"errors"`
	LastError string    `json:"last_error,omitempty"`
	LastRound time.Time `json:"last_round"`
}

type taskState struct {
	Task
	rounds, rows, errors atomic.Int64
	mu                   sync.Mutex
	lastError            string
	lastRound            time.Time
}

// Service runs the maintenance tasks while it leads.
type Service struct {
	db     workqtype.DB
	opts   Options
	log    *slog.Logger
	outage *outage.Log // the leader lock's and every task's database failures, as one outage

	startstop.Lifecycle // Start once; Stop, Started, Stopped

	mu    sync.Mutex
	tasks []*taskState

	token      atomic.Int64 // the current leadership's token; 0 when following
	elections  atomic.Int64 // times this service became the leader
	schemaGone atomic.Bool  // a statement found workq's schema missing (logged once)
	epoch      atomic.Int64 // the fencing epoch of the last leadership's token, +1 (0: none yet)
}

// ErrInvalid (workqtype.ErrInvalid, shared by every package) wraps the errors of a bad task or option.
var ErrInvalid = workqtype.ErrInvalid

// New returns a service on db (a pool).
func New(db workqtype.DB, o Options) *Service {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.LockName == "" {
		o.LockName = DefaultLockName
	}
	if o.LockTTL == 0 {
		o.LockTTL = lock.DefaultTTL
	}
	return &Service{db: db, opts: o, log: o.Logger, outage: outage.New(o.Logger, "maintenance")}
}

// Add registers a task; call it before Start.
func (s *Service) Add(t Task) error {
	if !workqtype.ValidName(t.Name) {
		return workqtype.Invalid("name", fmt.Sprintf("name %q is not a valid name", t.Name))
	}
	if t.Every < 10*time.Millisecond {
		return workqtype.Invalid("every", fmt.Sprintf("task %s: interval must be at least 10ms, got %s", t.Name, t.Every))
	}
	if t.Run == nil {
		return workqtype.Invalid("run", fmt.Sprintf("task %s: nil Run", t.Name))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Began() {
		return fmt.Errorf("add task %s: service already started", t.Name)
	}
	if slices.ContainsFunc(s.tasks, func(o *taskState) bool { return o.Name == t.Name }) {
		return workqtype.Invalid("name", fmt.Sprintf("task %s added twice", t.Name))
	}
	s.tasks = append(s.tasks, &taskState{Task: t})
	return nil
}

// Start begins competing for leadership and returns at once. A service
// starts once (startstop.ErrStarted after that).
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock() // Add waits for the start
	defer s.mu.Unlock()
	run, err := s.Begin(ctx)
	if err != nil {
		return fmt.Errorf("maintenance: start: %w", err)
	}
	tasks := slices.Clone(s.tasks)
	go func() {
		defer run.Stopped()
		run.Started()
		s.lead(run.Context(), tasks)
	}()
	return nil
}

// Stop ends the tasks, releases the leadership and returns; a task round in
// flight is cancelled. It returns early with ctx's error when ctx ends (the
// service goes on stopping), and startstop.ErrNotStarted when the service
// was never started. Calling it again waits for the same stop.
func (s *Service) Stop(ctx context.Context) error {
	if err := s.Lifecycle.Stop(ctx); err != nil {
		return fmt.Errorf("maintenance: stop: %w", err)
	}
	return nil
}

// Run starts the service, runs until ctx ends and stops it.
func (s *Service) Run(ctx context.Context) error {
	if err := s.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.Stop(stopCtx)
}

// Leader returns the fencing token of the current leadership and whether
// this service leads now.
func (s *Service) Leader() (int64, bool) {
	t := s.token.Load()
	return t, t != 0
}

// Elections counts the times this service became the leader.
func (s *Service) Elections() int64 { return s.elections.Load() }

// Stats returns every task's counters, in the order they were added.
func (s *Service) Stats() []TaskStats {
	s.mu.Lock()
	tasks := slices.Clone(s.tasks)
	s.mu.Unlock()
	out := make([]TaskStats, len(tasks))
	for i, t := range tasks {
		t.mu.Lock()
		out[i] = TaskStats{Name: t.Name, Rounds: t.rounds.Load(), Rows: t.rows.Load(), Errors: t.errors.Load(),
			LastError: t.lastError, LastRound: t.lastRound}
		t.mu.Unlock()
	}
	return out
}

// schemaMissing reports whether err says the database lacks workq's schema
// (lease.IsSchemaMissing). The service does not exit (a migration brings
// the schema back): it logs one error naming the fix, then retries quietly
// until it leads again.
func (s *Service) schemaMissing(err error) bool {
	if !lease.IsSchemaMissing(err) {
		return false
	}
	if s.schemaGone.CompareAndSwap(false, true) {
		s.log.Error("maintenance: the database lacks workq's schema (a table or function does not exist): run 'workq migrate up' "+
			"(with --schema when it is not the default); retrying quietly until it is there", "err", err)
	}
	return true
}

// noteEpoch logs, at warn level, a leadership whose token carries another
// fencing epoch (its high bits: the database's timeline, design §26) than
// the previous one's: the database was promoted (a failover) in between.
func (s *Service) noteEpoch(token int64) {
	now := ha.Epoch(token) + 1
	if prev := s.epoch.Swap(now); prev != 0 && prev != now {
		s.log.Warn("maintenance: database timeline changed (failover?)", "old_timeline", prev, "new_timeline", now, "token", token)
	}
}

// lead competes for the lock until ctx ends; while it holds it, it runs
// every task on its own ticker under the lock's context.
func (s *Service) lead(ctx context.Context, tasks []*taskState) {
	lo := lock.Options{TTL: s.opts.LockTTL, Owner: s.opts.Owner, RetryInterval: s.opts.RetryInterval, Logger: s.log}
	for ctx.Err() == nil {
		l, err := lock.Acquire(ctx, s.db, s.opts.LockName, lo)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !s.schemaMissing(err) && !s.outage.Failed(err, "loop", "leader lock") {
				s.log.Warn("maintenance: acquiring the leader lock failed; retrying", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		s.outage.OK()
		if s.schemaGone.CompareAndSwap(true, false) {
			s.log.Info("maintenance: workq's schema is there again")
		}
		s.token.Store(l.Token())
		s.elections.Add(1)
		s.noteEpoch(l.Token())
		s.log.Info("maintenance: leading", "token", l.Token(), "tasks", len(tasks))
		if s.opts.Observer != nil {
			s.opts.Observer.Leading(true)
		}
		leadCtx, cancel := context.WithCancel(outage.NewContext(l.Context(), s.outage))
		if s.opts.Observer != nil {
			leadCtx = context.WithValue(leadCtx, observerKey{}, s.opts.Observer)
		}
		stopLeading := context.AfterFunc(ctx, cancel)
		var wg sync.WaitGroup
		for _, t := range tasks {
			wg.Add(1)
			go func() { defer wg.Done(); s.loop(leadCtx, t, l.Token()) }()
		}
		<-leadCtx.Done()
		wg.Wait()
		stopLeading()
		cancel()
		s.token.Store(0)
		if s.opts.Observer != nil {
			s.opts.Observer.Leading(false)
		}
		relCtx, relCancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = l.Release(relCtx)
		relCancel()
		if ctx.Err() == nil {
			// Lost to an outage, the outage log has said why.
			level := slog.LevelWarn
			if s.outage.Down() {
				level = slog.LevelInfo
			}
			s.log.Log(ctx, level, "maintenance: leadership lost; competing again", "token", l.Token(), "cause", context.Cause(l.Context()))
		}
	}
}

// loop runs one task every t.Every until ctx ends. A failing round is
// logged and counted; the next round tries again.
func (s *Service) loop(ctx context.Context, t *taskState, token int64) {
	tick := time.NewTicker(t.Every)
	defer tick.Stop()
	for {
		began := time.Now()
		n, err := t.Run(ctx, token)
		if ctx.Err() != nil {
			return
		}
		if s.opts.Observer != nil {
			s.opts.Observer.TaskRound(t.Name, n, time.Since(began), err)
		}
		t.rounds.Add(1)
		t.rows.Add(n)
		t.mu.Lock()
		t.lastRound = time.Now()
		if err != nil {
			t.errors.Add(1)
			t.lastError = err.Error()
		}
		t.mu.Unlock()
		switch {
		case err == nil:
			s.outage.OK()
			if n > 0 {
				s.log.Debug("maintenance task", "task", t.Name, "rows", n)
			}
		case s.schemaMissing(err), s.outage.Failed(err, "task", t.Name):
		default:
			s.log.Warn("maintenance task failed; the other tasks go on", "task", t.Name, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
