package workq_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
)

// TestWaitsForKeyRules: Client.WaitsFor says a rule per key holds a job
// only while it does (its key's items in progress at the concurrency, its
// starts in the window at the rate), and says nothing of another key's
// job, of a job that is not ready, or of a rule that is not used up; a
// paused kind holds every job of the kind.
func TestWaitsForKeyRules(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	c, err := workq.NewClient(pool, workq.Config{})
	if err != nil {
		t.Fatal(err)
	}
	enqueue := func(key string) workq.ItemRef {
		t.Helper()
		r, err := c.Enqueue(ctx, OpsArgs{}, &workq.EnqueueOpts{Queue: "wf"})
		if err != nil {
			t.Fatal(err)
		}
		if key != "" { // no enqueue option writes a limit key yet
			if _, err := pool.Exec(ctx, `update workq.job_runs set limit_key = $2 where id = $1`, r.ID, key); err != nil {
				t.Fatal(err)
			}
		}
		return r.Ref()
	}
	running, waiting, other, nokey := enqueue("acme"), enqueue("acme"), enqueue("globex"), enqueue("")
	waitsFor := func(ref workq.ItemRef) []string {
		t.Helper()
		w, err := c.WaitsFor(ctx, ref)
		if err != nil {
			t.Fatalf("WaitsFor %s: %v", ref, err)
		}
		return w
	}
	if err := c.SetFlowLimit(ctx, workq.FlowLimit{Table: workq.TableJobRuns, Queue: "wf", PerKey: true, Rate: 2, Period: time.Minute, Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	if w := waitsFor(waiting); len(w) != 0 {
		t.Errorf("nothing of key acme in progress or started: waits for %q, want nothing", w)
	}

	// One job of acme in progress: acme is at its concurrency.
	if _, err := pool.Exec(ctx, `update workq.job_runs set status = 1, owner_token = gen_random_uuid(), locked_until = now() + interval '1 hour',
		claimed_at = now(), claimed_by = 'test', attempts = 1 where id = $1`, running.ID); err != nil {
		t.Fatal(err)
	}
	want := "key acme at its concurrency (1 of 1 in progress)"
	if w := waitsFor(waiting); !slices.Equal(w, []string{want}) {
		t.Errorf("acme at its concurrency: waits for %q, want [%q]", w, want)
	}
	if w := waitsFor(running); w != nil {
		t.Errorf("a job in progress waits for %q, want nil", w)
	}
	if w := waitsFor(other); len(w) != 0 {
		t.Errorf("key globex is free: waits for %q", w)
	}
	if w := waitsFor(nokey); len(w) != 0 {
		t.Errorf("a job without a key: waits for %q (a rule per key does not hold it)", w)
	}
	// FlowStatus alone does not know a key's use: it says nothing of it.
	st, err := c.FlowStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if w := st.WaitsFor(workq.TableJobRuns, "wf", "", OpsArgs{}.Kind(), "acme"); len(w) != 0 {
		t.Errorf("FlowStatus.WaitsFor guesses a key's use: %q", w)
	}

	// Two starts of globex in the minute: globex's rate is used.
	if _, err := pool.Exec(ctx, `select workq.workq_flow_log('job_runs', 'wf', '', 'globex', 2, now())`); err != nil {
		t.Fatal(err)
	}
	want = "key globex rate limit used (2 of 2 per 1m0s)"
	if w := waitsFor(other); !slices.Equal(w, []string{want}) {
		t.Errorf("globex's rate used: waits for %q, want [%q]", w, want)
	}

	// A paused kind holds every job of it, key or not.
	if _, err := c.PauseKind(ctx, workq.KindRef{Table: workq.TableJobRuns, Queue: "wf", Kind: OpsArgs{}.Kind()}, &workq.ActionOpts{Actor: "ops:ann"}); err != nil {
		t.Fatal(err)
	}
	if w := waitsFor(nokey); len(w) != 1 || !strings.Contains(w[0], "kind ops.test paused by ops:ann") {
		t.Errorf("paused kind: waits for %q", w)
	}

	if _, err := c.WaitsFor(ctx, workq.JobRef(running.ID+1000)); !errors.Is(err, workq.ErrNotFound) {
		t.Errorf("WaitsFor of a missing job: %v, want ErrNotFound", err)
	}
}

// TestFlowStatusWaitsForScopes: FlowStatus.WaitsFor's answers from the
// status alone: a queue's rate used, a kind's throttle, an adapting scope
// only once its adapted rate is used, an outbox queue held by a paused
// topic.
func TestFlowStatusWaitsForScopes(t *testing.T) {
	until := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	s := workq.FlowStatus{
		Limits: []workq.FlowLimitInfo{
			{FlowLimit: workq.FlowLimit{Table: workq.TableJobRuns, Queue: "q", Rate: 10, Period: time.Second}, Started: 10},
			{FlowLimit: workq.FlowLimit{Table: workq.TableJobRuns, Queue: "q", Kind: "mail", Rate: 5, Period: time.Minute}, Started: 4},
			{FlowLimit: workq.FlowLimit{Table: workq.TableJobRuns, Queue: "q", PerKey: true, Concurrency: 1}, Started: 9},
		},
		Throttles: []workq.ThrottleInfo{
			{Table: workq.TableJobRuns, Queue: "q", Kind: "sms", Until: until},
			{Table: workq.TableJobRuns, Queue: "q", Kind: "push", Rate: 3.5, StartedLastSecond: 2},
			{Table: workq.TableJobRuns, Queue: "q", Kind: "fax", Rate: 3.5, StartedLastSecond: 3},
		},
		PausedKinds: []workq.KindPauseInfo{{KindRef: workq.KindRef{Table: workq.TableOutbox, Queue: "events", Kind: "billing"}, PausedBy: "ops:bo"}},
	}
	for _, tc := range []struct {
		table       workq.Table
		queue, kind string
		want        []string
	}{
		{workq.TableJobRuns, "q", "mail", []string{"queue q rate limit used (10 of 10 per 1s)"}},
		{workq.TableJobRuns, "q", "sms", []string{"kind sms throttled until 2030-01-02T03:04:05Z", "queue q rate limit used (10 of 10 per 1s)"}},
		{workq.TableJobRuns, "q", "push", []string{"queue q rate limit used (10 of 10 per 1s)"}},
		{workq.TableJobRuns, "q", "fax", []string{"kind fax adapting after a throttle: its rate of 4 starts/s used (3 in the last second)", "queue q rate limit used (10 of 10 per 1s)"}},
		{workq.TableOutbox, "events", "orders", []string{"topic billing of queue events paused by ops:bo (the outbox's claim cannot pass a topic over)"}},
		{workq.TableJobRuns, "other", "mail", nil},
	} {
		if got := s.WaitsFor(tc.table, tc.queue, "", tc.kind, "k"); !slices.Equal(got, tc.want) {
			t.Errorf("%s/%s[%s]: %q, want %q", tc.table, tc.queue, tc.kind, got, tc.want)
		}
	}
}

// TestWaitsForScopeConcurrency: a rule's concurrency of a kind (job runs)
// or of the queue (the outbox) holds a ready item only while its scope has
// that many in progress.
func TestWaitsForScopeConcurrency(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	c, err := workq.NewClient(pool, workq.Config{})
	if err != nil {
		t.Fatal(err)
	}
	start := func(table string, id int64) {
		t.Helper()
		if _, err := pool.Exec(ctx, `update workq.`+table+` set status = 1, owner_token = gen_random_uuid(), locked_until = now() + interval '1 hour',
			claimed_at = now(), claimed_by = 'test', attempts = 1 where id = $1`, id); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		table workq.Table
		limit workq.FlowLimit
		want  string
	}{
		{workq.TableJobRuns, workq.FlowLimit{Table: workq.TableJobRuns, Queue: "wc", Kind: OpsArgs{}.Kind(), Concurrency: 1},
			"kind ops.test at its concurrency (1 of 1 in progress)"},
		{workq.TableOutbox, workq.FlowLimit{Table: workq.TableOutbox, Queue: "wc", Concurrency: 1},
			"queue wc at its concurrency (1 of 1 in progress)"},
	} {
		first, second := put(t, c, tc.table, "wc", OpsArgs{}.Kind(), 1), put(t, c, tc.table, "wc", OpsArgs{}.Kind(), 2)
		if err := c.SetFlowLimit(ctx, tc.limit); err != nil {
			t.Fatal(err)
		}
		if w, err := c.WaitsFor(ctx, second); err != nil || len(w) != 0 {
			t.Errorf("%s: nothing in progress: waits for %q, %v", tc.table, w, err)
		}
		start(string(tc.table), first.ID)
		if w, err := c.WaitsFor(ctx, second); err != nil || !slices.Equal(w, []string{tc.want}) {
			t.Errorf("%s: one in progress: waits for %q, %v; want [%q]", tc.table, w, err, tc.want)
		}
	}
}
