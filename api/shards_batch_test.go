package api

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/workqtype"
)

// keysOn returns a key of each shard of names, made by key(i), placed by
// route (a workqtype.ShardKey... function).
func keysOn(names []string, key func(i int) string, route func(string) string) map[string]string {
	out := map[string]string{}
	for i := 0; len(out) < len(names); i++ {
		k := key(i)
		if sh := workqtype.ShardOf(names, route(k)); out[sh] == "" {
			out[sh] = k
		}
	}
	return out
}

// A batch whose keys go to two shards is the Client's: accepted, each item
// on its key's shard, as workq.Client.EnqueueMany (SendMany, the inbox's
// receive) puts it (the API refused such a batch before it was a Client
// user). A batch with an invalid item, or an inbox batch with a conflict
// on one shard, writes nothing on any shard.
func TestAPIBatchOverTwoShards(t *testing.T) {
	ctx := context.Background()
	second := testdb.Pool(t)
	e := newEnv(t, func(o *setup) {
		o.shards = []workq.Shard{{Name: "eu", Pool: o.pool}, {Name: "us", Pool: second}}
	})
	pools := map[string]*pgxpool.Pool{"eu": e.pool, "us": second}
	names := []string{"eu", "us"}
	count := func(shard, sql string, args ...any) int {
		t.Helper()
		var n int
		if err := pools[shard].QueryRow(ctx, sql, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	snap := func() string { return snapshot(t, e.pool) + snapshot(t, second) }

	// Jobs: one dedup key of each shard, one with a run_at.
	dedup := keysOn(names, func(i int) string { return fmt.Sprintf("invoice:%d", i) }, workqtype.ShardKeyDedup)
	var jobs items[jobResult]
	e.must(201, "POST", "/v1/jobs/batch", e.admin, map[string]any{"items": []map[string]any{
		{"kind": "k", "dedup_key": dedup["eu"]}, {"kind": "k", "dedup_key": dedup["us"], "run_at": "2030-01-01T00:00:00Z"},
		{"kind": "k"}}}).decode(t, &jobs)
	for i, want := range []string{"eu", "us"} {
		if got := jobs.Items[i]; got.Shard != want ||
			count(want, "select count(*) from workq.job_runs_all where id = $1 and dedup_key = $2", got.ID, dedup[want]) != 1 {
			t.Fatalf("job %d: %+v, want it on %s with its key", i, got, want)
		}
	}

	// Outbox: one partition key of each shard.
	part := keysOn(names, func(i int) string { return fmt.Sprintf("order-%d", i) }, workqtype.ShardKeyPartition)
	var sent items[struct {
		ID    int64  `json:"id"`
		Shard string `json:"shard"`
	}]
	e.must(201, "POST", "/v1/outbox/batch", e.admin, map[string]any{"items": []map[string]any{
		{"topic": "t", "partition_key": part["us"]}, {"topic": "t", "partition_key": part["eu"]}}}).decode(t, &sent)
	for i, want := range []string{"us", "eu"} {
		if got := sent.Items[i]; got.Shard != want ||
			count(want, "select count(*) from workq.outbox where id = $1 and partition_key = $2", got.ID, part[want]) != 1 {
			t.Fatalf("message %d: %+v, want it on %s", i, got, want)
		}
	}

	// Inbox: one (source, id) of each shard.
	ids := keysOn(names, func(i int) string { return fmt.Sprintf("m-%d", i) },
		func(id string) string { return workqtype.ShardKeyInbox("crm", id) })
	var recv items[inboxResult]
	e.must(201, "POST", "/v1/inbox/batch", e.admin, map[string]any{"items": []map[string]any{
		{"source": "crm", "message_id": ids["eu"], "topic": "t"}, {"source": "crm", "message_id": ids["us"], "topic": "t"}}}).decode(t, &recv)
	for i, want := range []string{"eu", "us"} {
		if got := recv.Items[i]; got.Shard != want || got.Result != "new" ||
			count(want, "select count(*) from workq.inbox where id = $1 and message_id = $2", got.ID, ids[want]) != 1 {
			t.Fatalf("inbox message %d: %+v, want it new on %s", i, got, want)
		}
	}

	// Refused: nothing is written on either shard.
	before := snap()
	more := keysOn(names, func(i int) string { return fmt.Sprintf("n-%d", i) },
		func(id string) string { return workqtype.ShardKeyInbox("crm", id) })
	r := e.must(400, "POST", "/v1/jobs/batch", e.admin, map[string]any{"items": []map[string]any{
		{"kind": "k", "dedup_key": "fresh-1"}, {"kind": "k", "dedup_key": "fresh-2"}, {"kind": "bad kind"}}}).err(t)
	if r.Field != "items[2].kind" {
		t.Fatalf("a batch with a bad kind: %+v", r)
	}
	// us's part conflicts (a stored id with another payload); eu's is new.
	c := e.must(409, "POST", "/v1/inbox/batch", e.admin, map[string]any{"items": []map[string]any{
		{"source": "crm", "message_id": more["eu"], "topic": "t"},
		{"source": "crm", "message_id": ids["us"], "topic": "t", "payload": map[string]int{"changed": 1}}}}).err(t)
	if len(c.Conflicts) != 1 || c.Conflicts[0].Index != 1 {
		t.Fatalf("an inbox batch with a conflict on one shard: %+v", c)
	}
	if snap() != before {
		t.Fatal("a refused batch wrote")
	}
}

// HTTP enqueues are the Client's: its enqueue middleware runs on them, and
// one that refuses a job (an error wrapping workq.ErrInvalid) is a 400 with
// its field, nothing written.
func TestAPIEnqueueRunsTheClientsMiddleware(t *testing.T) {
	e := newEnv(t, func(o *setup) {
		o.config.EnqueueMiddleware = []workq.EnqueueMiddleware{func(ctx context.Context, jobs []*workq.EnqueueParams,
			next func(context.Context) ([]workq.Enqueued, error)) ([]workq.Enqueued, error) {
			for _, j := range jobs {
				if j.Args.Kind() == "forbidden" {
					return nil, workqtype.Invalid("kind", "kind forbidden is not enqueued here")
				}
				j.Opts.Metadata = map[string]string{"via": "middleware"}
			}
			return next(ctx)
		}}
	})
	var res jobResult
	e.must(201, "POST", "/v1/jobs", e.admin, map[string]any{"kind": "k"}).decode(t, &res)
	var batch items[jobResult]
	e.must(201, "POST", "/v1/jobs/batch", e.admin, map[string]any{"items": []map[string]any{{"kind": "k"}, {"kind": "k"}}}).decode(t, &batch)
	for _, id := range []int64{res.ID, batch.Items[0].ID, batch.Items[1].ID} {
		var via string
		if err := e.pool.QueryRow(context.Background(), "select metadata->>'via' from workq.job_runs_all where id = $1", id).Scan(&via); err != nil || via != "middleware" {
			t.Fatalf("job %d: metadata via %q (%v), want the middleware's", id, via, err)
		}
	}
	before := snapshot(t, e.pool)
	for _, req := range []struct {
		path string
		body any
	}{
		{"/v1/jobs", map[string]any{"kind": "forbidden"}},
		{"/v1/jobs/batch", map[string]any{"items": []map[string]any{{"kind": "k"}, {"kind": "forbidden"}}}},
	} {
		if r := e.must(400, "POST", req.path, e.admin, req.body).err(t); r.Field != "kind" || r.Code != CodeInvalid {
			t.Fatalf("%s refused by the middleware: %+v", req.path, r)
		}
	}
	if snapshot(t, e.pool) != before {
		t.Fatal("a job the middleware refused was written")
	}
}
