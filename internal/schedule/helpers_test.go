package schedule_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/schedule"
)

// clock is a settable clock shared by a store and its schedulers.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(t time.Time) *clock { return &clock{t: t} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newScheduler(t *testing.T, pool *pgxpool.Pool, c *clock, grace time.Duration) *schedule.Scheduler {
	t.Helper()
	s, err := schedule.NewScheduler(pool, schedule.SchedulerOptions{Clock: c.Now, MisfireGrace: grace, Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustCreate(t *testing.T, st *schedule.Store, pool *pgxpool.Pool, sp schedule.Spec) schedule.Schedule {
	t.Helper()
	s, err := st.Create(context.Background(), pool, sp)
	if err != nil {
		t.Fatalf("create %s: %v", sp.Name, err)
	}
	return s
}

func tick(t *testing.T, s *schedule.Scheduler) int {
	t.Helper()
	n, err := s.Tick(context.Background())
	if err != nil {
		t.Fatalf("tick: %v", err)
	}
	return n
}

// slots returns the scheduled times of a schedule's slot runs, in order.
func slots(t *testing.T, pool *pgxpool.Pool, id int64) []time.Time {
	t.Helper()
	rows, err := pool.Query(context.Background(),
		`select scheduled_time from workq.job_runs_all where schedule_id = $1 and scheduled_time is not null order by scheduled_time`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []time.Time
	for rows.Next() {
		var ts time.Time
		if err := rows.Scan(&ts); err != nil {
			t.Fatal(err)
		}
		out = append(out, ts.UTC())
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func fmtTimes(ts []time.Time) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.UTC().Format(time.RFC3339)
	}
	return out
}
