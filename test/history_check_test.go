package test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// The history checker must catch what it is there to catch: each case
// forges a history that breaks one rule (the real runtime cannot be made to)
// and wants a violation saying so; the first case breaks nothing.
func TestHistoryCheckerCatchesViolations(t *testing.T) {
	at := func(ms int) time.Time { return forgeEpoch.Add(time.Duration(ms) * time.Millisecond) }
	for _, tc := range []struct {
		name  string
		opts  historyOpts
		build func(b *forge)
		want  []string // substrings of the violations, in any order; none for a clean history
	}{
		{"a clean history", historyOpts{AllDone: true}, func(b *forge) {
			it := b.item("job_runs", 1, "q", 2, "")
			it.claim(at(0), 1, "a", 4000).heartbeat(at(1000), "a", 5000).handler(1, at(100), at(2000), "ok").end(at(2100), "a", 2, "done")
		}, nil},
		{"a second holder while the first lease is valid", historyOpts{}, func(b *forge) {
			it := b.item("job_runs", 1, "q", 1, "")
			it.claim(at(0), 1, "a", 4000).claim(at(2000), 2, "b", 6000)
		}, []string{"while lease v1 was not ended", "two holders at once"}},
		{"a heartbeat reviving an expired lease", historyOpts{}, func(b *forge) {
			it := b.item("job_runs", 1, "q", 0, "")
			it.claim(at(0), 1, "a", 4000).heartbeat(at(4500), "a", 8500).end(at(9000), "a", 0, "expired")
		}, []string{"extended lease v1, which had expired"}},
		{"a reap before the lease expired", historyOpts{}, func(b *forge) {
			it := b.item("job_runs", 1, "q", 0, "")
			it.claim(at(0), 1, "a", 4000).end(at(3000), "a", 0, "expired")
		}, []string{"reaped by a statement from"}},
		{"done without a handler run", historyOpts{}, func(b *forge) {
			it := b.item("job_runs", 1, "q", 2, "")
			it.claim(at(0), 1, "a", 4000).end(at(100), "a", 2, "done")
		}, []string{"without a handler run of that attempt that finished before"}},
		{"done before its handler finished", historyOpts{}, func(b *forge) {
			it := b.item("job_runs", 1, "q", 2, "")
			it.claim(at(0), 1, "a", 4000).handler(1, at(10), at(200), "ok").end(at(100), "a", 2, "done")
		}, []string{"after its lease v1 stopped being valid", "without a handler run of that attempt that finished before"}},
		{"a handler running past its lease", historyOpts{}, func(b *forge) {
			it := b.item("job_runs", 1, "q", 2, "")
			it.claim(at(0), 1, "a", 4000).handler(1, at(10), at(4200), "cancelled").end(at(5000), "a", 0, "expired")
			it.claim(at(5100), 2, "b", 9100).handler(2, at(5200), at(5300), "ok").end(at(5400), "b", 2, "done")
		}, []string{"handler run of attempt 1 ended (cancelled)"}},
		{"a handler run without a lease", historyOpts{}, func(b *forge) {
			b.item("job_runs", 1, "q", 0, "").handler(1, at(10), at(20), "ok")
		}, []string{"without a lease claimed before it"}},
		{"attempts over max", historyOpts{}, func(b *forge) {
			it := b.item("job_runs", 1, "q", 3, "")
			it.maxAttempts = 1
			it.claim(at(0), 1, "a", 100).end(at(200), "a", 0, "expired")
			it.claim(at(300), 2, "b", 400).end(at(500), "b", 3, "expired")
		}, []string{"attempts 2 over max 1", "2 attempts used, max 1"}},
		{"a second terminal state", historyOpts{}, func(b *forge) {
			it := b.item("job_runs", 1, "q", 2, "")
			it.claim(at(0), 1, "a", 4000).handler(1, at(10), at(20), "ok").end(at(30), "a", 2, "done")
			it.status = 2
			it.claim(at(40), 2, "b", 4040).handler(2, at(50), at(60), "ok").end(at(70), "b", 2, "done")
		}, []string{"left its terminal state 2", "2 terminal ends"}},
		{"an end with no run archived", historyOpts{}, func(b *forge) {
			it := b.item("job_runs", 1, "q", 0, "")
			it.claim(at(0), 1, "a", 100)
			it.end(at(200), "a", 0, "expired")
			it.Runs = nil
		}, []string{"ended at", "without a run archived"}},
		{"workflow tasks released and cancelled cleanly", historyOpts{}, func(b *forge) {
			it := b.item("job_runs", 1, "q", 2, "")
			it.status = -1
			it.leavePending(at(0), "release").claim(at(10), 1, "a", 4000).handler(1, at(20), at(30), "ok").end(at(40), "a", 2, "done")
			c := b.item("job_runs", 2, "q", 4, "")
			c.status = -1
			c.leavePending(at(50), "depcancel")
		}, nil},
		{"a workflow task released during a lease", historyOpts{}, func(b *forge) {
			it := b.item("job_runs", 1, "q", 2, "")
			it.claim(at(0), 1, "a", 4000).leavePending(at(10), "release").handler(1, at(20), at(30), "ok").end(at(40), "a", 2, "done")
		}, []string{"release at", "while lease v1 was open"}},
		{"a cancelled workflow task with no end on record", historyOpts{}, func(b *forge) {
			b.item("job_runs", 1, "q", 4, "")
		}, []string{"status 4 but 0 terminal ends on record"}},
		{"not done when all should be", historyOpts{AllDone: true}, func(b *forge) {
			b.item("job_runs", 1, "q", 0, "")
		}, []string{"status 0 at the end, want done"}},
		{"two messages of a key in flight", historyOpts{}, func(b *forge) {
			m1 := b.item("outbox", 1, "q", 2, "k")
			m1.claim(at(0), 1, "a", 4000).handler(1, at(10), at(300), "ok").end(at(310), "a", 2, "done")
			m2 := b.item("outbox", 2, "q", 2, "k")
			m2.claim(at(100), 1, "b", 4100).handler(1, at(200), at(400), "ok").end(at(410), "b", 2, "done")
		}, []string{"key q/k: in progress at", "key q/k: at the receiver at", "before message 1 before it in write order was done"}},
		{"more than W valid leases", historyOpts{Limits: map[string]int{"job_runs/q": 2}}, func(b *forge) {
			for i := range 3 {
				it := b.item("job_runs", int64(i+1), "q", 2, "")
				tok := fmt.Sprint("t", i)
				it.claim(at(10*i), 1, tok, 4000).handler(1, at(10*i+1), at(100), "ok").end(at(101+i), tok, 2, "done")
			}
		}, []string{"job_runs/q: 3 valid leases at", "job_runs/q: 3 handlers running at"}},
		{"more starts than the rate in a sliding window", historyOpts{Rates: map[string]flowRate{"job_runs/q": {2, time.Second}}}, func(b *forge) {
			// 0, 600 and 1300 ms: no window of a second holds three, though
			// the clock's second 12:00:00-01 holds two and 01-02 one; 1500
			// ms makes 600, 1300 and 1500 three within a second.
			for i, ms := range []int{0, 600, 1300, 1500} {
				it := b.item("job_runs", int64(i+1), "q", 2, "")
				tok := fmt.Sprint("t", i)
				it.claim(at(ms), 1, tok, ms+4000).handler(1, at(ms+1), at(ms+50), "ok").end(at(ms+60), tok, 2, "done")
			}
		}, []string{"job_runs/q: 3 starts in the 1s from 12:00:00.600000, limit 2"}},
		{"two of a limit key in progress", historyOpts{KeyConcurrency: map[string]int{"job_runs/q": 1}}, func(b *forge) {
			j1 := b.item("job_runs", 1, "q", 2, "k")
			j1.claim(at(0), 1, "a", 4000).handler(1, at(10), at(300), "ok").end(at(310), "a", 2, "done")
			j2 := b.item("job_runs", 2, "q", 2, "k")
			j2.claim(at(100), 1, "b", 4100).handler(1, at(200), at(400), "ok").end(at(410), "b", 2, "done")
			j3 := b.item("job_runs", 3, "q", 2, "other") // another key may run alongside
			j3.claim(at(50), 1, "c", 4050).handler(1, at(60), at(500), "ok").end(at(510), "c", 2, "done")
		}, []string{"key job_runs/q/k: 2 in progress at", "key job_runs/q/k: 2 at the receiver at"}},
		{"a limit key's next item after a reap", historyOpts{KeyConcurrency: map[string]int{"job_runs/q": 1}}, func(b *forge) {
			j1 := b.item("job_runs", 1, "q", 2, "k")
			j1.claim(at(0), 1, "a", 1000).handler(1, at(10), at(900), "cancelled").end(at(1200), "a", 0, "expired")
			j1.claim(at(1300), 2, "c", 5300).handler(2, at(1310), at(1400), "ok").end(at(1410), "c", 2, "done")
			j2 := b.item("job_runs", 2, "q", 2, "k")
			j2.claim(at(1210), 1, "b", 5210).handler(1, at(1220), at(1250), "ok").end(at(1260), "b", 2, "done")
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &forge{h: &history{Items: map[itemKey]*itemHistory{}}}
			tc.build(b)
			vs := b.h.violations(tc.opts)
			var got []string
			for _, v := range vs {
				got = append(got, v.what)
			}
			all := strings.Join(got, "\n")
			if len(tc.want) == 0 && len(vs) > 0 {
				t.Errorf("violations in a clean history:\n%s", all)
			}
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("no violation says %q; got:\n%s", w, all)
				}
			}
		})
	}
}

