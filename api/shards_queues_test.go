package api

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/workqtype"
)

// pausedOn reports whether table/queue is paused on pool.
func pausedOn(t *testing.T, pool *pgxpool.Pool, table lease.Table, queue string) bool {
	t.Helper()
	ps, err := lease.Paused(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.Table == table && p.Queue == queue {
			return true
		}
	}
	return false
}

// On a sharded API pause and resume apply to every shard (a sharded queue
// is one queue) and answer each shard's outcome; the queue list sums the
// shards and says where a queue is paused. An unknown query parameter
// (?shard=) is refused and nothing changes.
func TestAPIPausesEveryShard(t *testing.T) {
	second := testdb.Pool(t)
	e := newEnv(t, func(o *setup) {
		o.shards = []workq.Shard{{Name: "a", Pool: o.pool}, {Name: "b", Pool: second}}
	})
	pools := map[string]*pgxpool.Pool{"a": e.pool, "b": second}

	before := snapshot(t, e.pool) + snapshot(t, second)
	for _, path := range []string{"/v1/queues/job_runs/default/pause?shard=b", "/v1/queues/job_runs/default/resume?shard=b",
		"/v1/queues/job_runs/default/pause?reason=x"} {
		if r := e.must(400, "POST", path, e.admin, nil).err(t); r.Code != CodeInvalid {
			t.Fatalf("%s: %+v", path, r)
		}
	}
	if after := snapshot(t, e.pool) + snapshot(t, second); after != before {
		t.Fatal("a refused pause wrote")
	}

	// b is paused already: pause changes a only, and says so.
	if _, err := lease.Pause(context.Background(), second, lease.JobRuns, "default", "test", ""); err != nil {
		t.Fatal(err)
	}
	var st queueState
	e.must(200, "POST", "/v1/queues/job_runs/default/pause", e.admin, pauseRequest{Reason: "deploy"}).decode(t, &st)
	if !*st.Paused || !*st.Changed || len(st.Shards) != 2 {
		t.Fatalf("pause: %+v", st)
	}
	for i, want := range []struct {
		shard   string
		changed bool
	}{{"a", true}, {"b", false}} {
		got := st.Shards[i]
		if got.Shard != want.shard || !*got.Paused || *got.Changed != want.changed || got.Error != "" {
			t.Fatalf("shard %d: %+v, want %+v", i, got, want)
		}
		if !pausedOn(t, pools[want.shard], lease.JobRuns, "default") {
			t.Fatalf("shard %s is not paused", want.shard)
		}
	}

	// The list: summed, paused on both, each shard's row.
	var list struct {
		Queues []shardedQueue `json:"queues"`
	}
	e.must(200, "GET", "/v1/queues", e.read, nil).decode(t, &list)
	found := false
	for _, q := range list.Queues {
		if q.Table == lease.JobRuns && q.Queue == "default" {
			found = true
			if !q.Paused || len(q.PausedShards) != 2 || len(q.Shards) != 2 || q.Shards[0].Shard != "a" || !q.Shards[1].Paused {
				t.Fatalf("listed %+v", q)
			}
		}
	}
	if !found {
		t.Fatalf("job_runs/default not listed: %+v", list)
	}

	// Resume: both.
	e.must(200, "POST", "/v1/queues/job_runs/default/resume", e.admin, nil).decode(t, &st)
	if *st.Paused || !*st.Changed || len(st.Shards) != 2 {
		t.Fatalf("resume: %+v", st)
	}
	for name, pool := range pools {
		if pausedOn(t, pool, lease.JobRuns, "default") {
			t.Fatalf("shard %s is still paused", name)
		}
	}
	e.must(200, "GET", "/v1/queues", e.read, nil).decode(t, &list)
	for _, q := range list.Queues {
		if q.Paused || len(q.PausedShards) != 0 {
			t.Fatalf("after resume: %+v", q)
		}
	}
}

