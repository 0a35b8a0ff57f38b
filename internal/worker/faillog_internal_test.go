package worker

import (
	"log/slog"
	"testing"
	"time"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testutil"
)

// The failure log's window, on a clock the test drives: burst lines per
// window, the rest counted and reported once the window has ended (by the
// next failure or the watchdog's flush), never before.
func TestFailureLogWindow(t *testing.T) {
	var buf testutil.Buffer
	p := &producer{w: &Worker{log: slog.New(slog.NewJSONHandler(&buf, nil)), failBurst: 2, failWindow: time.Minute},
		src: Source{Table: lease.JobRuns}, queue: "q"}
	retry := lease.Completion{Outcome: lease.Retry, Error: "webhook returned 500", Delay: time.Second}
	item := func(attempt int32) *lease.Item {
		return &lease.Item{Table: lease.JobRuns, Queue: "q", ID: int64(attempt), Kind: "webhook", Attempt: attempt, MaxAttempts: 4}
	}
	t0 := time.Now()
	steps := []struct {
		at      time.Duration
		report  *lease.Item // nil: a watchdog flush
		wantMsg string      // the line this step logs, "" none
		want    map[string]any
	}{
		{0, item(1), "handler failed", map[string]any{"outcome": "retry", "attempt": 1.0, "queue": "q", "err": "webhook returned 500"}},
		{time.Second, item(2), "handler failed", map[string]any{"outcome": "retry", "attempt": 2.0}},
		{2 * time.Second, item(3), "", nil}, // over the burst
		{3 * time.Second, item(4), "", nil},
		{30 * time.Second, nil, "", nil}, // the window has not ended
		{61 * time.Second, nil, "handler failures not logged (rate limit)", map[string]any{"count": 2.0, "table": "job_runs", "queue": "q"}},
		{62 * time.Second, item(4), "handler failed", map[string]any{"outcome": "failed", "attempt": 4.0}}, // a new window; no attempts left
		{63 * time.Second, nil, "", nil},
	}
	seen := 0
	for i, s := range steps {
		now := t0.Add(s.at)
		if s.report != nil {
			p.failures.report(p, s.report, retry, now)
		} else {
			p.failures.flush(p, false, now)
		}
		recs := buf.Records()
		if len(recs) != seen+boolInt(s.wantMsg != "") {
			t.Fatalf("step %d: %d log lines, want %d: %v", i, len(recs), seen+boolInt(s.wantMsg != ""), recs)
		}
		if s.wantMsg == "" {
			continue
		}
		rec := recs[seen]
		seen++
		if rec["msg"] != s.wantMsg || rec["level"] != "WARN" {
			t.Errorf("step %d: %v %q, want WARN %q", i, rec["level"], rec["msg"], s.wantMsg)
		}
		for k, v := range s.want {
			if rec[k] != v {
				t.Errorf("step %d: %s = %v, want %v", i, k, rec[k], v)
			}
		}
	}
	// Stopping reports what the current window did not log, at once.
	p.failures.report(p, item(1), retry, t0.Add(64*time.Second))
	p.failures.report(p, item(1), retry, t0.Add(65*time.Second))
	p.failures.flush(p, true, t0.Add(66*time.Second))
	recs := buf.Records()
	if last := recs[len(recs)-1]; len(recs) != seen+2 || last["msg"] != "handler failures not logged (rate limit)" || last["count"] != 1.0 {
		t.Errorf("after stop: lines %v; want one more failure and a count of 1 not logged", recs[seen:])
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestTruncate(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly", 7, "exactly"},
		{"abcdef", 3, "abc…"},
		{"aé", 2, "a…"}, // é is two bytes: never cut inside a rune
	} {
		if got := truncate(c.in, c.n); got != c.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}
