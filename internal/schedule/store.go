// Package schedule runs recurring schedules: a named cron expression in an
// IANA time zone that produces job runs (table job_runs) of one kind on one
// queue. A Store creates, changes, lists and triggers schedules; a Scheduler
// materialises their due slots exactly once per (schedule, scheduled time),
// however many schedulers run at once: the unique index
// job_runs_schedule_slot is the guarantee, not a lock in memory.
// docs/schedules.md describes the policies and the decisions behind them.
package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/dbschema"
	"github.com/workq/workq/workqtype"
)

// Sentinel errors callers branch on. Validation errors wrap
// workqtype.ErrInvalid; none of these requests changed anything.
var (
	ErrNotFound = fmt.Errorf("schedule %w", workqtype.ErrNotFound)
	ErrExists   = workqtype.ErrScheduleExists
	// ErrOverlap: TriggerNow found the schedule's previous run still live
	// and the schedule's overlap policy is skip.
	ErrOverlap = workqtype.ErrScheduleOverlap
)

// The user-facing types live in workqtype (the root re-exports them).
type (
	OverlapPolicy = workqtype.OverlapPolicy
	MisfirePolicy = workqtype.MisfirePolicy
	Spec          = workqtype.ScheduleSpec
	Changes       = workqtype.ScheduleChanges
	Schedule      = workqtype.Schedule
	Triggered     = workqtype.TriggeredRun
)

const (
	OverlapAllow   = workqtype.OverlapAllow
	OverlapSkip    = workqtype.OverlapSkip
	MisfireRunOnce = workqtype.MisfireRunOnce
	MisfireSkip    = workqtype.MisfireSkip
	MisfireRunAll  = workqtype.MisfireRunAll
)

// Defaults of a Spec's zero values.
const (
	DefaultMisfireCap  = workqtype.DefaultMisfireCap
	DefaultMaxAttempts = workqtype.DefaultMaxAttempts
	MaxMisfireCap      = 10000
)

// StoreOptions configure a Store; zero values take the defaults.
type StoreOptions struct {
	// Clock is "now" for computing next run times; nil uses the database
	// clock (the one the scheduler and the lease engine use).
	Clock func() time.Time
	// MaxPayloadBytes limits a schedule's payload (0: workqtype.DefaultMaxPayload).
	MaxPayloadBytes int
	// Schema is the workq schema the schedules are in (default "workq");
	// the Store puts every statement there, whatever db it is given. An
	// invalid name makes every call fail with an error wrapping
	// workqtype.ErrInvalid.
	Schema string
}

// Store creates, changes, lists and triggers schedules. It holds no
// state besides its options and is safe for concurrent use.
type Store struct {
	clock      func() time.Time
	maxPayload int
	rw         dbschema.Rewriter
	schemaErr  error // an invalid StoreOptions.Schema
}

// NewStore returns a Store.
func NewStore(o StoreOptions) *Store {
	if o.MaxPayloadBytes == 0 {
		o.MaxPayloadBytes = workqtype.DefaultMaxPayload
	}
	rw, err := dbschema.NewRewriter(o.Schema)
	if err != nil {
		err = workqtype.InvalidErr("Schema", err)
	}
	return &Store{clock: o.Clock, maxPayload: o.MaxPayloadBytes, rw: rw, schemaErr: err}
}

// on returns db in the Store's schema.
func (s *Store) on(db workqtype.TxDB) (workqtype.TxDB, error) {
	if s.schemaErr != nil {
		return nil, s.schemaErr
	}
	return s.rw.WrapTx(db), nil
}

// normalized is a validated spec, as stored.
type normalized struct {
	gen.SchedulesInsertParams
	expr *Expr
}

