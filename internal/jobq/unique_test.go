package jobq_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/workqtype"
)

// clock is a settable clock for the periods of unique jobs.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newUniqueClient(t *testing.T) (*jobq.Client, *pgxpool.Pool, *clock) {
	t.Helper()
	clk := &clock{now: time.Date(2026, 3, 1, 10, 15, 0, 0, time.UTC)}
	return jobq.New(jobq.Options{NotifyDebounce: -1, Now: clk.Now}), testdb.Pool(t), clk
}

// finish moves a job run to a finished status, as a worker would.
func finish(t *testing.T, pool *pgxpool.Pool, id int64, status int) {
	t.Helper()
	if _, err := pool.Exec(context.Background(),
		`update workq.job_runs set status = $2, finished_at = now() where id = $1`, id, status); err != nil {
		t.Fatal(err)
	}
}

func mustEnqueue(t *testing.T, c *jobq.Client, pool *pgxpool.Pool, j jobq.Job) jobq.Enqueued {
	t.Helper()
	res, err := c.Enqueue(context.Background(), pool, j)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// Once per period holds across a finished row: a job done within its hour
// still holds the key (done is a default state); the next hour is free,
// and deleting the finished row (retention) frees its key.
func TestUniqueByPeriodAcrossFinishedRow(t *testing.T) {
	c, pool, clk := newUniqueClient(t)
	j := jobq.Job{Kind: "report.hourly", Unique: jobq.Unique{ByPeriod: time.Hour}}
	first := mustEnqueue(t, c, pool, j)
	if first.Duplicate {
		t.Fatalf("first enqueue is a duplicate: %+v", first)
	}
	finish(t, pool, first.ID, 2)
	clk.Add(40 * time.Minute) // 10:55, same hour
	if got := mustEnqueue(t, c, pool, j); !got.Duplicate || got.ID != first.ID {
		t.Fatalf("same hour after done: got %+v, want duplicate of %d", got, first.ID)
	}
	clk.Add(10 * time.Minute) // 11:05
	next := mustEnqueue(t, c, pool, j)
	if next.Duplicate {
		t.Fatalf("next hour: got %+v, want a new run", next)
	}
	// A job due in the first hour's period (RunAt) is that period's.
	back := j
	back.RunAt = time.Date(2026, 3, 1, 10, 59, 0, 0, time.UTC)
	if got := mustEnqueue(t, c, pool, back); !got.Duplicate || got.ID != first.ID {
		t.Fatalf("RunAt in the first hour: got %+v, want duplicate of %d", got, first.ID)
	}
	if _, err := pool.Exec(context.Background(), `delete from workq.job_runs where id = $1`, first.ID); err != nil {
		t.Fatal(err)
	}
	if got := mustEnqueue(t, c, pool, back); got.Duplicate {
		t.Fatalf("after the finished row was deleted: got %+v, want a new run", got)
	}
}

// States decide which finished runs hold the key.
func TestUniqueByStates(t *testing.T) {
	cases := []struct {
		name     string
		states   []string
		finished int // the first run's status
		dup      bool
	}{
		{"done among the default states", nil, 2, true},
		{"failed not among the default states", nil, 3, false},
		{"done not among the states", []string{jobq.StateReady, jobq.StateInProgress}, 2, false},
		{"failed among the states", []string{jobq.StateReady, jobq.StateInProgress, jobq.StateFailed}, 3, true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, pool, _ := newUniqueClient(t)
			kind := "sync.account" + strings.Repeat("x", i)
			j := jobq.Job{Kind: kind, Unique: jobq.Unique{ByQueue: true, States: tc.states}}
			first := mustEnqueue(t, c, pool, j)
			if got := mustEnqueue(t, c, pool, j); !got.Duplicate || got.ID != first.ID {
				t.Fatalf("while ready: got %+v, want duplicate of %d", got, first.ID)
			}
			finish(t, pool, first.ID, tc.finished)
			got := mustEnqueue(t, c, pool, j)
			if got.Duplicate != tc.dup || (tc.dup && got.ID != first.ID) {
				t.Fatalf("after status %d: got %+v, want duplicate=%v (of %d)", tc.finished, got, tc.dup, first.ID)
			}
		})
	}
}

