package schedule

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/workqtype"
)

// Reconciled is what one Reconcile did.
type Reconciled struct {
	// Superseded: a newer set of declarations is alive on the schema (a
	// process started with them, first seen after this set); this set was
	// recorded as alive and nothing else changed.
	Superseded bool
	// Applied: this set was written to the schedules (it was not the set
	// applied last). False with Superseded false: it already was.
	Applied bool
	// The declared schedules the apply created, changed, disabled (their
	// declaration is gone) and enabled again (re-declared), by name.
	Created, Updated, Disabled, Enabled []string
}

// Changed reports whether the apply changed any schedule.
func (r Reconciled) Changed() bool {
	return len(r.Created)+len(r.Updated)+len(r.Disabled)+len(r.Enabled) > 0
}

// Fingerprint returns the identity of a set of declarations: the SHA-256 of
// the normalized specs in name order. Two processes declaring the same
// schedules (however ordered, with defaults spelled or not) have the same.
func (s *Store) Fingerprint(specs []Spec) ([]byte, error) {
	ns, err := s.normalizeAll(specs)
	if err != nil {
		return nil, err
	}
	return fingerprint(ns), nil
}

func (s *Store) normalizeAll(specs []Spec) ([]normalized, error) {
	ns := make([]normalized, 0, len(specs))
	seen := map[string]bool{}
	var errs []error
	for i, sp := range specs {
		n, err := s.normalize(sp)
		if err != nil {
			errs = append(errs, fmt.Errorf("periodic job %d (%q): %w", i, sp.Name, err))
			continue
		}
		if seen[n.Name] {
			errs = append(errs, workqtype.Invalid("name", fmt.Sprintf("periodic job %q is declared twice", n.Name)))
			continue
		}
		seen[n.Name] = true
		ns = append(ns, n)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	slices.SortFunc(ns, func(a, b normalized) int { return strings.Compare(a.Name, b.Name) })
	return ns, nil
}

func fingerprint(ns []normalized) []byte {
	h := sha256.New()
	h.Write([]byte("workq periodic jobs v1\x00"))
	field := func(b []byte) {
		_ = binary.Write(h, binary.BigEndian, uint32(len(b)))
		h.Write(b)
	}
	for _, n := range ns {
		p := n.SchedulesInsertParams
		for _, f := range []string{p.Name, p.Cron, p.Timezone, p.Queue, p.Kind, p.Overlap, p.Misfire} {
			field([]byte(f))
		}
		field(canonicalJSON(p.Payload))
		_ = binary.Write(h, binary.BigEndian, []int32{int32(p.Priority), p.MaxAttempts, p.MisfireCap})
	}
	return h.Sum(nil)
}

// canonicalJSON returns b re-encoded with sorted keys and no spaces, so a
// payload reads the same from Go and back from jsonb.
func canonicalJSON(b []byte) []byte {
	v, ok := decodeJSON(b)
	if !ok {
		return b
	}
	out, err := json.Marshal(v)
	if err != nil {
		return b
	}
	return out
}

func decodeJSON(b []byte) (any, bool) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, false
	}
	return v, true
}