func (s *Store) normalize(sp Spec) (normalized, error) {
	n := normalized{}
	p := &n.SchedulesInsertParams
	if err := workqtype.CheckName("name", "schedule name", sp.Name); err != nil {
		return n, err
	}
	p.Name = sp.Name
	if sp.Queue == "" {
		sp.Queue = workqtype.DefaultQueue
	}
	if err := workqtype.CheckQueue("queue", sp.Queue); err != nil {
		return n, err
	}
	if err := workqtype.CheckName("kind", "kind", sp.Kind); err != nil {
		return n, err
	}
	p.Queue, p.Kind = sp.Queue, sp.Kind
	if sp.Timezone == "" {
		sp.Timezone = "UTC"
	}
	expr, err := ParseCron(sp.Cron, sp.Timezone)
	if err != nil {
		return n, err
	}
	n.expr, p.Cron, p.Timezone = expr, sp.Cron, sp.Timezone
	if p.Payload, err = workqtype.EncodePayload(sp.Payload, s.maxPayload); err != nil {
		return n, err
	}
	p.Priority = sp.Priority
	if p.MaxAttempts, err = workqtype.MaxAttempts("max_attempts", sp.MaxAttempts, DefaultMaxAttempts); err != nil {
		return n, err
	}
	switch sp.Overlap {
	case "":
		sp.Overlap = OverlapAllow
	case OverlapAllow, OverlapSkip:
	default:
		return n, workqtype.Invalid("overlap", fmt.Sprintf("overlap policy %q: want %q or %q", sp.Overlap, OverlapAllow, OverlapSkip))
	}
	switch sp.Misfire {
	case "":
		sp.Misfire = MisfireRunOnce
	case MisfireRunOnce, MisfireSkip, MisfireRunAll:
	default:
		return n, workqtype.Invalid("misfire", fmt.Sprintf("misfire policy %q: want %q, %q or %q", sp.Misfire, MisfireRunOnce, MisfireSkip, MisfireRunAll))
	}
	if sp.MisfireCap == 0 {
		sp.MisfireCap = DefaultMisfireCap
	}
	if sp.MisfireCap < 1 || sp.MisfireCap > MaxMisfireCap {
		return n, workqtype.Invalid("misfire_cap", fmt.Sprintf("misfire cap must be between 1 and %d, got %d", MaxMisfireCap, sp.MisfireCap))
	}
	p.Overlap, p.Misfire, p.MisfireCap = string(sp.Overlap), string(sp.Misfire), int32(sp.MisfireCap)
	p.Enabled = !sp.Disabled
	return n, nil
}

// Validate reports what is wrong with sp (an error wrapping
// workqtype.ErrInvalid), or nil when Create would accept it. It touches no
// database.
func (s *Store) Validate(sp Spec) error {
	_, err := s.normalize(sp)
	return err
}

func (s *Store) now(ctx context.Context, q *gen.Queries) (time.Time, error) {
	if s.clock != nil {
		return s.clock(), nil
	}
	return q.SchedulesNow(ctx, nil)
}

// Create adds a schedule on db. Its first slot is the first one after now.
// A name already taken is ErrExists.
func (s *Store) Create(ctx context.Context, db workqtype.TxDB, sp Spec) (Schedule, error) {
	n, err := s.normalize(sp)
	if err != nil {
		return Schedule{}, err
	}
	if db, err = s.on(db); err != nil {
		return Schedule{}, err
	}
	q := gen.New(db)
	now, err := s.now(ctx, q)
	if err != nil {
		return Schedule{}, fmt.Errorf("create schedule %q: %w", sp.Name, err)
	}
	if n.Enabled {
		next := n.expr.First(now)
		n.NextRunAt = &next
	}
	if _, err := q.SchedulesInsert(ctx, n.SchedulesInsertParams); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return Schedule{}, fmt.Errorf("create schedule %q: %w", sp.Name, ErrExists)
		}
		return Schedule{}, fmt.Errorf("create schedule %q: %w", sp.Name, err)
	}
	return s.Get(ctx, db, sp.Name)
}

// Get reads one schedule by name.
func (s *Store) Get(ctx context.Context, db workqtype.TxDB, name string) (Schedule, error) {
	db, err := s.on(db)
	if err != nil {
		return Schedule{}, err
	}
	r, err := gen.New(db).SchedulesGet(ctx, name)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return Schedule{}, fmt.Errorf("schedule %q: %w", name, ErrNotFound)
		}
		return Schedule{}, fmt.Errorf("get schedule %q: %w", name, err)
	}
	return fromRow(gen.SchedulesListRow(r)), nil
}

// List reads every schedule, in name order.
func (s *Store) List(ctx context.Context, db workqtype.TxDB) ([]Schedule, error) {
	db, err := s.on(db)
	if err != nil {
		return nil, err
	}
	rows, err := gen.New(db).SchedulesList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	out := make([]Schedule, len(rows))
	for i, r := range rows {
		out[i] = fromRow(r)
	}
	return out, nil
}

var statusNames = map[int16]string{0: "ready", 1: "running", 2: "done", 3: "failed", 4: "cancelled"}