// ByArgs puts the args in the key (as JSON values), ByQueue the queue;
// without them, the kind alone is the key.
func TestUniqueByArgsAndQueue(t *testing.T) {
	c, pool, _ := newUniqueClient(t)
	byArgs := jobq.Unique{ByArgs: true}
	a := mustEnqueue(t, c, pool, jobq.Job{Kind: "mail", Payload: []byte(`{"to":"ann","n":1}`), Unique: byArgs})
	for _, tc := range []struct {
		name string
		job  jobq.Job
		dup  bool
	}{
		{"same args, other key order and spacing", jobq.Job{Kind: "mail", Payload: []byte(`{ "n":1, "to":"ann" }`), Unique: byArgs}, true},
		{"other args", jobq.Job{Kind: "mail", Payload: []byte(`{"to":"bob","n":1}`), Unique: byArgs}, false},
		{"other kind", jobq.Job{Kind: "mail2", Payload: []byte(`{"to":"ann","n":1}`), Unique: byArgs}, false},
		{"same args in another queue", jobq.Job{Kind: "mail", Queue: "q2", Payload: []byte(`{"to":"ann","n":1}`), Unique: byArgs}, true},
		{"by queue: another queue", jobq.Job{Kind: "mail", Queue: "q2", Payload: []byte(`{"to":"ann","n":1}`),
			Unique: jobq.Unique{ByArgs: true, ByQueue: true}}, false},
	} {
		got := mustEnqueue(t, c, pool, tc.job)
		if got.Duplicate != tc.dup || (tc.dup && got.ID != a.ID) {
			t.Errorf("%s: got %+v, want duplicate=%v (of %d)", tc.name, got, tc.dup, a.ID)
		}
	}
	// Without ByArgs, any args are the same job.
	k := mustEnqueue(t, c, pool, jobq.Job{Kind: "reindex", Payload: []byte(`{"a":1}`), Unique: jobq.Unique{ByQueue: true}})
	if got := mustEnqueue(t, c, pool, jobq.Job{Kind: "reindex", Payload: []byte(`{"a":2}`), Unique: jobq.Unique{ByQueue: true}}); !got.Duplicate || got.ID != k.ID {
		t.Errorf("without ByArgs: got %+v, want duplicate of %d", got, k.ID)
	}
}

// Concurrent enqueues of one unique key make exactly one row, and every
// caller learns its id.
func TestUniqueConcurrentEnqueues(t *testing.T) {
	c, pool, _ := newUniqueClient(t)
	const n = 16
	j := jobq.Job{Kind: "race", Payload: map[string]int{"x": 1}, Unique: jobq.Unique{ByArgs: true, ByPeriod: time.Hour}}
	var wg sync.WaitGroup
	res := make([]jobq.Enqueued, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if i%2 == 0 {
				res[i], errs[i] = c.Enqueue(context.Background(), pool, j)
				return
			}
			var many []jobq.Enqueued
			many, errs[i] = c.EnqueueMany(context.Background(), pool, []jobq.Job{j})
			if errs[i] == nil {
				res[i] = many[0]
			}
		}()
	}
	close(start)
	wg.Wait()
	inserted := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if !res[i].Duplicate {
			inserted++
		}
		if res[i].ID != res[0].ID {
			t.Errorf("caller %d got run %d, caller 0 run %d", i, res[i].ID, res[0].ID)
		}
	}
	var rows int
	if err := pool.QueryRow(context.Background(), `select count(*) from workq.job_runs_all where kind = 'race'`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if inserted != 1 || rows != 1 {
		t.Fatalf("%d callers inserted, %d rows; want 1 and 1", inserted, rows)
	}
}