// A shard that cannot be reached fails the pause with 503 naming it; the
// shards that answered are paused, and the same request again is
// harmless.
func TestAPIPauseWithAShardDown(t *testing.T) {
	down, err := pgxpool.New(context.Background(), "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(down.Close)
	e := newEnv(t, func(o *setup) {
		o.shards = []workq.Shard{{Name: "a", Pool: o.pool}, {Name: "b", Pool: down}}
	})
	for range 2 {
		r := e.must(503, "POST", "/v1/queues/job_runs/default/pause", e.admin, nil).err(t)
		if r.Code != CodeUnavailable || len(r.Shards) != 2 || r.Shards[0].Shard != "a" || r.Shards[0].Paused == nil ||
			r.Shards[1].Shard != "b" || r.Shards[1].Error == "" {
			t.Fatalf("pause with b down: %+v", r)
		}
		if !pausedOn(t, e.pool, lease.JobRuns, "default") {
			t.Fatal("a is not paused")
		}
	}
	e.must(503, "GET", "/v1/queues", e.read, nil)
}

// On a sharded API a queue's limit names its shard: without ?shard= it is
// refused (a W over the shards is workq shard-limit's) and nothing
// changes; with it, only that shard's budget is set.
func TestAPILimitOnShards(t *testing.T) {
	ctx := context.Background()
	second := testdb.Pool(t)
	e := newEnv(t, func(o *setup) {
		o.shards = []workq.Shard{{Name: "a", Pool: o.pool}, {Name: "b", Pool: second}}
	})
	beforeA := snapshot(t, e.pool)
	before := beforeA + snapshot(t, second)
	r := e.must(400, "PUT", "/v1/queues/job_runs/default/limit", e.admin, limitRequest{Limit: ptr(int64(5))}).err(t)
	if r.Field != "shard" {
		t.Fatalf("limit without a shard: %+v", r)
	}
	e.must(400, "DELETE", "/v1/queues/job_runs/default/limit", e.admin, nil)
	e.must(404, "PUT", "/v1/queues/job_runs/default/limit?shard=mars", e.admin, limitRequest{Limit: ptr(int64(5))})
	e.must(400, "PUT", "/v1/queues/job_runs/default/limit?shard=b&x=1", e.admin, limitRequest{Limit: ptr(int64(5))})
	if after := snapshot(t, e.pool) + snapshot(t, second); after != before {
		t.Fatal("a refused limit wrote")
	}
	var st queueState
	e.must(200, "PUT", "/v1/queues/job_runs/default/limit?shard=b", e.admin, limitRequest{Limit: ptr(int64(5))}).decode(t, &st)
	if st.Shard != "b" || *st.Limit != 5 {
		t.Fatalf("limit: %+v", st)
	}
	if snapshot(t, e.pool) != beforeA {
		t.Fatal("the limit of b reached a")
	}
	var w int32
	if err := second.QueryRow(ctx, "select max_in_progress from workq.queue_limits where work_table = 'job_runs' and queue = 'default'").Scan(&w); err != nil || w != 5 {
		t.Fatalf("b's limit: %d (%v)", w, err)
	}
	e.must(200, "DELETE", "/v1/queues/job_runs/default/limit?shard=b", e.admin, nil)
}

// Schedules live on the shard of their name, as the Client places them:
// a create lands there and a second of the same name conflicts; the list
// has every shard's, each with its shard; get, trigger and delete find
// it there.
func TestAPISchedulesOnShards(t *testing.T) {
	second := testdb.Pool(t)
	e := newEnv(t, func(o *setup) {
		o.shards = []workq.Shard{{Name: "a", Pool: o.pool}, {Name: "b", Pool: second}}
	})
	names := []string{"a", "b"}
	pools := []*pgxpool.Pool{e.pool, second}
	// Names that go to each shard.
	byShard := map[int]string{}
	for i := 0; len(byShard) < 2; i++ {
		n := "nightly-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		if _, ok := byShard[workqtype.ShardIndex(names, workqtype.ShardKeySchedule(n))]; !ok {
			byShard[workqtype.ShardIndex(names, workqtype.ShardKeySchedule(n))] = n
		}
	}
	for i, name := range byShard {
		var sc scheduleOut
		e.must(201, "POST", "/v1/schedules", e.admin, map[string]any{"name": name, "cron": "0 3 * * *", "kind": "report"}).decode(t, &sc)
		if sc.Shard != names[i] {
			t.Fatalf("%s created on %s, the Client places it on %s", name, sc.Shard, names[i])
		}
		var n int
		if err := pools[i].QueryRow(context.Background(), "select count(*) from workq.schedules where name = $1", name).Scan(&n); err != nil || n != 1 {
			t.Fatalf("%s on shard %s: %d rows (%v)", name, names[i], n, err)
		}
		if err := pools[1-i].QueryRow(context.Background(), "select count(*) from workq.schedules where name = $1", name).Scan(&n); err != nil || n != 0 {
			t.Fatalf("%s on the other shard: %d rows (%v)", name, n, err)
		}
		e.must(409, "POST", "/v1/schedules", e.admin, map[string]any{"name": name, "cron": "0 4 * * *", "kind": "report"})
		e.must(200, "GET", "/v1/schedules/"+name, e.read, nil).decode(t, &sc)
		if sc.Shard != names[i] || sc.Cron != "0 3 * * *" {
			t.Fatalf("get %s: %+v", name, sc)
		}
		e.must(200, "PATCH", "/v1/schedules/"+name, e.admin, map[string]any{"priority": 3})
		e.must(200, "POST", "/v1/schedules/"+name+"/disable", e.admin, nil)
		e.must(200, "POST", "/v1/schedules/"+name+"/enable", e.admin, nil)
		var tr struct {
			RunID int64  `json:"run_id"`
			Shard string `json:"shard"`
		}
		e.must(201, "POST", "/v1/schedules/"+name+"/trigger", e.admin, nil).decode(t, &tr)
		if tr.Shard != names[i] {
			t.Fatalf("trigger %s: run on %s", name, tr.Shard)
		}
		e.must(404, "GET", "/v1/schedules/"+name+"?shard="+names[1-i], e.read, nil)
		e.must(400, "POST", "/v1/schedules/"+name+"/trigger?shard="+names[1-i], e.admin, nil)
	}
	var list struct {
		Schedules []scheduleOut `json:"schedules"`
	}
	e.must(200, "GET", "/v1/schedules", e.read, nil).decode(t, &list)
	if len(list.Schedules) != 2 {
		t.Fatalf("listed %+v", list.Schedules)
	}
	for _, sc := range list.Schedules {
		if byShard[indexOf(names, sc.Shard)] != sc.Name {
			t.Fatalf("listed %s on %s", sc.Name, sc.Shard)
		}
	}
	for i, name := range byShard {
		e.must(200, "DELETE", "/v1/schedules/"+name, e.admin, nil)
		var n int
		if err := pools[i].QueryRow(context.Background(), "select count(*) from workq.schedules where name = $1", name).Scan(&n); err != nil || n != 0 {
			t.Fatalf("%s still on %s: %d (%v)", name, names[i], n, err)
		}
	}
}

func indexOf(names []string, name string) int {
	for i, n := range names {
		if n == name {
			return i
		}
	}
	return -1
}

func ptr[T any](v T) *T { return &v }
