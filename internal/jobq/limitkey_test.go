package jobq_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/workqtype"
)

// limitKeys reads the stored limit_key of each id ("<null>" for null).
func limitKeys(t *testing.T, pool *pgxpool.Pool, ids ...int64) []string {
	t.Helper()
	out := make([]string, len(ids))
	for i, id := range ids {
		var k *string
		if err := pool.QueryRow(context.Background(), `select limit_key from workq.job_runs_all where id = $1`, id).Scan(&k); err != nil {
			t.Fatal(err)
		}
		out[i] = "<null>"
		if k != nil {
			out[i] = *k
		}
	}
	return out
}

func countJobs(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `select count(*) from workq.job_runs_all`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func wantKeys(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("%s: limit keys %q, want %q", what, got, want)
	}
}

// Every enqueue statement stores the job's limit key, and null (never ”)
// for a job without one, also beside jobs with one in a batch.
func TestLimitKeyStoredByEveryPath(t *testing.T) {
	ctx := context.Background()
	c, pool := jobq.New(jobq.Options{NotifyDebounce: -1}), testdb.Pool(t)

	one := mustEnqueue(t, c, pool, jobq.Job{Kind: "k", LimitKey: "tenant-a"})
	none := mustEnqueue(t, c, pool, jobq.Job{Kind: "k"})
	dedup := mustEnqueue(t, c, pool, jobq.Job{Kind: "k", DedupKey: "d1", LimitKey: "tenant-b"})
	uniq := mustEnqueue(t, c, pool, jobq.Job{Kind: "k.unique", Unique: jobq.Unique{ByQueue: true}, LimitKey: "tenant-c"})
	wantKeys(t, "Enqueue", limitKeys(t, pool, one.ID, none.ID, dedup.ID, uniq.ID), "tenant-a", "<null>", "tenant-b", "tenant-c")

	ids := func(rs []jobq.Enqueued, err error) []int64 {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		out := make([]int64, len(rs))
		for i, r := range rs {
			out[i] = r.ID
		}
		return out
	}
	plain := ids(c.EnqueueMany(ctx, pool, []jobq.Job{{Kind: "k", LimitKey: "a"}, {Kind: "k"}, {Kind: "k", LimitKey: "b"}}))
	wantKeys(t, "EnqueueMany (plain)", limitKeys(t, pool, plain...), "a", "<null>", "b")
	plainNone := ids(c.EnqueueMany(ctx, pool, []jobq.Job{{Kind: "k"}, {Kind: "k"}}))
	wantKeys(t, "EnqueueMany without keys", limitKeys(t, pool, plainNone...), "<null>", "<null>")
	withDedup := ids(c.EnqueueMany(ctx, pool, []jobq.Job{{Kind: "k", DedupKey: "d2", LimitKey: "a"}, {Kind: "k", LimitKey: "c"}, {Kind: "k"}}))
	wantKeys(t, "EnqueueMany (dedup)", limitKeys(t, pool, withDedup...), "a", "c", "<null>")
	withUnique := ids(c.EnqueueMany(ctx, pool, []jobq.Job{{Kind: "k.u2", Unique: jobq.Unique{ByQueue: true}, LimitKey: "a"}, {Kind: "k"}, {Kind: "k", LimitKey: "d"}}))
	wantKeys(t, "EnqueueMany (unique)", limitKeys(t, pool, withUnique...), "a", "<null>", "d")

	var before int
	if err := pool.QueryRow(ctx, `select coalesce(max(id), 0) from workq.job_runs_all`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	if _, err := c.EnqueueManyFast(ctx, pool, []jobq.Job{{Kind: "k", LimitKey: "f1"}, {Kind: "k"}, {Kind: "k", LimitKey: "f2"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.EnqueueManyFast(ctx, pool, []jobq.Job{{Kind: "k"}}); err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, `select coalesce(limit_key, '<null>') from workq.job_runs_all where id > $1 order by id`, before)
	if err != nil {
		t.Fatal(err)
	}
	var fast []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		fast = append(fast, k)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	wantKeys(t, "EnqueueManyFast", fast, "f1", "<null>", "f2", "<null>")

	var empty int
	if err := pool.QueryRow(ctx, `select count(*) from workq.job_runs_all where limit_key = ''`).Scan(&empty); err != nil || empty != 0 {
		t.Fatalf("%d rows store an empty limit key (err %v)", empty, err)
	}
}

// An invalid limit key is refused with ErrInvalid naming limit_key, and
// nothing of the request is written (a batch's valid jobs neither).
func TestLimitKeyInvalidWritesNothing(t *testing.T) {
	ctx := context.Background()
	c, pool := jobq.New(jobq.Options{NotifyDebounce: -1}), testdb.Pool(t)
	for name, key := range map[string]string{"too long": strings.Repeat("x", jobq.MaxLimitKey+1), "NUL": "a\x00b", "not UTF-8": "\xff"} {
		check := func(path string, err error) {
			t.Helper()
			var ve *workqtype.ValidationError
			if !errors.Is(err, workqtype.ErrInvalid) || !errors.As(err, &ve) || ve.Field != "limit_key" {
				t.Fatalf("%s, %s: %v, want ErrInvalid on limit_key", name, path, err)
			}
		}
		_, err := c.Enqueue(ctx, pool, jobq.Job{Kind: "k", LimitKey: key})
		check("Enqueue", err)
		_, err = c.EnqueueMany(ctx, pool, []jobq.Job{{Kind: "k", LimitKey: "ok"}, {Kind: "k", LimitKey: key}})
		check("EnqueueMany", err)
		_, err = c.EnqueueManyFast(ctx, pool, []jobq.Job{{Kind: "k", LimitKey: "ok"}, {Kind: "k", LimitKey: key}})
		check("EnqueueManyFast", err)
		check("Validate", c.Validate(jobq.Job{Kind: "k", LimitKey: key}))
	}
	if n := countJobs(t, pool); n != 0 {
		t.Fatalf("%d jobs written by refused requests", n)
	}
	if _, err := c.Enqueue(ctx, pool, jobq.Job{Kind: "k", LimitKey: strings.Repeat("é", jobq.MaxLimitKey/2)}); err != nil {
		t.Fatalf("a key of exactly %d bytes: %v", jobq.MaxLimitKey, err)
	}
}

// A job's route key is its limit key's when it has no dedup or unique
// key, which win.
func TestLimitKeyRouteKey(t *testing.T) {
	c := jobq.New(jobq.Options{NotifyDebounce: -1})
	for _, tc := range []struct {
		j    jobq.Job
		want string
	}{
		{jobq.Job{Kind: "k", LimitKey: "t1"}, workqtype.ShardKeyLimit("t1")},
		{jobq.Job{Kind: "k", LimitKey: "t1", DedupKey: "d"}, workqtype.ShardKeyDedup("d")},
		{jobq.Job{Kind: "k"}, ""},
	} {
		got, err := c.RouteKey(tc.j)
		if err != nil || got != tc.want {
			t.Fatalf("RouteKey(%+v) = %q, %v; want %q", tc.j, got, err, tc.want)
		}
	}
	if k, _ := c.RouteKey(jobq.Job{Kind: "k", LimitKey: "t1", Unique: jobq.Unique{ByQueue: true}}); strings.HasPrefix(k, "limit\x00") {
		t.Fatalf("a unique job routes by its limit key")
	}
	if workqtype.ShardKeyLimit("x") == workqtype.ShardKeyDedup("x") || workqtype.ShardKeyLimit("x") == workqtype.ShardKeyPartition("x") {
		t.Fatal("limit route keys collide with another kind's")
	}
}