// forgeEpoch is time 0 of forged histories; lease ends are given in
// milliseconds after it.
var forgeEpoch = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

// forge builds a history by hand.
type forge struct{ h *history }

type forgedItem struct {
	*itemHistory
	maxAttempts int32
	status      int16
	attempts    int32
	version     int64
}

func (b *forge) item(table string, id int64, queue string, status int16, key string) *forgedItem {
	it := &itemHistory{itemRow: itemRow{Table: table, ID: id, Queue: queue, Status: status, MaxAttempts: 4, KeySeq: id}}
	if key != "" {
		it.Key = &key
	}
	b.h.Items[itemKey{table, id}] = it
	return &forgedItem{itemHistory: it, maxAttempts: 4}
}

func (f *forgedItem) event(e histEvent) {
	e.Table, e.ItemID, e.Queue, e.MaxAttempts, e.Attempts, e.LeaseVersion = f.Table, f.ID, f.Queue, f.maxAttempts, f.attempts, f.version
	e.StmtAt = e.At
	f.Events = append(f.Events, e)
	f.MaxAttempts = f.maxAttempts
	f.itemRow.Attempts = f.attempts
}

func (f *forgedItem) claim(at time.Time, attempt int32, token string, untilMs int) *forgedItem {
	f.attempts, f.version = attempt, f.version+1
	until := forgeEpoch.Add(time.Duration(untilMs) * time.Millisecond)
	by := "w-" + token
	f.event(histEvent{At: at, Event: "claim", OldStatus: f.status, NewStatus: 1, Token: &token, LockedUntil: &until, ClaimedBy: &by})
	f.status = 1
	return f
}

