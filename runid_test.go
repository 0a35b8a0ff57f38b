package workq_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/timers"
)

type runIDArgs struct{}

func (runIDArgs) Kind() string { return "runid.test" }

// A handler sees its attempt's run id and lease version (Job and Message):
// they are the run archive's, and ParseRunID reads the item and the lease
// version back from the run id.
func TestHandlerRunIDAndLeaseVersion(t *testing.T) {
	ctx := context.Background()
	type seen struct {
		runID uuid.UUID
		lv    int64
	}
	var mu sync.Mutex
	var jobs, msgs []seen
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, j *workq.Job[runIDArgs]) error {
		mu.Lock()
		defer mu.Unlock()
		jobs = append(jobs, seen{j.RunID, j.LeaseVersion})
		if j.Attempt == 1 {
			return errors.New("first attempt fails")
		}
		return nil
	}))
	if err := workq.HandleTimer(workers, "runid.topic", func(ctx context.Context, m *workq.Message[map[string]int]) error {
		mu.Lock()
		defer mu.Unlock()
		msgs = append(msgs, seen{m.RunID, m.LeaseVersion})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	c, err := workq.NewClient(testdb.Pool(t), workq.Config{Workers: workers, Maintenance: workq.MaintenanceConfig{Disabled: true},
		BackoffBase: time.Millisecond, BackoffCap: time.Millisecond, FetchPollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	events, _ := c.Subscribe(workq.EventCompleted)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	enq, err := c.Enqueue(ctx, runIDArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tm, err := c.ScheduleTimer(ctx, timers.Timer{Topic: "runid.topic", DueTime: time.Now(), Payload: map[string]int{}})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		nextResult(t, events)
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, w := range []struct {
		ref  workq.ItemRef
		seen []seen
		n    int
	}{{enq.Ref(), jobs, 2}, {tm.Ref(), msgs, 1}} {
		if len(w.seen) != w.n {
			t.Fatalf("%v: %d attempts seen, want %d", w.ref, len(w.seen), w.n)
		}
		atts, err := c.Attempts(ctx, w.ref)
		if err != nil || len(atts) != w.n {
			t.Fatalf("Attempts(%v): %+v %v", w.ref, atts, err)
		}
		for i, s := range w.seen {
			if s.runID == uuid.Nil || s.runID != atts[i].RunID || s.lv != atts[i].LeaseVersion || s.lv < 1 {
				t.Fatalf("%v attempt %d: the handler saw run id %s lease version %d; the archive has %s %d",
					w.ref, i+1, s.runID, s.lv, atts[i].RunID, atts[i].LeaseVersion)
			}
			ref, lv, err := workq.ParseRunID(s.runID.String())
			want := w.ref
			want.Shard = ""
			if err != nil || ref != want || lv != s.lv {
				t.Fatalf("ParseRunID(%s) = %v, %d, %v; want %v, %d", s.runID, ref, lv, err, want, s.lv)
			}
		}
		if len(w.seen) == 2 && w.seen[1].lv <= w.seen[0].lv {
			t.Fatalf("lease versions %d then %d: want them to grow", w.seen[0].lv, w.seen[1].lv)
		}
	}
	for _, bad := range []string{"", "not-a-uuid", uuid.NewString(), uuid.Nil.String()} {
		if _, _, err := workq.ParseRunID(bad); !errors.Is(err, workq.ErrInvalid) {
			t.Errorf("ParseRunID(%q): %v, want ErrInvalid", bad, err)
		}
	}
}