func sameJSON(a, b []byte) bool {
	va, okA := decodeJSON(a)
	vb, okB := decodeJSON(b)
	if !okA || !okB {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(va, vb)
}

// Reconcile makes the declared schedules on db (one shard's schema) what
// specs declare, when specs is the newest set of declarations alive there,
// in one transaction that serialises with every other Reconcile on the
// schema:
//
//   - The set (its Fingerprint) is recorded as alive for alive from now;
//     a set is dated by the first Reconcile that saw it.
//   - When a newer set is alive, nothing else changes (Superseded): an old
//     process of a rolling deploy leaves the new declarations alone.
//   - When the set is the one applied last, nothing else changes either:
//     an operator's change to a declared schedule (update, disable) holds
//     until another set is applied.
//   - Otherwise the set is applied: a declared schedule that is missing is
//     created; one that differs is updated (a changed cron or time zone
//     moves its next run to the new expression's first slot); a disabled
//     one is enabled again; a declared schedule no spec names is disabled,
//     not deleted (its runs and history stay; re-declaring it enables it).
//     A spec naming a schedule an operator created fails with
//     ErrExists and changes nothing: operators' schedules are never
//     touched.
func (s *Store) Reconcile(ctx context.Context, db workqtype.TxDB, specs []Spec, alive time.Duration) (Reconciled, error) {
	var res Reconciled
	ns, err := s.normalizeAll(specs)
	if err != nil {
		return res, err
	}
	if db, err = s.on(db); err != nil {
		return res, err
	}
	fp := fingerprint(ns)
	tx, err := db.Begin(ctx)
	if err != nil {
		return res, fmt.Errorf("reconcile periodic jobs: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	q := gen.New(tx)
	if err := q.PeriodicSetsLock(ctx); err != nil {
		return res, fmt.Errorf("reconcile periodic jobs: lock: %w", err)
	}
	seen, err := q.PeriodicSetsSeen(ctx, fp, max(alive, time.Second).Seconds())
	if err != nil {
		return res, fmt.Errorf("reconcile periodic jobs: record the set: %w", err)
	}
	if err := q.PeriodicSetsPrune(ctx); err != nil {
		return res, fmt.Errorf("reconcile periodic jobs: prune: %w", err)
	}
	res.Superseded = seen.Superseded
	if !seen.Superseded && !seen.Current {
		if err := s.apply(ctx, q, ns, &res); err != nil {
			return Reconciled{}, fmt.Errorf("reconcile periodic jobs: %w", err)
		}
		if err := q.PeriodicSetsApplied(ctx, fp); err != nil {
			return Reconciled{}, fmt.Errorf("reconcile periodic jobs: %w", err)
		}
		res.Applied = true
	}
	if err := tx.Commit(ctx); err != nil {
		return Reconciled{}, fmt.Errorf("reconcile periodic jobs: commit: %w", err)
	}
	return res, nil
}

// apply writes ns over the declared schedules in q's transaction.
func (s *Store) apply(ctx context.Context, q *gen.Queries, ns []normalized, res *Reconciled) error {
	names := make([]string, len(ns))
	for i, n := range ns {
		names[i] = n.Name
	}
	rows, err := q.SchedulesForReconcile(ctx, names)
	if err != nil {
		return fmt.Errorf("read the declared schedules: %w", err)
	}
	stored := make(map[string]gen.Schedule, len(rows))
	for _, r := range rows {
		stored[r.Name] = r
	}
	now, err := s.now(ctx, q)
	if err != nil {
		return err
	}
	for _, n := range ns {
		cur, ok := stored[n.Name]
		delete(stored, n.Name)
		if !ok {
			p := n.SchedulesInsertParams
			next := n.expr.First(now)
			p.Enabled, p.NextRunAt, p.Declared = true, &next, true
			if _, err := q.SchedulesInsert(ctx, p); err != nil {
				if errors.Is(err, pgx.ErrNoRows) {
					return fmt.Errorf("periodic job %q: %w", n.Name, ErrExists)
				}
				return fmt.Errorf("create periodic job %q: %w", n.Name, err)
			}
			res.Created = append(res.Created, n.Name)
			continue
		}
		if !cur.Declared {
			return fmt.Errorf("periodic job %q: %w: it was created through CreateSchedule, the API or the CLI, "+
				"and workq leaves such schedules alone; delete it (workq schedules remove %s) or rename the declaration", n.Name, ErrExists, n.Name)
		}
		p := n.SchedulesInsertParams
		reslot := p.Cron != cur.Cron || p.Timezone != cur.Timezone || !cur.Enabled || cur.NextRunAt == nil
		changed := p.Cron != cur.Cron || p.Timezone != cur.Timezone || p.Queue != cur.Queue || p.Kind != cur.Kind ||
			!sameJSON(p.Payload, cur.Payload) || p.Priority != cur.Priority || p.MaxAttempts != cur.MaxAttempts ||
			p.Overlap != cur.Overlap || p.Misfire != cur.Misfire || p.MisfireCap != cur.MisfireCap
		if !changed && !reslot {
			continue
		}
		switch {
		case !cur.Enabled:
			res.Enabled = append(res.Enabled, n.Name)
		case changed:
			res.Updated = append(res.Updated, n.Name)
		}
		next := cur.NextRunAt
		if reslot {
			t := n.expr.First(now)
			next = &t
		}
		err := q.SchedulesUpdate(ctx, gen.SchedulesUpdateParams{
			ID: cur.ID, Queue: p.Queue, Kind: p.Kind, Payload: p.Payload, Cron: p.Cron, Timezone: p.Timezone,
			Priority: p.Priority, MaxAttempts: p.MaxAttempts, Enabled: true, NextRunAt: next,
			Overlap: p.Overlap, Misfire: p.Misfire, MisfireCap: p.MisfireCap,
		})
		if err != nil {
			return fmt.Errorf("update periodic job %q: %w", n.Name, err)
		}
	}
	// What is left is declared and no longer in the set.
	gone := make([]string, 0, len(stored))
	for name := range stored {
		gone = append(gone, name)
	}
	slices.Sort(gone)
	for _, name := range gone {
		cur := stored[name]
		if !cur.Enabled {
			continue
		}
		err := q.SchedulesUpdate(ctx, gen.SchedulesUpdateParams{
			ID: cur.ID, Queue: cur.Queue, Kind: cur.Kind, Payload: cur.Payload, Cron: cur.Cron, Timezone: cur.Timezone,
			Priority: cur.Priority, MaxAttempts: cur.MaxAttempts, Enabled: false, NextRunAt: nil,
			Overlap: cur.Overlap, Misfire: cur.Misfire, MisfireCap: cur.MisfireCap,
		})
		if err != nil {
			return fmt.Errorf("disable periodic job %q: %w", name, err)
		}
		res.Disabled = append(res.Disabled, name)
	}
	return nil
}
