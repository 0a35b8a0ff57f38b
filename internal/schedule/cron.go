package schedule

import (
	"fmt"
	"strings"
	"time"

	cron "github.com/netresearch/go-cron"
	"github.com/workq/workq/workqtype"
)

// parser accepts 5 fields (minute hour day-of-month month day-of-week), an
// optional leading seconds field (6 fields), and the descriptors @yearly,
// @annually, @monthly, @weekly, @daily, @midnight, @hourly and
// @every <duration>. It is immutable and safe for concurrent use.
var parser = cron.MustNewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor).
	WithMinEveryInterval(time.Second)

// maxScan bounds how many slots one schedule enumerates forward in one
// tick; past it the latest missed slots are found backwards (Prev).
const maxScan = 100_000

// Expr is a parsed cron expression in its time zone: it says when a
// schedule's slots are.
type Expr struct {
	spec  cron.Schedule
	loc   *time.Location
	every time.Duration // > 0 for @every: slots are anchor + k*every
	// fixedHour: the hour field is not "every hour", so a wall-clock time
	// repeated by a fall-back transition runs once, not twice.
	fixedHour bool
}

// ParseCron parses a cron expression for the IANA time zone tz ("" is
// UTC). Errors wrap workqtype.ErrInvalid and say what is wrong.
func ParseCron(expr, tz string) (*Expr, error) {
	loc, err := loadZone(tz)
	if err != nil {
		return nil, err
	}
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return nil, workqtype.Invalid("cron", "cron expression is empty")
	}
	if len(expr) > 256 {
		return nil, workqtype.Invalid("cron", "cron expression is longer than 256 bytes")
	}
	if u := strings.ToUpper(expr); strings.HasPrefix(u, "TZ=") || strings.HasPrefix(u, "CRON_TZ=") {
		return nil, workqtype.Invalid("cron", fmt.Sprintf("cron %q: set the time zone as the schedule's timezone (--timezone), not with TZ= in the expression", expr))
	}
	e := &Expr{loc: loc}
	if rest, ok := strings.CutPrefix(expr, "@every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil {
			return nil, workqtype.Invalid("cron", fmt.Sprintf("cron %q: @every takes a Go duration such as 90s, 5m or 1h30m", expr))
		}
		if d < time.Second || d%time.Second != 0 {
			return nil, workqtype.Invalid("cron", fmt.Sprintf("cron %q: @every needs a whole number of seconds, at least 1s", expr))
		}
		e.every = d
	}
	spec, err := parser.Parse(expr)
	if err != nil {
		return nil, workqtype.Invalid("cron", fmt.Sprintf("cron %q: %v (5 fields: minute hour day-of-month month day-of-week, an optional leading seconds field, or @hourly, @daily, @weekly, @monthly, @yearly, @every <duration>)", expr, err))
	}
	e.spec = spec
	if ss, ok := spec.(*cron.SpecSchedule); ok {
		e.fixedHour = ss.Hour&(1<<24-1) != 1<<24-1
	}
	if e.every == 0 && e.spec.Next(time.Now().In(loc)).IsZero() {
		return nil, workqtype.Invalid("cron", fmt.Sprintf("cron %q never fires", expr))
	}
	return e, nil
}

// loadZone returns the location of an IANA zone name; "" is UTC.
func loadZone(tz string) (*time.Location, error) {
	switch tz {
	case "", "UTC":
		return time.UTC, nil
	case "Local":
		return nil, workqtype.Invalid("timezone", fmt.Sprintf("time zone %q depends on the machine; name an IANA zone such as Europe/Berlin", tz))
	}
	if len(tz) > 64 {
		return nil, workqtype.Invalid("timezone", "time zone name longer than 64 bytes")
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, workqtype.Invalid("timezone", fmt.Sprintf("unknown time zone %q (an IANA name such as Europe/Berlin or America/New_York)", tz))
	}
	return loc, nil
}

// First returns the first slot after t: where a new (or re-enabled)
// schedule starts.
func (e *Expr) First(t time.Time) time.Time {
	if e.every > 0 {
		return t.Truncate(time.Second).Add(e.every)
	}
	return e.after(time.Time{}, t)
}

