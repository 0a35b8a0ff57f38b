package workq_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
)

type flowArgs struct {
	N int `json:"n"`
}

func (flowArgs) Kind() string { return "flow.test" }

// The runtime under a rate limit: a queue with a backlog runs at its rate,
// never above it in any window (the run archive's start times), and a
// claimer held back by the limit claims again when the window frees, not
// at its next poll (the poll is an hour here).
func TestClientFlowRateLimit(t *testing.T) {
	const (
		rate   = 15
		period = 500 * time.Millisecond
		jobs   = 60
	)
	pool := testdb.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var ran atomic.Int64
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, j *workq.Job[flowArgs]) error {
		ran.Add(1)
		return nil
	}))
	cfg := workq.Config{Workers: workers, Queues: map[string]workq.QueueConfig{"limited": {MaxWorkers: 10}},
		FetchPollInterval: time.Hour, Maintenance: workq.MaintenanceConfig{Disabled: true}}
	client, err := workq.NewClient(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.SetFlowLimit(ctx, workq.FlowLimit{Table: workq.TableJobRuns, Queue: "limited", Rate: rate, Period: period}); err != nil {
		t.Fatal(err)
	}
	params := make([]workq.EnqueueParams, jobs)
	for i := range params {
		params[i] = workq.EnqueueParams{Args: flowArgs{N: i}, Opts: &workq.EnqueueOpts{Queue: "limited"}}
	}
	if _, err := client.EnqueueMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer client.Stop(context.Background())
	for ran.Load() < jobs {
		if ctx.Err() != nil {
			t.Fatalf("ran %d of %d jobs in a minute at %d per %s: a limited claimer waited for its poll", ran.Load(), jobs, rate, period)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The completions are flushed in batches after the handlers return.
	for n := 0; n < jobs; {
		if err := pool.QueryRow(ctx, `select count(*) from workq.runs_all where queue = 'limited'`).Scan(&n); err != nil {
			t.Fatalf("%d of %d attempts archived: %v", n, jobs, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	rows, err := pool.Query(ctx, `select started_at from workq.runs_all where queue = 'limited' order by started_at`)
	if err != nil {
		t.Fatal(err)
	}
	var at []time.Time
	for rows.Next() {
		var s time.Time
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		at = append(at, s)
	}
	if len(at) != jobs {
		t.Fatalf("%d attempts archived, want %d", len(at), jobs)
	}
	for i := range at {
		n := 0
		for j := i; j < len(at) && at[j].Sub(at[i]) < period; j++ {
			n++
		}
		if n > rate {
			t.Fatalf("%d starts in the %s from %s: above the rate %d", n, period, at[i].Format(time.StampMicro), rate)
		}
	}
	st, err := client.FlowStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Limits) != 1 || st.Limits[0].Rate != rate || st.Limits[0].Period != period {
		t.Fatalf("FlowStatus limits: %+v", st.Limits)
	}
}

// A handler's Throttle: the attempt uses none of the job's attempts, the
// queue is throttled (FlowStatus says until when), and the job runs again
// after the retry-after.
func TestClientFlowThrottle(t *testing.T) {
	pool := testdb.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var calls atomic.Int64
	throttled := make(chan struct{})
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, j *workq.Job[flowArgs]) error {
		if calls.Add(1) == 1 {
			defer close(throttled)
			return workq.Throttle(800 * time.Millisecond)
		}
		return nil
	}))
	client, err := workq.NewClient(pool, workq.Config{Workers: workers, Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	done, _ := client.Subscribe(workq.EventCompleted)
	res, err := client.Enqueue(ctx, flowArgs{}, &workq.EnqueueOpts{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer client.Stop(context.Background())
	<-throttled
	var st workq.FlowStatus
	for ctx.Err() == nil {
		if st, err = client.FlowStatus(ctx); err != nil {
			t.Fatal(err)
		}
		if len(st.Throttles) > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(st.Throttles) != 1 || st.Throttles[0].Queue != "default" || st.Throttles[0].Key != "" {
		t.Fatalf("throttles after a handler's Throttle: %+v", st.Throttles)
	}
	select {
	case ev := <-done:
		if ev.Work.ID != res.ID {
			t.Fatalf("completed: %+v", ev.Work)
		}
	case <-ctx.Done():
		t.Fatal("the throttled job (max attempts 1) never completed: its throttled attempt used its only attempt")
	}
	info, err := client.Get(ctx, workq.ItemRef{Table: workq.TableJobRuns, ID: res.ID})
	if err != nil {
		t.Fatal(err)
	}
	if info.State != string(workq.JobStateDone) {
		t.Fatalf("state %s, want done", info.State)
	}
	var outcome, msg string
	if err := pool.QueryRow(ctx, `select outcome, coalesce(error, '') from workq.runs_all where item_id = $1 order by finished_at limit 1`, res.ID).Scan(&outcome, &msg); err != nil {
		t.Fatal(err)
	}
	if outcome != "snoozed" || msg == "" {
		t.Fatalf("the throttled attempt is archived %q %q, want snoozed with why", outcome, msg)
	}
}

// Bad flow settings are refused with ErrInvalid through the Client.
func TestClientFlowRefusesBadInput(t *testing.T) {
	ctx := context.Background()
	for name, c := range opsClients(t) {
		for _, l := range []workq.FlowLimit{
			{Table: workq.TableJobRuns, Queue: "q"},
			{Table: workq.TableJobRuns, Queue: "q", Rate: 1, Period: time.Nanosecond},
			{Table: workq.TableOutbox, Queue: "q", Kind: "t", Rate: 1},
			{Queue: "q", Rate: 1},
		} {
			if err := c.SetFlowLimit(ctx, l); !errors.Is(err, workq.ErrInvalid) {
				t.Errorf("%s: SetFlowLimit(%+v): %v, want ErrInvalid", name, l, err)
			}
		}
		if _, err := c.PauseKind(ctx, workq.KindRef{Table: workq.TableJobRuns, Queue: "q"}, nil); !errors.Is(err, workq.ErrInvalid) {
			t.Errorf("%s: PauseKind without a kind: %v, want ErrInvalid", name, err)
		}
		st, err := c.FlowStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Queues)+len(st.Limits) != 0 {
			t.Errorf("%s: refused settings wrote %+v", name, st)
		}
	}
}

type flowDeclArgs struct{}

func (flowDeclArgs) Kind() string { return "flow.declared" }

type flowDeclWorker struct{}

func (flowDeclWorker) Work(context.Context, *workq.Job[flowDeclArgs]) error { return nil }

func (flowDeclWorker) FlowLimits() []workq.FlowLimit {
	return []workq.FlowLimit{{Queue: "api", Rate: 5, Period: time.Second}}
}

var _ workq.WorkerWithFlowLimits[flowDeclArgs] = flowDeclWorker{}

// Flow limits declared in code (Config.FlowLimits and a worker's
// FlowLimits) are set at Start; invalid ones fail NewClient.
func TestClientFlowLimitsDeclaredInCode(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	workers := workq.NewWorkers()
	workq.AddWorker[flowDeclArgs](workers, flowDeclWorker{})
	cfg := workq.Config{Workers: workers, Maintenance: workq.MaintenanceConfig{Disabled: true},
		FlowLimits: []workq.FlowLimit{{Table: workq.TableJobRuns, Queue: "api", PerKey: true, Concurrency: 1}}}
	client, err := workq.NewClient(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer client.Stop(ctx)
	st, err := client.FlowStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Limits) != 2 {
		t.Fatalf("limits after Start: %+v", st.Limits)
	}
	var kind, perKey bool
	for _, l := range st.Limits {
		kind = kind || (l.Kind == "flow.declared" && l.Queue == "api" && l.Rate == 5)
		perKey = perKey || (l.PerKey && l.Concurrency == 1)
	}
	if !kind || !perKey {
		t.Fatalf("limits after Start: %+v", st.Limits)
	}
	bad := cfg
	bad.FlowLimits = []workq.FlowLimit{{Table: workq.TableJobRuns, Queue: "api"}}
	if _, err := workq.NewClient(pool, bad); !errors.Is(err, workq.ErrInvalid) {
		t.Fatalf("NewClient with a limit of nothing: %v, want ErrInvalid", err)
	}
}

// A sharded Client divides a queue's rate and concurrency evenly over the
// shards, never above the total, and refuses a number it cannot divide so.
func TestClientFlowSplitOverShards(t *testing.T) {
	ctx := context.Background()
	c := opsClients(t)["two shards"]
	if err := c.SetFlowLimit(ctx, workq.FlowLimit{Table: workq.TableJobRuns, Queue: "split", Rate: 201, Concurrency: 1}); !errors.Is(err, workq.ErrInvalid) {
		t.Fatalf("concurrency 1 over two shards: %v, want ErrInvalid", err)
	}
	if err := c.SetFlowLimit(ctx, workq.FlowLimit{Table: workq.TableJobRuns, Queue: "split", Rate: 201, Concurrency: 5}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetFlowLimit(ctx, workq.FlowLimit{Table: workq.TableJobRuns, Queue: "split", PerKey: true, Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	st, err := c.FlowStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var queue, perKey int
	for _, l := range st.Limits {
		switch {
		case l.Queue == "split" && !l.PerKey && l.Rate == 100 && l.Concurrency == 2:
			queue++
		case l.Queue == "split" && l.PerKey && l.Concurrency == 1:
			perKey++
		}
	}
	if queue != 2 || perKey != 2 {
		t.Fatalf("limits over two shards: %+v (want 100/s and 2 on each, and 1 per key on each)", st.Limits)
	}
}