// EnqueueMany skips a unique job whose key a run holds or an earlier job
// of the batch took, and reports the run.
func TestUniqueEnqueueMany(t *testing.T) {
	c, pool, _ := newUniqueClient(t)
	u := jobq.Unique{ByArgs: true}
	held := mustEnqueue(t, c, pool, jobq.Job{Kind: "b", Payload: []byte(`{"k":2}`), Unique: u})
	finish(t, pool, held.ID, 2)
	res, err := c.EnqueueMany(context.Background(), pool, []jobq.Job{
		{Kind: "b", Payload: []byte(`{"k":1}`), Unique: u},
		{Kind: "b", Payload: []byte(`{"k":1}`), Unique: u},
		{Kind: "b", Payload: []byte(`{"k":1}`)}, // not unique
		{Kind: "b", Payload: []byte(`{"k":2}`), Unique: u},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Duplicate || !res[1].Duplicate || res[1].ID != res[0].ID || res[2].Duplicate || res[2].ID == res[0].ID ||
		!res[3].Duplicate || res[3].ID != held.ID {
		t.Fatalf("got %+v (held %d)", res, held.ID)
	}
}

// Bad unique options and metadata are validation errors naming the field;
// the COPY path refuses unique jobs; a batch takes dedup keys or unique
// jobs, not both.
func TestUniqueAndMetadataValidation(t *testing.T) {
	c := jobq.New(jobq.Options{})
	for _, tc := range []struct {
		name, field string
		job         jobq.Job
	}{
		{"short period", "unique.by_period", jobq.Job{Kind: "k", Unique: jobq.Unique{ByPeriod: 500 * time.Millisecond}}},
		{"negative period", "unique.by_period", jobq.Job{Kind: "k", Unique: jobq.Unique{ByPeriod: -time.Hour}}},
		{"unknown state", "unique.by_states", jobq.Job{Kind: "k", Unique: jobq.Unique{States: []string{"ready", "in_progress", "gone"}}}},
		{"without in_progress", "unique.by_states", jobq.Job{Kind: "k", Unique: jobq.Unique{States: []string{"ready", "done"}}}},
		{"with a dedup key", "unique", jobq.Job{Kind: "k", DedupKey: "d", Unique: jobq.Unique{ByArgs: true}}},
		{"empty metadata key", "metadata", jobq.Job{Kind: "k", Metadata: map[string]string{"": "v"}}},
		{"long metadata key", "metadata", jobq.Job{Kind: "k", Metadata: map[string]string{strings.Repeat("k", 129): "v"}}},
		{"NUL in a value", "metadata", jobq.Job{Kind: "k", Metadata: map[string]string{"k": "a\x00b"}}},
		{"metadata over 64 KiB", "metadata", jobq.Job{Kind: "k", Metadata: map[string]string{"k": strings.Repeat("v", 64<<10)}}},
	} {
		err := c.Validate(tc.job)
		if !errors.Is(err, workqtype.ErrInvalid) || workqtype.FieldOf(err) != tc.field {
			t.Errorf("%s: got %v (field %q), want a validation error of %q", tc.name, err, workqtype.FieldOf(err), tc.field)
		}
	}
	if err := c.Validate(jobq.Job{Kind: "k", Metadata: map[string]string{"tenant": "acme"}, Unique: jobq.Unique{ByPeriod: time.Second}}); err != nil {
		t.Errorf("valid job: %v", err)
	}
	pool := testdb.Pool(t)
	ctx := context.Background()
	if _, err := c.EnqueueManyFast(ctx, pool, []jobq.Job{{Kind: "k", Unique: jobq.Unique{ByArgs: true}}}); workqtype.FieldOf(err) != "unique" {
		t.Errorf("EnqueueManyFast with a unique job: got %v", err)
	}
	if _, err := c.EnqueueMany(ctx, pool, []jobq.Job{{Kind: "k", DedupKey: "d"}, {Kind: "k", Unique: jobq.Unique{ByArgs: true}}}); workqtype.FieldOf(err) != "unique" {
		t.Errorf("EnqueueMany mixing dedup keys and unique jobs: got %v", err)
	}
}

// Metadata is stored per job on every enqueue path.
func TestMetadataStored(t *testing.T) {
	c := jobq.New(jobq.Options{NotifyDebounce: -1})
	pool := testdb.Pool(t)
	ctx := context.Background()
	meta := func(i int) map[string]string {
		if i%2 == 1 {
			return nil
		}
		return map[string]string{"tenant": "acme", "n": strings.Repeat("x", i+1)}
	}
	jobs := func(kind string, dedup bool) []jobq.Job {
		js := make([]jobq.Job, 4)
		for i := range js {
			js[i] = jobq.Job{Kind: kind, Metadata: meta(i)}
			if dedup {
				js[i].DedupKey = kind + strings.Repeat("d", i+1)
			}
		}
		return js
	}
	var ids []int64
	one, err := c.Enqueue(ctx, pool, jobq.Job{Kind: "m1", Metadata: meta(0)})
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, one.ID)
	for _, batch := range [][]jobq.Job{jobs("plain", false), jobs("dedup", true)} {
		res, err := c.EnqueueMany(ctx, pool, batch)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			ids = append(ids, r.ID)
		}
	}
	if _, err := c.EnqueueManyFast(ctx, pool, jobs("fast", false)); err != nil {
		t.Fatal(err)
	}
	check := func(where string, args []any, want []map[string]string) {
		t.Helper()
		rows, err := pool.Query(ctx, `select metadata from workq.job_runs_all where `+where+` order by id`, args...)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		i := 0
		for ; rows.Next(); i++ {
			var raw []byte
			if err := rows.Scan(&raw); err != nil {
				t.Fatal(err)
			}
			got := workqtype.DecodeMetadata(raw)
			if len(got) != len(want[i]) || (want[i] == nil) != (raw == nil) {
				t.Errorf("%s row %d: metadata %s, want %v", where, i, raw, want[i])
			}
			for k, v := range want[i] {
				if got[k] != v {
					t.Errorf("%s row %d: %s = %q, want %q", where, i, k, got[k], v)
				}
			}
		}
		if i != len(want) {
			t.Errorf("%s: %d rows, want %d", where, i, len(want))
		}
	}
	check("id = any($1)", []any{ids}, []map[string]string{meta(0), meta(0), meta(1), meta(2), meta(3), meta(0), meta(1), meta(2), meta(3)})
	check("kind = 'fast'", nil, []map[string]string{meta(0), meta(1), meta(2), meta(3)})
}