// after returns the first slot later than t of the slot stream that
// contains anchor (a slot: a schedule's next_run_at). @every streams are
// anchored; cron streams are fixed by the expression alone. The zero time
// means there is none.
func (e *Expr) after(anchor, t time.Time) time.Time {
	if e.every > 0 {
		if anchor.After(t) {
			return anchor
		}
		k := t.Sub(anchor)/e.every + 1
		return anchor.Add(k * e.every)
	}
	n := e.spec.Next(t.In(e.loc))
	// A loop, not one step: an expression with several slots in the
	// repeated hour (*/30 2 * * *) meets each of them again.
	for e.fixedHour && e.repeatedWallTime(n) {
		n = e.spec.Next(n)
	}
	return n.UTC()
}

// repeatedWallTime reports whether n is the second occurrence of its local
// wall-clock time: the clocks fell back over it, and the same reading
// (so the same slot, as cron fields match wall-clock readings) already
// happened up to three hours earlier.
func (e *Expr) repeatedWallTime(n time.Time) bool {
	if n.IsZero() {
		return false
	}
	_, offNow := n.Zone()
	_, offBefore := n.Add(-3 * time.Hour).Zone()
	if offBefore <= offNow {
		return false
	}
	m := n.Add(-time.Duration(offBefore-offNow) * time.Second)
	y1, mo1, d1 := m.Date()
	y2, mo2, d2 := n.Date()
	return y1 == y2 && mo1 == mo2 && d1 == d2 && m.Hour() == n.Hour() && m.Minute() == n.Minute() && m.Second() == n.Second()
}

// Next returns the next n slots after t (for display).
func (e *Expr) Next(t time.Time, n int) []time.Time {
	var out []time.Time
	anchor := e.First(t)
	for s := anchor; !s.IsZero() && len(out) < n; s = e.after(anchor, s) {
		out = append(out, s)
	}
	return out
}

// latestBefore returns, oldest first, the latest n slots s of anchor's
// stream with anchor <= s < limit.
func (e *Expr) latestBefore(anchor, limit time.Time, n int) []time.Time {
	if n <= 0 || !anchor.Before(limit) {
		return nil
	}
	if e.every > 0 {
		last := (limit.Sub(anchor) - 1) / e.every // index of the latest slot before limit
		first := max(0, last-time.Duration(n)+1)
		out := make([]time.Time, 0, int(last-first)+1)
		for k := first; k <= last; k++ {
			out = append(out, anchor.Add(k*e.every))
		}
		return out
	}
	// Forward from anchor, keeping the last n (exactly the slots Next
	// produces, DST included); bounded, then backwards as a fallback.
	ring := make([]time.Time, 0, n)
	s := anchor
	for i := 0; i < maxScan; i++ {
		if s.IsZero() || !s.Before(limit) {
			return ring
		}
		if len(ring) == n {
			ring = append(ring[:0], ring[1:]...)
		}
		ring = append(ring, s)
		s = e.after(anchor, s)
	}
	sp, ok := e.spec.(cron.ScheduleWithPrev)
	if !ok {
		return ring
	}
	var back []time.Time
	for t := limit; len(back) < n; {
		p := sp.Prev(t.In(e.loc)).UTC()
		if p.IsZero() || p.Before(anchor) {
			break
		}
		back = append(back, p)
		t = p
	}
	for i, j := 0, len(back)-1; i < j; i, j = i+1, j-1 {
		back[i], back[j] = back[j], back[i]
	}
	return back
}

// plan is what one tick does with one due schedule.
type plan struct {
	slots []time.Time // to materialise, oldest first
	next  time.Time   // the schedule's new next_run_at (first slot after now)
}

// duePlan returns the slots of a schedule whose next slot is nextRunAt that
// are due at now under misfire policy m: every slot no more than grace late
// (on time), and of the missed ones (older) none (skip), the latest one
// when no slot is on time (run once), or the latest cap (run all).
func (e *Expr) duePlan(nextRunAt, now time.Time, grace time.Duration, m MisfirePolicy, capN int) plan {
	p := plan{next: e.after(nextRunAt, now)}
	cutoff := now.Add(-grace)
	start := nextRunAt
	if start.Before(cutoff) {
		start = e.after(nextRunAt, cutoff.Add(-time.Nanosecond))
	}
	var onTime []time.Time
	for s := start; !s.IsZero() && !s.After(now) && len(onTime) < maxScan; s = e.after(nextRunAt, s) {
		onTime = append(onTime, s)
	}
	if nextRunAt.Before(cutoff) {
		switch m {
		case MisfireRunAll:
			p.slots = e.latestBefore(nextRunAt, cutoff, capN)
		case MisfireRunOnce:
			if len(onTime) == 0 {
				p.slots = e.latestBefore(nextRunAt, cutoff, 1)
			}
		}
	}
	p.slots = append(p.slots, onTime...)
	return p
}