func fromRow(r gen.SchedulesListRow) Schedule {
	sc := Schedule{
		ID: r.ID, Name: r.Name, Cron: r.Cron, Timezone: r.Timezone, Queue: r.Queue, Kind: r.Kind,
		Payload: json.RawMessage(r.Payload), Priority: r.Priority, MaxAttempts: int(r.MaxAttempts),
		Overlap: OverlapPolicy(r.Overlap), Misfire: MisfirePolicy(r.Misfire), MisfireCap: int(r.MisfireCap),
		Enabled: r.Enabled, Declared: r.Declared, NextRunAt: r.NextRunAt, LastRunAt: r.LastRunAt, LastRunID: r.LastRunID,
		SkippedRuns: r.SkippedRuns, LastSkippedAt: r.LastSkippedAt, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
	switch {
	case r.LastSkippedAt != nil && (r.LastRunAt == nil || r.LastSkippedAt.After(*r.LastRunAt)):
		sc.LastOutcome = "skipped"
	case r.LastRunID == nil:
	case r.LastRunStatus == nil:
		sc.LastOutcome = "removed"
	default:
		sc.LastOutcome = statusNames[*r.LastRunStatus]
	}
	return sc
}

// modify runs f on the schedule name, read and locked in a transaction (a
// savepoint when db is one), and writes what f leaves in it.
func (s *Store) modify(ctx context.Context, db workqtype.TxDB, name string, f func(now time.Time, cur *gen.Schedule) error) error {
	db, err := s.on(db)
	if err != nil {
		return err
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	q := gen.New(tx)
	cur, err := q.SchedulesGetForUpdate(ctx, name)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("schedule %q: %w", name, ErrNotFound)
		}
		return err
	}
	now, err := s.now(ctx, q)
	if err != nil {
		return err
	}
	if err := f(now, &cur); err != nil {
		return err
	}
	err = q.SchedulesUpdate(ctx, gen.SchedulesUpdateParams{
		ID: cur.ID, Queue: cur.Queue, Kind: cur.Kind, Payload: cur.Payload, Cron: cur.Cron, Timezone: cur.Timezone,
		Priority: cur.Priority, MaxAttempts: cur.MaxAttempts, Enabled: cur.Enabled, NextRunAt: cur.NextRunAt,
		Overlap: cur.Overlap, Misfire: cur.Misfire, MisfireCap: cur.MisfireCap,
	})
	if err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// Update changes the fields of schedule name that c sets. A changed cron
// expression or time zone moves the next run to the first new slot after
// now; otherwise the next run stays.
func (s *Store) Update(ctx context.Context, db workqtype.TxDB, name string, c Changes) (Schedule, error) {
	err := s.modify(ctx, db, name, func(now time.Time, cur *gen.Schedule) error {
		sp := Spec{
			Name: cur.Name, Cron: cur.Cron, Timezone: cur.Timezone, Queue: cur.Queue, Kind: cur.Kind,
			Payload: json.RawMessage(cur.Payload), Priority: cur.Priority, MaxAttempts: int(cur.MaxAttempts),
			Overlap: OverlapPolicy(cur.Overlap), Misfire: MisfirePolicy(cur.Misfire), MisfireCap: int(cur.MisfireCap),
			Disabled: !cur.Enabled,
		}
		set(&sp.Cron, c.Cron)
		set(&sp.Timezone, c.Timezone)
		set(&sp.Queue, c.Queue)
		set(&sp.Kind, c.Kind)
		set(&sp.Priority, c.Priority)
		set(&sp.MaxAttempts, c.MaxAttempts)
		set(&sp.Overlap, c.Overlap)
		set(&sp.Misfire, c.Misfire)
		set(&sp.MisfireCap, c.MisfireCap)
		if c.Payload != nil {
			sp.Payload = c.Payload
		}
		// Empty strings given explicitly are mistakes, not "the default".
		for _, f := range []struct {
			name string
			p    *string
		}{{"cron", c.Cron}, {"timezone", c.Timezone}, {"queue", c.Queue}, {"kind", c.Kind}} {
			if f.p != nil && *f.p == "" {
				return workqtype.Invalid(f.name, f.name+" must not be empty")
			}
		}
		if (c.Overlap != nil && *c.Overlap == "") || (c.Misfire != nil && *c.Misfire == "") || (c.MisfireCap != nil && *c.MisfireCap == 0) || (c.MaxAttempts != nil && *c.MaxAttempts == 0) {
			return workqtype.Invalid("", "an explicit overlap, misfire, misfire cap or max attempts must not be empty or zero")
		}
		n, err := s.normalize(sp)
		if err != nil {
			return err
		}
		reslot := n.Cron != cur.Cron || n.Timezone != cur.Timezone || (cur.Enabled && cur.NextRunAt == nil)
		p := n.SchedulesInsertParams
		cur.Cron, cur.Timezone, cur.Queue, cur.Kind, cur.Payload = p.Cron, p.Timezone, p.Queue, p.Kind, p.Payload
		cur.Priority, cur.MaxAttempts, cur.Overlap, cur.Misfire, cur.MisfireCap = p.Priority, p.MaxAttempts, p.Overlap, p.Misfire, p.MisfireCap
		if reslot && cur.Enabled {
			next := n.expr.First(now)
			cur.NextRunAt = &next
		}
		return nil
	})
	if err != nil {
		return Schedule{}, fmt.Errorf("update schedule %q: %w", name, err)
	}
	return s.Get(ctx, db, name)
}

func set[T any](dst *T, src *T) {
	if src != nil {
		*dst = *src
	}
}

// Enable turns schedule name on. Its next run is the first slot after now:
// slots that passed while it was disabled are not caught up. Enabling an
// enabled schedule changes nothing.
func (s *Store) Enable(ctx context.Context, db workqtype.TxDB, name string) (Schedule, error) {
	return s.setEnabled(ctx, db, name, true)
}

// Disable turns schedule name off: the scheduler leaves it alone until
// Enable. Runs already made are not touched.
func (s *Store) Disable(ctx context.Context, db workqtype.TxDB, name string) (Schedule, error) {
	return s.setEnabled(ctx, db, name, false)
}

func (s *Store) setEnabled(ctx context.Context, db workqtype.TxDB, name string, on bool) (Schedule, error) {
	err := s.modify(ctx, db, name, func(now time.Time, cur *gen.Schedule) error {
		if cur.Enabled == on && (!on || cur.NextRunAt != nil) {
			return nil
		}
		cur.Enabled = on
		cur.NextRunAt = nil
		if on {
			expr, err := ParseCron(cur.Cron, cur.Timezone)
			if err != nil {
				return fmt.Errorf("stored cron no longer parses; fix it with update: %w", err)
			}
			next := expr.First(now)
			cur.NextRunAt = &next
		}
		return nil
	})
	if err != nil {
		verb := "disable"
		if on {
			verb = "enable"
		}
		return Schedule{}, fmt.Errorf("%s schedule %q: %w", verb, name, err)
	}
	return s.Get(ctx, db, name)
}

// Delete removes schedule name. Its job runs stay (their schedule_id
// becomes null); a live one still runs.
func (s *Store) Delete(ctx context.Context, db workqtype.TxDB, name string) error {
	db, err := s.on(db)
	if err != nil {
		return err
	}
	n, err := gen.New(db).SchedulesDelete(ctx, name)
	if err != nil {
		return fmt.Errorf("delete schedule %q: %w", name, err)
	}
	if n == 0 {
		return fmt.Errorf("delete schedule %q: %w", name, ErrNotFound)
	}
	return nil
}

// TriggerNow enqueues one run of schedule name now, outside its slots: it
// has the schedule's id but no scheduled time, so it never takes (or
// blocks) a slot, and next_run_at does not move. It works on a disabled
// schedule too. With overlap policy skip and the previous run still live
// it returns ErrOverlap and enqueues nothing, unless force is set.
func (s *Store) TriggerNow(ctx context.Context, db workqtype.TxDB, name string, force bool) (Triggered, error) {
	db, err := s.on(db)
	if err != nil {
		return Triggered{}, err
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return Triggered{}, fmt.Errorf("trigger schedule %q: %w", name, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	q := gen.New(tx)
	// The row lock orders the trigger with the scheduler's tick of the same
	// schedule, so the live-run check and the insert see one history.
	cur, err := q.SchedulesGetForUpdate(ctx, name)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return Triggered{}, fmt.Errorf("trigger schedule %q: %w", name, ErrNotFound)
		}
		return Triggered{}, fmt.Errorf("trigger schedule %q: %w", name, err)
	}
	if OverlapPolicy(cur.Overlap) == OverlapSkip && !force && cur.LastRunID != nil {
		live, err := q.SchedulesLiveRun(ctx, *cur.LastRunID)
		switch {
		case err == nil:
			return Triggered{}, fmt.Errorf("trigger schedule %q: %w: run %d is not finished and the overlap policy is skip (force, or --force, runs it anyway)", name, ErrOverlap, live)
		case !errors.Is(err, pgx.ErrNoRows):
			return Triggered{}, fmt.Errorf("trigger schedule %q: %w", name, err)
		}
	}
	now, err := s.now(ctx, q)
	if err != nil {
		return Triggered{}, fmt.Errorf("trigger schedule %q: %w", name, err)
	}
	id, err := q.SchedulesTrigger(ctx, cur.ID, now)
	if err != nil {
		return Triggered{}, fmt.Errorf("trigger schedule %q: %w", name, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return Triggered{}, fmt.Errorf("trigger schedule %q: %w", name, err)
	}
	return Triggered{RunID: id}, nil
}