// leavePending is a workflow task's move out of pending: "release" (to
// ready) or "depcancel" (cancelled by a dependency).
func (f *forgedItem) leavePending(at time.Time, event string) *forgedItem {
	to := int16(0)
	if event == "depcancel" {
		to = 4
	}
	f.event(histEvent{At: at, Event: event, OldStatus: -1, NewStatus: to})
	f.status = to
	return f
}

func (f *forgedItem) heartbeat(at time.Time, token string, untilMs int) *forgedItem {
	until := forgeEpoch.Add(time.Duration(untilMs) * time.Millisecond)
	f.event(histEvent{At: at, Event: "heartbeat", OldStatus: 1, NewStatus: 1, Token: &token, LockedUntil: &until})
	return f
}

func (f *forgedItem) end(at time.Time, token string, status int16, outcome string) *forgedItem {
	f.event(histEvent{At: at, Event: "end", OldStatus: 1, NewStatus: status, Token: &token})
	f.Runs = append(f.Runs, runRow{Table: f.Table, ItemID: f.ID, Attempt: f.attempts, LeaseVersion: f.version, Token: token,
		WorkerID: "w-" + token, Finished: at, Outcome: outcome})
	f.status = status
	return f
}

func (f *forgedItem) handler(attempt int32, start, end time.Time, outcome string) *forgedItem {
	f.Handlers = append(f.Handlers, handlerRow{Table: f.Table, ItemID: f.ID, Attempt: attempt, Key: f.Key, Start: start, End: end, Outcome: outcome})
	return f
}

// answeredReruns finds an item run again after its handler was answered
// (its completion lost, its lease expired), and not one whose first run was
// cancelled or answered with an error.
func TestHistoryCheckerFindsAnsweredReruns(t *testing.T) {
	at := func(ms int) time.Time { return forgeEpoch.Add(time.Duration(ms) * time.Millisecond) }
	b := &forge{h: &history{Items: map[itemKey]*itemHistory{}}}
	rerun := b.item("job_runs", 1, "q", 2, "")
	rerun.claim(at(0), 1, "a", 4000).handler(1, at(10), at(30), "ok").end(at(4100), "a", 0, "expired")
	rerun.claim(at(4200), 2, "b", 8200).handler(2, at(4210), at(4230), "ok").end(at(4240), "b", 2, "done")
	cancelled := b.item("job_runs", 2, "q", 2, "")
	cancelled.claim(at(0), 1, "a", 4000).handler(1, at(10), at(3700), "cancelled").end(at(4100), "a", 0, "expired")
	cancelled.claim(at(4200), 2, "b", 8200).handler(2, at(4210), at(4230), "ok").end(at(4240), "b", 2, "done")
	retried := b.item("outbox", 3, "q", 2, "k")
	retried.claim(at(0), 1, "a", 4000).handler(1, at(10), at(30), "error").end(at(40), "a", 0, "retry")
	retried.claim(at(500), 2, "b", 4500).handler(2, at(510), at(530), "ok").end(at(540), "b", 2, "done")
	once := b.item("outbox", 4, "q", 2, "")
	once.claim(at(0), 1, "a", 4000).handler(1, at(10), at(30), "ok").end(at(40), "a", 2, "done")
	got := b.h.answeredReruns()
	if len(got) != 1 || got[0].Table != "job_runs" || got[0].ID != 1 {
		var ids []string
		for _, it := range got {
			ids = append(ids, itemKey{it.Table, it.ID}.String())
		}
		t.Errorf("answered re-runs %v, want [job_runs 1]", ids)
	}
}
