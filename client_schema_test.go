package workq_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/inbox"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/migrate"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/timers"
	"github.com/workq/workq/workqtype"
)

// originArgs say which Client's schema wrote them, and when.
type originArgs struct {
	Origin string `json:"origin"`
	Sent   int64  `json:"sent"` // UnixNano
}

func (originArgs) Kind() string { return "schema.origin" }

// pickup is one item a Client's handler ran.
type pickup struct {
	client, kind, origin string
	latency              time.Duration // from enqueue to the handler
}

// Two Clients in one process on two schemas of one database, each with a
// typed job worker and an inbox, timer and outbox handler: each runs
// exactly its own items, and NOTIFY wakes it for them well within the poll
// interval (1s), so each schema's channels reach its own listener.
func TestClientsOnTwoSchemas(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	schemas := []string{"workq", "wq_two"}
	m, err := migrate.New(pool, migrate.Options{Schema: "wq_two"})
	if err == nil {
		_, err = m.Up(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan pickup, 100)
	clients := map[string]*workq.Client{}
	for _, s := range schemas {
		record := func(kind string, a originArgs) {
			got <- pickup{client: s, kind: kind, origin: a.Origin, latency: time.Since(time.Unix(0, a.Sent))}
		}
		ws := workq.NewWorkers()
		workq.AddWorker(ws, workq.WorkFunc(func(_ context.Context, job *workq.Job[originArgs]) error {
			record("job", job.Args)
			return nil
		}))
		msg := func(kind string) func(context.Context, *workq.Message[originArgs]) error {
			return func(_ context.Context, m *workq.Message[originArgs]) error {
				record(kind, m.Payload)
				return nil
			}
		}
		if err := errors.Join(workq.HandleInbox(ws, "schema.in", msg("inbox")), workq.HandleTimer(ws, "schema.timer", msg("timer")),
			workq.HandleOutbox(ws, "schema.out", msg("outbox"))); err != nil {
			t.Fatal(err)
		}
		c, err := workq.NewClient(pool, workq.Config{Schema: s, Workers: ws, FetchPollInterval: time.Second,
			Maintenance: workq.MaintenanceConfig{Disabled: true}})
		if err != nil {
			t.Fatal(err)
		}
		if c.Schema() != s {
			t.Fatalf("Schema() = %q, want %q", c.Schema(), s)
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := c.Stop(ctx); err != nil {
				t.Error(err)
			}
		})
		clients[s] = c
	}
	time.Sleep(500 * time.Millisecond) // the listeners connect, the first claims find nothing

	const rounds = 3
	const kinds = 4
	counts := map[string]int{}
	for r := range rounds {
		for _, s := range schemas {
			c := clients[s]
			a := func() originArgs { return originArgs{Origin: s, Sent: time.Now().UnixNano()} }
			if _, err := c.Enqueue(ctx, a(), nil); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Receive(ctx, inbox.Message{Source: "test", MessageID: fmt.Sprintf("%s-%d", s, r), Topic: "schema.in", Payload: a()}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.ScheduleTimer(ctx, timers.Timer{Topic: "schema.timer", DueTime: time.Now().Add(-time.Second), Payload: a()}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Send(ctx, outbox.Message{Topic: "schema.out", Payload: a()}); err != nil {
				t.Fatal(err)
			}
		}
		for range len(schemas) * kinds {
			select {
			case p := <-got:
				if p.client != p.origin {
					t.Fatalf("the Client on %s ran a %s written on %s", p.client, p.kind, p.origin)
				}
				// The poll is 1s: only a notification wakes a worker this fast.
				if p.latency > 500*time.Millisecond {
					t.Errorf("the Client on %s picked up its %s after %s: not woken by its NOTIFY", p.client, p.kind, p.latency)
				}
				counts[p.client+" "+p.kind]++
			case <-time.After(10 * time.Second):
				t.Fatalf("round %d: not everything ran within 10s; ran so far %v", r, counts)
			}
		}
		time.Sleep(150 * time.Millisecond)
	}
	select {
	case p := <-got:
		t.Fatalf("an item ran twice or from nowhere: %+v", p)
	case <-time.After(300 * time.Millisecond):
	}
	for _, s := range schemas {
		for _, k := range []string{"job", "inbox", "timer", "outbox"} {
			if n := counts[s+" "+k]; n != rounds {
				t.Errorf("the Client on %s ran %d of its %s items, want %d", s, n, k, rounds)
			}
		}
	}
	for _, s := range []string{"pg_nope", "pg_catalog", "information_schema", "public"} {
		if _, err := workq.NewClient(pool, workq.Config{Schema: s}); !errors.Is(err, workq.ErrInvalid) || workqtype.FieldOf(err) != "Schema" {
			t.Errorf("NewClient with schema %s: %v, want ErrInvalid on Schema", s, err)
		}
	}
}

// A Client's maintenance on one schema reaps and deletes only that
// schema's items: the same state in the default schema stays as it is.
func TestMaintenanceOnlyInItsSchema(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	m, err := migrate.New(pool, migrate.Options{Schema: "wq_maint"})
	if err == nil {
		_, err = m.Up(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	type state struct{ expired, finished int64 }
	prepare := func(c *workq.Client) state {
		db := c.InSchema(pool)
		var ids []int64
		for range 2 {
			e, err := c.Enqueue(ctx, workq.RawArgs{KindName: "m.job"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, e.ID)
		}
		eng := lease.New(db, lease.JobRuns)
		cl, err := eng.Claim(ctx, lease.ClaimParams{Queue: "default", Max: 2, Lease: 200 * time.Millisecond, WorkerID: "test"})
		if err != nil || len(cl.Items) != 2 {
			t.Fatalf("claim: %d items, %v", len(cl.Items), err)
		}
		// The claim took exactly the two jobs just enqueued: the state
		// the rest of the test checks is theirs.
		claimed := []int64{cl.Items[0].ID, cl.Items[1].ID}
		slices.Sort(claimed)
		slices.Sort(ids)
		if !slices.Equal(claimed, ids) {
			t.Fatalf("claimed jobs %v, want the enqueued %v", claimed, ids)
		}
		done := cl.Items[0]
		if _, err := eng.Complete(ctx, []lease.Completion{{ID: done.ID, Token: cl.Token, RunID: done.RunID, Outcome: lease.Done}}); err != nil {
			t.Fatal(err)
		}
		return state{expired: cl.Items[1].ID, finished: done.ID}
	}
	status := func(c *workq.Client, id int64) string {
		var s int16
		err := c.InSchema(pool).QueryRow(ctx, `select status from workq.job_runs_all where id = $1`, id).Scan(&s)
		if err != nil {
			return "gone"
		}
		return fmt.Sprint(s)
	}
	def, err := workq.NewClient(pool, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	other, err := workq.NewClient(pool, workq.Config{Schema: "wq_maint", Maintenance: workq.MaintenanceConfig{
		ReapInterval: 50 * time.Millisecond, RetentionInterval: time.Second, RetainFinished: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	inDef, inOther := prepare(def), prepare(other)
	defBefore := [2]string{status(def, inDef.expired), status(def, inDef.finished)}
	time.Sleep(300 * time.Millisecond) // both leases expire
	if err := other.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := other.Stop(ctx); err != nil {
			t.Error(err)
		}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for status(other, inOther.expired) != "0" || status(other, inOther.finished) != "gone" {
		if time.Now().After(deadline) {
			t.Fatalf("wq_maint after 20s: expired job status %s (want 0, requeued), finished job %s (want gone)",
				status(other, inOther.expired), status(other, inOther.finished))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if after := [2]string{status(def, inDef.expired), status(def, inDef.finished)}; after != defBefore {
		t.Fatalf("the default schema's expired and finished jobs went from %v to %v under wq_maint's maintenance", defBefore, after)
	}
}
