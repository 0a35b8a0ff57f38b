package workq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/inbox"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/migrate"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/timers"
)

// OpsArgs is the job of the operator tests.
type OpsArgs struct {
	N int `json:"n"`
}

func (OpsArgs) Kind() string { return "ops.test" }

// opsClients are the Clients every operator test runs on: one database in
// the default schema, one in a schema of its own, and two shards.
func opsClients(t *testing.T) map[string]*workq.Client {
	t.Helper()
	ctx := context.Background()
	out := map[string]*workq.Client{}
	c, err := workq.NewClient(testdb.Pool(t), workq.Config{})
	if err != nil {
		t.Fatal(err)
	}
	out["default schema"] = c

	pool := testdb.Pool(t)
	m, err := migrate.New(pool, migrate.Options{Schema: "wq_ops"})
	if err == nil {
		_, err = m.Up(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	if c, err = workq.NewClient(pool, workq.Config{Schema: "wq_ops"}); err != nil {
		t.Fatal(err)
	}
	out["schema wq_ops"] = c

	if c, err = workq.NewShardedClient([]workq.Shard{{Name: "a", Pool: testdb.Pool(t)}, {Name: "b", Pool: testdb.Pool(t)}}, workq.Config{}); err != nil {
		t.Fatal(err)
	}
	out["two shards"] = c
	return out
}

// put writes one item of table through the Client, payload {"n": n}, and
// returns its ref (with its shard).
func put(t *testing.T, c *workq.Client, table workq.Table, queue, kind string, n int) workq.ItemRef {
	t.Helper()
	ctx := context.Background()
	payload := map[string]int{"n": n}
	var id int64
	var shard string
	var err error
	switch table {
	case workq.TableJobRuns:
		var r workq.Enqueued
		r, err = c.Enqueue(ctx, OpsArgs{N: n}, &workq.EnqueueOpts{Queue: queue})
		id, shard = r.ID, r.Shard
	case workq.TableOutbox:
		var r outbox.Sent
		r, err = c.Send(ctx, outbox.Message{Queue: queue, Topic: kind, Payload: payload})
		id, shard = r.ID, r.Shard
	case workq.TableInbox:
		var r inbox.Received
		r, err = c.Receive(ctx, inbox.Message{Queue: queue, Topic: kind, Source: "ops", MessageID: uuid.NewString(), Payload: payload})
		id, shard = r.ID, r.Shard
	case workq.TableTimers:
		var r timers.Scheduled
		r, err = c.ScheduleTimer(ctx, timers.Timer{Queue: queue, Topic: kind, Payload: payload, Delay: 3600e9})
		id, shard = r.ID, r.Shard
	}
	if err != nil {
		t.Fatalf("put %s: %v", table, err)
	}
	return workq.ItemRef{Table: table, ID: id, Shard: shard}
}

// poolOf is the pool of ref's shard.
func poolOf(t *testing.T, c *workq.Client, shard string) *pgxpool.Pool {
	t.Helper()
	sc, err := c.Shard(shard)
	if err != nil {
		t.Fatal(err)
	}
	return sc.Pool()
}

// fail moves ref's item to failed, as its last attempt's failure does.
func fail(t *testing.T, c *workq.Client, ref workq.ItemRef) {
	t.Helper()
	_, err := poolOf(t, c, ref.Shard).Exec(context.Background(), fmt.Sprintf(
		`update %s.%s set status = 3, attempts = 1, finished_at = now(), last_error = 'boom' where id = $1`, c.Schema(), ref.Table), ref.ID)
	if err != nil {
		t.Fatal(err)
	}
}

// kindOf is the kind put gives an item of table.
func kindOf(table workq.Table) string {
	if table == workq.TableJobRuns {
		return OpsArgs{}.Kind()
	}
	return "ops.topic"
}

// Get, List, Attempts, Retry, Cancel and Delete on every table, on a
// Client of one database (default schema and another) and a sharded one.
func TestClientOperatorMethods(t *testing.T) {
	ctx := context.Background()
	for name, c := range opsClients(t) {
		for _, table := range workq.Tables() {
			t.Run(name+"/"+string(table), func(t *testing.T) {
				kind := kindOf(table)
				var refs []workq.ItemRef // oldest first
				for i := range 5 {
					refs = append(refs, put(t, c, table, "ops", kind, i))
				}
				put(t, c, table, "other", kind, 99)

				// Get: the item with its payload and shard.
				it, err := c.Get(ctx, refs[2])
				if err != nil {
					t.Fatal(err)
				}
				if it.ID != refs[2].ID || it.Table != table || it.Shard != refs[2].Shard || it.Queue != "ops" || it.Kind != kind ||
					it.Status != workq.StateReady || !jsonEq(it.Payload, `{"n":2}`) {
					t.Fatalf("Get %v: %+v payload %s", refs[2], it, it.Payload)
				}
				if workq.RefOf(it) != refs[2] {
					t.Fatalf("RefOf = %v, want %v", workq.RefOf(it), refs[2])
				}

				// List: pages of two, newest first, payloads included; the
				// cursor goes through every shard.
				for _, it := range listAll(t, c, workq.ListParams{Table: table, Queue: "ops", Kind: kind, Limit: 2}) {
					var pl struct{ N int }
					if err := json.Unmarshal(it.Payload, &pl); err != nil || workq.RefOf(it) != refs[pl.N] {
						t.Fatalf("listed %v with the payload %q (%v)", workq.RefOf(it), it.Payload, err)
					}
				}
				checkNewestFirst(t, c, workq.ListParams{Table: table, Queue: "ops", Kind: kind, Limit: 2}, refs)

				// Retry takes failed items only.
				fail(t, c, refs[0])
				if err := c.Retry(ctx, refs[1], nil); !errors.Is(err, workq.ErrWrongState) {
					t.Fatalf("Retry of a ready item: %v", err)
				}
				var se *workq.StateError
				if err := c.Retry(ctx, refs[1], nil); !errors.As(err, &se) || se.State != "ready" || se.Ref.ID != refs[1].ID {
					t.Fatalf("Retry of a ready item: %#v", err)
				}
				res, err := c.List(ctx, workq.ListParams{Table: table, States: []string{workq.StateFailed}})
				if err != nil || len(res.Items) != 1 || workq.RefOf(res.Items[0]) != refs[0] {
					t.Fatalf("failed items: %+v %v", res.Items, err)
				}
				if err := c.Retry(ctx, refs[0], &workq.ActionOpts{Actor: "ops:test", Reason: "fixed"}); err != nil {
					t.Fatal(err)
				}
				if it, err := c.Get(ctx, refs[0]); err != nil || it.Status != workq.StateReady || it.Attempts != 0 {
					t.Fatalf("retried item: %+v %v", it, err)
				}

				// Cancel a ready item, then again (finished).
				if r, err := c.Cancel(ctx, refs[3], &workq.ActionOpts{Actor: "ops:test", Reason: "not needed"}); err != nil || r != workq.CancelledNow {
					t.Fatalf("Cancel: %v %v", r, err)
				}
				_, err = c.Cancel(ctx, refs[3], nil)
				var fe *workq.FinishedError
				if !errors.Is(err, workq.ErrFinished) || !errors.Is(err, workq.ErrWrongState) || !errors.As(err, &fe) || fe.State != "cancelled" || fe.Table != table {
					t.Fatalf("Cancel of a cancelled item: %v", err)
				}
				// Several states at once, merged newest first.
				fail(t, c, refs[4])
				res, err = c.List(ctx, workq.ListParams{Table: table, States: []string{workq.StateFailed, workq.StateCancelled}, Queue: "ops"})
				if err != nil || len(res.Items) != 2 || workq.RefOf(res.Items[0]) != refs[4] || workq.RefOf(res.Items[1]) != refs[3] {
					t.Fatalf("failed or cancelled: %+v %v", res.Items, err)
				}

				// Attempts: the operators' retry and cancel with their actor.
				atts, err := c.Attempts(ctx, refs[0])
				if err != nil || len(atts) != 1 || atts[0].Outcome != "revived" || atts[0].Worker != "ops:test" || atts[0].Error != "fixed" {
					t.Fatalf("attempts of the retried item: %+v %v", atts, err)
				}
				atts, err = c.Attempts(ctx, refs[3])
				if err != nil || len(atts) != 1 || atts[0].Outcome != "cancelled" || atts[0].Worker != "ops:test" {
					t.Fatalf("attempts of the cancelled item: %+v %v", atts, err)
				}

				// Delete takes finished items only.
				if err := c.Delete(ctx, refs[1]); !errors.Is(err, workq.ErrWrongState) {
					t.Fatalf("Delete of a ready item: %v", err)
				}
				if err := c.Delete(ctx, refs[3]); err != nil {
					t.Fatal(err)
				}
				// Every not-found is ErrNotFound.
				gone := refs[3]
				if _, err := c.Get(ctx, gone); !errors.Is(err, workq.ErrNotFound) {
					t.Fatalf("Get of a deleted item: %v", err)
				}
				for verb, f := range map[string]func(workq.ItemRef) error{
					"Retry":  func(r workq.ItemRef) error { return c.Retry(ctx, r, nil) },
					"Cancel": func(r workq.ItemRef) error { _, err := c.Cancel(ctx, r, nil); return err },
					"Delete": func(r workq.ItemRef) error { return c.Delete(ctx, r) },
					"Get":    func(r workq.ItemRef) error { _, err := c.Get(ctx, r); return err },
				} {
					if err := f(gone); !errors.Is(err, workq.ErrNotFound) {
						t.Errorf("%s of a deleted item: %v", verb, err)
					}
				}
				if atts, err := c.Attempts(ctx, gone); err != nil || len(atts) != 1 {
					t.Errorf("attempts of a deleted item stay: %+v %v", atts, err)
				}
				if _, err := c.Attempts(ctx, workq.ItemRef{Table: table, ID: 1 << 40, Shard: refs[0].Shard}); !errors.Is(err, workq.ErrNotFound) {
					t.Errorf("attempts of an item that never was: %v", err)
				}
			})
		}
	}
}

// listAll pages through p with the Client, checking each page's size, and
// returns every item.
func listAll(t *testing.T, c *workq.Client, p workq.ListParams) []workq.Item {
	t.Helper()
	var out []workq.Item
	for pages := 0; ; pages++ {
		res, err := c.List(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Items) > p.Limit || pages > 100 {
			t.Fatalf("page %d: %d items (limit %d), next %q", pages, len(res.Items), p.Limit, res.Next)
		}
		out = append(out, res.Items...)
		if res.Next == "" {
			return out
		}
		p.Cursor = res.Next
	}
}

// checkNewestFirst checks that paging through p lists refs (oldest first)
// newest first, each once.
func checkNewestFirst(t *testing.T, c *workq.Client, p workq.ListParams, refs []workq.ItemRef) {
	t.Helper()
	var listed []workq.ItemRef
	for _, it := range listAll(t, c, p) {
		listed = append(listed, workq.RefOf(it))
	}
	want := slices.Clone(refs)
	slices.Reverse(want)
	if !slices.Equal(listed, want) {
		t.Fatalf("listed %v, want %v", listed, want)
	}
}

// jsonEq reports whether raw is the JSON of want.
func jsonEq(raw json.RawMessage, want string) bool {
	var a, b any
	return json.Unmarshal(raw, &a) == nil && json.Unmarshal([]byte(want), &b) == nil && fmt.Sprint(a) == fmt.Sprint(b)
}

// Every method refuses bad input with ErrInvalid, before it touches data:
// the failed item stays failed, the queue unpaused.
func TestClientOperatorInvalid(t *testing.T) {
	ctx := context.Background()
	for name, c := range opsClients(t) {
		t.Run(name, func(t *testing.T) {
			ref := put(t, c, workq.TableJobRuns, "default", "", 1)
			fail(t, c, ref)
			long := strings.Repeat("x", 300)
			cases := map[string]func() error{
				"Get unknown table": func() error { _, err := c.Get(ctx, workq.ItemRef{Table: "jobs", ID: 1}); return err },
				"Get id 0":          func() error { _, err := c.Get(ctx, workq.ItemRef{Table: workq.TableJobRuns}); return err },
				"Get nil ctx":       func() error { var nilCtx context.Context; _, err := c.Get(nilCtx, ref); return err },
				"Get unknown shard": func() error {
					_, err := c.Get(ctx, workq.ItemRef{Table: workq.TableJobRuns, ID: 1, Shard: "zz"})
					return err
				},
				"List bad state":    func() error { _, err := c.List(ctx, workq.ListParams{States: []string{"waiting"}}); return err },
				"List empty state":  func() error { _, err := c.List(ctx, workq.ListParams{States: []string{""}}); return err },
				"List bad table":    func() error { _, err := c.List(ctx, workq.ListParams{Table: "jobs"}); return err },
				"List limit":        func() error { _, err := c.List(ctx, workq.ListParams{Limit: workq.MaxListLimit + 1}); return err },
				"List cursor":       func() error { _, err := c.List(ctx, workq.ListParams{Cursor: "nope"}); return err },
				"List queue":        func() error { _, err := c.List(ctx, workq.ListParams{Queue: " q"}); return err },
				"List shard":        func() error { _, err := c.List(ctx, workq.ListParams{Shard: "zz"}); return err },
				"Retry long actor":  func() error { return c.Retry(ctx, ref, &workq.ActionOpts{Actor: long}) },
				"Retry long reason": func() error { return c.Retry(ctx, ref, &workq.ActionOpts{Reason: strings.Repeat(long, 4)}) },
				"Cancel bad actor":  func() error { _, err := c.Cancel(ctx, ref, &workq.ActionOpts{Actor: "a\x00b"}); return err },
				"Delete id -1":      func() error { return c.Delete(ctx, workq.ItemRef{Table: workq.TableJobRuns, ID: -1}) },
				"Pause no queue":    func() error { _, err := c.PauseQueue(ctx, workq.QueueRef{}, nil); return err },
				"Pause bad table": func() error {
					_, err := c.PauseQueue(ctx, workq.QueueRef{Table: "x", Queue: "default"}, nil)
					return err
				},
				"Pause long actor": func() error {
					_, err := c.PauseQueue(ctx, workq.QueueRef{Queue: "default"}, &workq.ActionOpts{Actor: long})
					return err
				},
				"Limit negative": func() error {
					return c.SetQueueLimit(ctx, workq.QueueRef{Table: workq.TableJobRuns, Queue: "default", Shard: ref.Shard}, -1)
				},
				"Limit no table": func() error { return c.SetQueueLimit(ctx, workq.QueueRef{Queue: "default", Shard: ref.Shard}, 1) },
			}
			if len(c.Shards()) > 1 {
				cases["Limit no shard"] = func() error {
					return c.SetQueueLimit(ctx, workq.QueueRef{Table: workq.TableJobRuns, Queue: "default"}, 1)
				}
			}
			for what, f := range cases {
				if err := f(); !errors.Is(err, workq.ErrInvalid) {
					t.Errorf("%s: %v, want ErrInvalid", what, err)
				}
			}
			if it, err := c.Get(ctx, ref); err != nil || it.Status != workq.StateFailed {
				t.Fatalf("the failed item after refused requests: %+v %v", it, err)
			}
			qs, err := c.ListQueues(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range qs {
				if q.Paused || len(q.PausedShards) > 0 || q.Limit != nil {
					t.Fatalf("queue changed by refused requests: %+v", q)
				}
			}
		})
	}
}

// Pause, resume and limits per queue, of one table or every table, on
// every shard.
func TestClientQueueOperations(t *testing.T) {
	ctx := context.Background()
	for name, c := range opsClients(t) {
		t.Run(name, func(t *testing.T) {
			for _, table := range workq.Tables() {
				put(t, c, table, "mail", kindOf(table), 1)
			}
			paused := func() map[workq.Table]bool {
				t.Helper()
				qs, err := c.ListQueues(ctx)
				if err != nil {
					t.Fatal(err)
				}
				out := map[workq.Table]bool{}
				for _, q := range qs {
					if q.Queue != "mail" {
						continue
					}
					if q.Ready+q.Scheduled != 1 {
						t.Errorf("%s/mail counts %d ready, %d scheduled: want the one item", q.Table, q.Ready, q.Scheduled)
					}
					if q.Paused {
						out[q.Table] = true
						if q.PausedBy != "ops:alice" && len(q.Shards) == 0 {
							t.Errorf("paused by %q", q.PausedBy)
						}
					}
				}
				return out
			}
			by := &workq.ActionOpts{Actor: "ops:alice", Reason: "maintenance"}
			if ch, err := c.PauseQueue(ctx, workq.QueueRef{Table: workq.TableOutbox, Queue: "mail"}, by); err != nil || !ch {
				t.Fatalf("pause outbox/mail: %v %v", ch, err)
			}
			if ch, err := c.PauseQueue(ctx, workq.QueueRef{Table: workq.TableOutbox, Queue: "mail"}, by); err != nil || ch {
				t.Fatalf("pause it again: %v %v", ch, err)
			}
			if got := paused(); len(got) != 1 || !got[workq.TableOutbox] {
				t.Fatalf("paused %v, want outbox only", got)
			}
			if ch, err := c.PauseQueue(ctx, workq.QueueRef{Queue: "mail"}, by); err != nil || !ch {
				t.Fatalf("pause mail on every table: %v %v", ch, err)
			}
			if got := paused(); len(got) != 4 {
				t.Fatalf("paused %v, want every table", got)
			}
			if ch, err := c.ResumeQueue(ctx, workq.QueueRef{Queue: "mail"}); err != nil || !ch {
				t.Fatalf("resume: %v %v", ch, err)
			}
			if got := paused(); len(got) != 0 {
				t.Fatalf("paused %v after resume", got)
			}

			for _, shard := range c.Shards() {
				q := workq.QueueRef{Table: workq.TableJobRuns, Queue: "mail", Shard: shard}
				if _, ok, err := c.QueueLimit(ctx, q); err != nil || ok {
					t.Fatalf("limit before any: %v %v", ok, err)
				}
				if err := c.SetQueueLimit(ctx, q, 3); err != nil {
					t.Fatal(err)
				}
				if w, ok, err := c.QueueLimit(ctx, q); err != nil || !ok || w != 3 {
					t.Fatalf("limit: %d %v %v", w, ok, err)
				}
				qs, err := c.ListQueues(ctx)
				if err != nil {
					t.Fatal(err)
				}
				i := slices.IndexFunc(qs, func(x workq.QueueInfo) bool { return x.Table == workq.TableJobRuns && x.Queue == "mail" })
				row := qs[i]
				if len(c.Shards()) > 1 {
					row = row.Shards[slices.IndexFunc(row.Shards, func(x workq.QueueInfo) bool { return x.Shard == shard })]
				}
				if row.Limit == nil || *row.Limit != 3 {
					t.Fatalf("listed limit of %s: %v", shard, row.Limit)
				}
				if err := c.RemoveQueueLimit(ctx, q); err != nil {
					t.Fatal(err)
				}
				if _, ok, err := c.QueueLimit(ctx, q); err != nil || ok {
					t.Fatalf("limit after remove: %v %v", ok, err)
				}
			}
		})
	}
}

// A sharded Client: List merges the shards newest first with one cursor
// over both, one shard alone with Shard; an id on both shards needs its
// shard named.
func TestClientOperatorShards(t *testing.T) {
	ctx := context.Background()
	c := opsClients(t)["two shards"]
	var refs []workq.ItemRef
	for i := range 6 {
		refs = append(refs, put(t, c, workq.TableJobRuns, "default", "", i))
	}
	on := map[string]int{}
	for _, r := range refs {
		on[r.Shard]++
	}
	if on["a"] != 3 || on["b"] != 3 {
		t.Fatalf("round-robin put %v", on)
	}
	p := workq.ListParams{Limit: 4}
	checkNewestFirst(t, c, p, refs)
	last, err := c.List(ctx, p)
	if err != nil || last.Next == "" {
		t.Fatalf("first page: %v %v", last.Next, err)
	}
	p.Cursor = last.Next
	res, err := c.List(ctx, workq.ListParams{Shard: "b"})
	if err != nil || len(res.Items) != 3 || res.Items[0].Shard != "b" {
		t.Fatalf("shard b: %+v %v", res.Items, err)
	}
	if _, err := c.List(ctx, workq.ListParams{Shard: "a", Cursor: p.Cursor}); !errors.Is(err, workq.ErrInvalid) {
		t.Fatalf("a cursor of both shards on shard a alone: %v", err)
	}

	// Ids are per shard: job 1 is on both.
	one := workq.JobRef(refs[0].ID)
	if _, err := c.Get(ctx, one); !errors.Is(err, workq.ErrInvalid) || !strings.Contains(err.Error(), "name the shard") {
		t.Fatalf("Get of an id on both shards: %v", err)
	}
	if err := c.Delete(ctx, one); !errors.Is(err, workq.ErrInvalid) {
		t.Fatalf("Delete of an id on both shards: %v", err)
	}
	// An id on one shard only is found there.
	only := put(t, c, workq.TableJobRuns, "default", "", 6)
	if it, err := c.Get(ctx, workq.JobRef(only.ID)); err != nil || it.Shard != only.Shard || only.Shard != "a" {
		t.Fatalf("Get of an id on shard %s only: %+v %v", only.Shard, it, err)
	}
	if r, err := c.Cancel(ctx, refs[0], nil); err != nil || r != workq.CancelledNow {
		t.Fatalf("Cancel with the shard: %v %v", r, err)
	}
	if it, err := c.Get(ctx, refs[0]); err != nil || it.Status != workq.StateCancelled {
		t.Fatalf("cancelled on its shard: %+v %v", it, err)
	}
	other := refs[1]
	if it, err := c.Get(ctx, other); err != nil || it.Status != workq.StateReady {
		t.Fatalf("the other shard's item of the same id: %+v %v", it, err)
	}
	// Metadata: the job runs whose metadata holds the pairs asked.
	tagged, err := c.Enqueue(ctx, OpsArgs{N: 7}, &workq.EnqueueOpts{Metadata: map[string]string{"tenant": "t1", "plan": "pro"}})
	if err != nil {
		t.Fatal(err)
	}
	res, err = c.List(ctx, workq.ListParams{Metadata: map[string]string{"tenant": "t1"}})
	if err != nil || len(res.Items) != 1 || workq.RefOf(res.Items[0]) != tagged.Ref() || res.Items[0].Metadata["plan"] != "pro" {
		t.Fatalf("by metadata: %+v %v", res.Items, err)
	}
	if res, err := c.List(ctx, workq.ListParams{Metadata: map[string]string{"tenant": "t2"}}); err != nil || len(res.Items) != 0 {
		t.Fatalf("by other metadata: %+v %v", res.Items, err)
	}
	if _, err := c.List(ctx, workq.ListParams{Table: workq.TableOutbox, Metadata: map[string]string{"tenant": "t1"}}); !errors.Is(err, workq.ErrInvalid) {
		t.Fatalf("metadata of the outbox: %v", err)
	}
}

// RetryMany, CancelMany and DeleteMany act on items of several tables (and
// shards) at once and report each item; a bad batch changes nothing.
func TestClientOperatorMany(t *testing.T) {
	ctx := context.Background()
	for name, c := range opsClients(t) {
		t.Run(name, func(t *testing.T) {
			var failed, ready []workq.ItemRef
			for _, table := range workq.Tables() {
				f := put(t, c, table, "many", kindOf(table), 1)
				fail(t, c, f)
				failed = append(failed, f)
				ready = append(ready, put(t, c, table, "many", kindOf(table), 2))
			}
			missing := workq.ItemRef{Table: workq.TableTimers, ID: 1 << 40, Shard: ready[0].Shard}

			bad := map[string][]workq.ItemRef{
				"none":          nil,
				"twice":         {failed[0], failed[1], failed[0]},
				"bad table":     {failed[0], {Table: "jobs", ID: 1, Shard: failed[0].Shard}},
				"unknown shard": {failed[0], {Table: workq.TableJobRuns, ID: 1, Shard: "zz"}},
				"too many":      make([]workq.ItemRef, workq.MaxActionItems+1),
			}
			if len(c.Shards()) > 1 {
				bad["no shard"] = []workq.ItemRef{failed[0], workq.JobRef(1)}
			}
			for what, refs := range bad {
				if _, err := c.RetryMany(ctx, refs, nil); !errors.Is(err, workq.ErrInvalid) {
					t.Errorf("RetryMany %s: %v, want ErrInvalid", what, err)
				}
			}
			if _, err := c.RetryMany(ctx, failed, &workq.ActionOpts{Actor: strings.Repeat("x", 300)}); !errors.Is(err, workq.ErrInvalid) {
				t.Errorf("RetryMany with a long actor: %v", err)
			}
			for _, r := range failed {
				if it, err := c.Get(ctx, r); err != nil || it.Status != workq.StateFailed {
					t.Fatalf("%v after refused batches: %+v %v", r, it, err)
				}
			}

			all := append(append(slices.Clone(failed), ready...), missing)
			res, err := c.RetryMany(ctx, all, &workq.ActionOpts{Actor: "ops:bulk"})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Applied) != 4 || len(res.WrongState) != 4 || len(res.NotFound) != 1 || res.NotFound[0] != missing {
				t.Fatalf("RetryMany: %+v", res)
			}
			for _, r := range failed {
				if !slices.Contains(res.Applied, r) {
					t.Errorf("%v not retried: %+v", r, res)
				}
			}
			for _, r := range ready {
				if res.WrongState[r] != "ready" {
					t.Errorf("%v: state %q, want ready", r, res.WrongState[r])
				}
			}
			res, err = c.CancelMany(ctx, ready, nil)
			if err != nil || len(res.Applied) != 4 || len(res.Requested) != 0 {
				t.Fatalf("CancelMany: %+v %v", res, err)
			}
			res, err = c.DeleteMany(ctx, append(slices.Clone(ready), failed...))
			if err != nil || len(res.Applied) != 4 || len(res.WrongState) != 4 {
				t.Fatalf("DeleteMany: %+v %v", res, err)
			}
			for _, r := range ready {
				if _, err := c.Get(ctx, r); !errors.Is(err, workq.ErrNotFound) {
					t.Errorf("%v after delete: %v", r, err)
				}
			}
		})
	}
}
