package workq_test

// A River service ported to workq, as its owner would write it: the
// ported-service path kept as a regression test. Two job kinds with typed
// args (a signup whose handler enqueues a welcome mail through the Client
// in its context), a periodic digest, an enqueue middleware that stamps the
// tenant and a work middleware that counts runs, a subscription that
// watches completions, and the operator calls River's JobList, JobGet,
// JobRetry, JobCancel, JobDelete and QueuePause map to.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/workqtest"
)

type portSignupArgs struct {
	UserID int64 `json:"user_id"`
}

func (portSignupArgs) Kind() string { return "port.signup" }

type portWelcomeArgs struct {
	UserID int64  `json:"user_id"`
	Email  string `json:"email"`
}

func (portWelcomeArgs) Kind() string { return "port.welcome" }

// Welcome mails go to their own queue, as River's InsertOpts would say.
func (portWelcomeArgs) EnqueueOpts() workq.EnqueueOpts {
	return workq.EnqueueOpts{Queue: "mail", MaxAttempts: 2}
}

type portDigestArgs struct{}

func (portDigestArgs) Kind() string { return "port.digest" }

// portNobodyArgs is a kind no worker of the service registers.
type portNobodyArgs struct{}

func (portNobodyArgs) Kind() string { return "port.nobody" }

// portMailer is the welcome worker: it fails for good while the SMTP
// server is "broken" (River's JobCancel(err) is workq.Permanent(err)).
type portMailer struct {
	broken atomic.Bool
	mu     sync.Mutex
	sent   []string
}

func (m *portMailer) Work(ctx context.Context, job *workq.Job[portWelcomeArgs]) error {
	if m.broken.Load() {
		return workq.Permanent(fmt.Errorf("smtp: 554 relay refused for %s", job.Args.Email))
	}
	m.mu.Lock()
	m.sent = append(m.sent, job.Args.Email)
	m.mu.Unlock()
	return nil
}

func (m *portMailer) sentTo() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.sent...)
}

// portSignupWorker reads the user written in the caller's transaction and
// enqueues the welcome mail with the Client of its context
// (River's ClientFromContext), in its own transaction beside CompleteTx.
type portSignupWorker struct{}

func (portSignupWorker) Work(ctx context.Context, job *workq.Job[portSignupArgs]) error {
	client := workq.ClientFromContext(ctx)
	return pgx.BeginFunc(ctx, client.Pool(), func(tx pgx.Tx) error {
		var email string
		if err := tx.QueryRow(ctx, `SELECT email FROM port_users WHERE id = $1`, job.Args.UserID).Scan(&email); err != nil {
			return err
		}
		if _, err := client.EnqueueTx(ctx, tx, portWelcomeArgs{UserID: job.Args.UserID, Email: email}, nil); err != nil {
			return err
		}
		return job.CompleteTx(ctx, tx)
	})
}

func TestRiverPortService(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE port_users (id bigserial PRIMARY KEY, email text NOT NULL)`); err != nil {
		t.Fatal(err)
	}

	mailer := &portMailer{}
	mailer.broken.Store(true)
	digests := make(chan struct{}, 16)
	workers := workq.NewWorkers()
	workq.AddWorker(workers, portSignupWorker{})
	workq.AddWorker(workers, mailer)
	workq.AddWorker(workers, workq.WorkFunc(func(context.Context, *workq.Job[portDigestArgs]) error {
		select {
		case digests <- struct{}{}:
		default:
		}
		return nil
	}))

	var runsMu sync.Mutex
	runs := map[string]int{}
	client, err := workq.NewClient(pool, workq.Config{
		Workers:           workers,
		Queues:            map[string]workq.QueueConfig{"default": {MaxWorkers: 4}, "mail": {MaxWorkers: 2}},
		FetchPollInterval: 50 * time.Millisecond,
		// River's Config.Middleware: one that stamps every job with its
		// tenant, one that counts handler runs by kind.
		EnqueueMiddleware: []workq.EnqueueMiddleware{func(ctx context.Context, jobs []*workq.EnqueueParams, next func(context.Context) ([]workq.Enqueued, error)) ([]workq.Enqueued, error) {
			for _, j := range jobs {
				if j.Opts.Metadata == nil {
					j.Opts.Metadata = map[string]string{}
				}
				j.Opts.Metadata["tenant"] = "acme"
			}
			return next(ctx)
		}},
		WorkMiddleware: []workq.WorkMiddleware{func(ctx context.Context, info workq.WorkInfo, next func(context.Context) error) error {
			runsMu.Lock()
			runs[info.Kind]++
			runsMu.Unlock()
			return next(ctx)
		}},
		PeriodicJobs: []*workq.PeriodicJob{workq.NewPeriodicJob("port-digest", "@every 1s", portDigestArgs{}, nil)},
	})
	if err != nil {
		t.Fatal(err)
	}

	// River's Subscribe(EventKindJobCompleted, EventKindJobFailed), made
	// before Start so that nothing is missed.
	events, unsubscribe := client.Subscribe(workq.EventCompleted, workq.EventFailed)
	defer unsubscribe()
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := client.Stop(ctx); err != nil {
			t.Error(err)
		}
	}()
	// River's PeriodicJobOpts.RunOnStart: Start has reconciled the
	// declared schedule, so it can be triggered at once.
	if _, err := client.TriggerSchedule(ctx, "port-digest", false); err != nil {
		t.Fatalf("trigger the periodic job after Start: %v", err)
	}
	// Events of different items interleave in any order: keep every one
	// and wait for the one wanted among them.
	var evMu sync.Mutex
	var all []*workq.Event
	seen := map[int64][]workq.EventKind{}
	go func() {
		for ev := range events {
			evMu.Lock()
			all = append(all, ev)
			seen[ev.Work.ID] = append(seen[ev.Work.ID], ev.Kind)
			evMu.Unlock()
		}
	}()
	waitEvent := func(what string, f func(*workq.Event) bool) *workq.Event {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			evMu.Lock()
			for _, ev := range all {
				if f(ev) {
					evMu.Unlock()
					return ev
				}
			}
			evMu.Unlock()
			if time.Now().After(deadline) {
				t.Fatalf("%s: no event in 20s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	// 1. Unknown kind: refused at enqueue, nothing written (River's
	// UnknownJobKindError).
	if _, err := client.Enqueue(ctx, portNobodyArgs{}, nil); !errors.Is(err, workq.ErrUnknownKind) || !errors.Is(err, workq.ErrInvalid) {
		t.Fatalf("unknown kind: %v", err)
	}

	// 2. InsertTx: the user and its signup job commit together; a rolled
	// back signup leaves no job.
	signup := func(email string, commit bool) workq.Enqueued {
		t.Helper()
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		var id int64
		if err := tx.QueryRow(ctx, `INSERT INTO port_users (email) VALUES ($1) RETURNING id`, email).Scan(&id); err != nil {
			t.Fatal(err)
		}
		res, err := client.EnqueueTx(ctx, tx, portSignupArgs{UserID: id}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if commit {
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return res
	}
	rolledBack := signup("ghost@example.com", false)
	if _, err := client.Get(ctx, rolledBack.Ref()); !errors.Is(err, workq.ErrNotFound) {
		t.Fatalf("job of a rolled back transaction: %v", err)
	}
	ada := signup("ada@example.com", true)
	waitEvent("signup completed", func(ev *workq.Event) bool {
		return ev.Kind == workq.EventCompleted && ev.Work.ID == ada.ID
	})
	// Its follow-up, enqueued from the handler, fails for good (broken SMTP).
	failed := waitEvent("welcome failed", func(ev *workq.Event) bool {
		return ev.Kind == workq.EventFailed && ev.Work.Kind == "port.welcome"
	})
	if failed.Work.Queue != "mail" || failed.Error == "" {
		t.Fatalf("failed event: %+v", failed)
	}
	welcome := workq.ItemRef{Table: workq.TableJobRuns, ID: failed.Work.ID, Shard: failed.Work.Shard}

	// 3. JobGet.
	it, err := client.Get(ctx, welcome)
	if err != nil {
		t.Fatal(err)
	}
	if it.Status != workq.StateFailed || it.Kind != "port.welcome" || it.Queue != "mail" || it.Attempts != 1 ||
		it.Metadata["tenant"] != "acme" || string(it.Payload) == "" {
		t.Fatalf("welcome item: %+v", it)
	}

	// 4. JobList with filters: the failed mails of tenant acme.
	page, err := client.List(ctx, workq.ListParams{Kind: "port.welcome", Queue: "mail",
		States: []string{workq.StateFailed}, Metadata: map[string]string{"tenant": "acme"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 1 || page.Items[0].ID != welcome.ID || page.Next != "" {
		t.Fatalf("failed mails: %+v next %q", page.Items, page.Next)
	}

	// 5. JobRetry: the SMTP server is fixed, the mail is retried and sent.
	mailer.broken.Store(false)
	if err := client.Retry(ctx, welcome, &workq.ActionOpts{Actor: "ops:port", Reason: "smtp fixed"}); err != nil {
		t.Fatal(err)
	}
	waitEvent("welcome retried and completed", func(ev *workq.Event) bool {
		return ev.Kind == workq.EventCompleted && ev.Work.ID == welcome.ID
	})
	if got := mailer.sentTo(); len(got) != 1 || got[0] != "ada@example.com" {
		t.Fatalf("mails sent: %v", got)
	}
	if err := client.Retry(ctx, welcome, nil); !errors.Is(err, workq.ErrWrongState) {
		t.Fatalf("retry of a done job: %v", err)
	}

	// 6. JobCancel of a scheduled job, then JobDelete of it.
	later, err := client.Enqueue(ctx, portSignupArgs{UserID: 0}, &workq.EnqueueOpts{Delay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Delete(ctx, later.Ref()); !errors.Is(err, workq.ErrWrongState) {
		t.Fatalf("delete of a scheduled job: %v", err)
	}
	if res, err := client.Cancel(ctx, later.Ref(), &workq.ActionOpts{Reason: "user left"}); err != nil || res != workq.CancelledNow {
		t.Fatalf("cancel of a scheduled job: %v %v", res, err)
	}
	if _, err := client.Cancel(ctx, later.Ref(), nil); !errors.Is(err, workq.ErrFinished) {
		t.Fatalf("second cancel: %v", err)
	}
	if it, err := client.Get(ctx, later.Ref()); err != nil || it.Status != workq.StateCancelled {
		t.Fatalf("cancelled job: %+v %v", it, err)
	}
	if err := client.Delete(ctx, later.Ref()); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Get(ctx, later.Ref()); !errors.Is(err, workq.ErrNotFound) {
		t.Fatalf("deleted job: %v", err)
	}
	if err := client.Delete(ctx, later.Ref()); !errors.Is(err, workq.ErrNotFound) {
		t.Fatalf("delete of a deleted job: %v", err)
	}

	// 7. QueuePause / QueueResume: a paused queue's jobs wait.
	mailQ := workq.QueueRef{Table: workq.TableJobRuns, Queue: "mail"}
	if changed, err := client.PauseQueue(ctx, mailQ, &workq.ActionOpts{Actor: "ops:port", Reason: "template broken"}); err != nil || !changed {
		t.Fatalf("pause: %v %v", changed, err)
	}
	queues, err := client.ListQueues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	paused := false
	for _, q := range queues {
		if q.Table == workq.TableJobRuns && q.Queue == "mail" {
			paused = q.Paused
		}
	}
	if !paused {
		t.Fatalf("ListQueues does not show mail paused: %+v", queues)
	}
	held, err := client.Enqueue(ctx, portWelcomeArgs{UserID: 99, Email: "held@example.com"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // ten poll intervals
	if it, err := client.Get(ctx, held.Ref()); err != nil || it.Status != workq.StateReady || it.Attempts != 0 {
		t.Fatalf("job of a paused queue: %+v %v", it, err)
	}
	if changed, err := client.ResumeQueue(ctx, mailQ); err != nil || !changed {
		t.Fatalf("resume: %v %v", changed, err)
	}
	waitEvent("held mail completed after resume", func(ev *workq.Event) bool {
		return ev.Kind == workq.EventCompleted && ev.Work.ID == held.ID
	})

	// 8. The periodic job runs (River's PeriodicJobs): the triggered run
	// and at least one slot's, made by the maintenance leader.
	for i := 0; i < 2; i++ {
		select {
		case <-digests:
		case <-time.After(20 * time.Second):
			t.Fatalf("the periodic digest ran %d times in 20s, want 2", i)
		}
	}
	sched, err := client.GetSchedule(ctx, "port-digest")
	if err != nil || sched.Kind != "port.digest" {
		t.Fatalf("periodic schedule: %+v %v", sched, err)
	}

	// 9. JobList with a cursor: every job of the tenant, one per page,
	// newest first, no repeats.
	var ids []int64
	p := workq.ListParams{Metadata: map[string]string{"tenant": "acme"}, Kind: "port.welcome", Limit: 1}
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("cursor does not end")
		}
		page, err := client.List(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			ids = append(ids, it.ID)
		}
		if page.Next == "" {
			break
		}
		p.Cursor = page.Next
	}
	if len(ids) != 2 || ids[0] != held.ID || ids[1] != welcome.ID {
		t.Fatalf("paged welcome ids %v, want [%d %d]", ids, held.ID, welcome.ID)
	}

	// The middleware saw every run: the signup once, the welcome twice
	// (failed, then retried), the held mail once.
	runsMu.Lock()
	signups, welcomes := runs["port.signup"], runs["port.welcome"]
	runsMu.Unlock()
	if signups != 1 || welcomes != 3 {
		t.Fatalf("middleware counted %d signups, %d welcomes", signups, welcomes)
	}
	evMu.Lock()
	if k := seen[welcome.ID]; len(k) != 2 || k[0] != workq.EventFailed || k[1] != workq.EventCompleted {
		t.Errorf("events of the welcome job: %v", k)
	}
	evMu.Unlock()
}

// A unit test of the welcome worker with workqtest (River's rivertest.Worker):
// no worker runs, the transaction is rolled back.
func TestRiverPortWelcomeWorkerUnit(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	workers := workq.NewWorkers()
	mailer := &portMailer{}
	workq.AddWorker(workers, mailer)
	client, err := workq.NewClient(pool, workq.Config{Workers: workers, Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)

	res := workqtest.Work(ctx, t, client, tx, mailer, portWelcomeArgs{UserID: 1, Email: "ada@example.com"}, nil)
	if res.Outcome != workqtest.Done || res.Err != nil || res.Status != workq.JobStateDone || res.Job.Queue != "mail" || res.Job.MaxAttempts != 2 {
		t.Fatalf("working: %+v", res)
	}
	mailer.broken.Store(true)
	res = workqtest.Work(ctx, t, client, tx, mailer, portWelcomeArgs{UserID: 2, Email: "bob@example.com"}, nil)
	if res.Outcome != workqtest.Failed || res.Err == nil || res.Status != workq.JobStateFailed {
		t.Fatalf("broken smtp: %+v", res)
	}
	// A service's producer code enqueues a welcome: assert it.
	if _, err := client.EnqueueTx(ctx, tx, portWelcomeArgs{UserID: 3, Email: "cy@example.com"}, nil); err != nil {
		t.Fatal(err)
	}
	job := workqtest.RequireEnqueued[portWelcomeArgs](ctx, t, client, tx, &workqtest.Opts{Queue: "mail", Status: workq.JobStateReady})
	if job.Args.Email != "cy@example.com" {
		t.Fatalf("enqueued: %+v", job.Args)
	}
}

// portTaggedArgs set their own metadata, as a River service's
// InsertOpts() would: one map for every job of the kind.
type portTaggedArgs struct{}

var portTaggedMetadata = map[string]string{"source": "signup-form"}

func (portTaggedArgs) Kind() string { return "port.tagged" }
func (portTaggedArgs) EnqueueOpts() workq.EnqueueOpts {
	return workq.EnqueueOpts{Metadata: portTaggedMetadata}
}

// An enqueue middleware that adds a key to a job's metadata (the obvious
// way: j.Opts.Metadata[k] = v) changes that job only: neither the caller's
// EnqueueOpts, reused for the next enqueue (and by other goroutines), nor
// the map the Args' EnqueueOpts returns for every job of its kind.
func TestRiverPortEnqueueMiddlewareLeavesCallerMetadata(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	n := 0
	client, err := workq.NewClient(pool, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true},
		EnqueueMiddleware: []workq.EnqueueMiddleware{func(ctx context.Context, jobs []*workq.EnqueueParams, next func(context.Context) ([]workq.Enqueued, error)) ([]workq.Enqueued, error) {
			for _, j := range jobs {
				n++
				j.Opts.Metadata["request"] = fmt.Sprint(n)
			}
			return next(ctx)
		}}})
	if err != nil {
		t.Fatal(err)
	}
	shared := &workq.EnqueueOpts{Metadata: map[string]string{"tenant": "acme"}}
	a, err := client.Enqueue(ctx, portSignupArgs{UserID: 1}, shared)
	if err != nil {
		t.Fatal(err)
	}
	b, err := client.EnqueueMany(ctx, []workq.EnqueueParams{{Args: portSignupArgs{UserID: 2}, Opts: shared}, {Args: portTaggedArgs{}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(shared.Metadata) != 1 || shared.Metadata["tenant"] != "acme" {
		t.Errorf("the caller's EnqueueOpts.Metadata was changed by the middleware: %v", shared.Metadata)
	}
	if len(portTaggedMetadata) != 1 {
		t.Errorf("the Args' EnqueueOpts metadata was changed by the middleware: %v", portTaggedMetadata)
	}
	for ref, want := range map[workq.ItemRef]map[string]string{
		a.Ref():    {"tenant": "acme", "request": "1"},
		b[0].Ref(): {"tenant": "acme", "request": "2"},
		b[1].Ref(): {"source": "signup-form", "request": "3"},
	} {
		it, err := client.Get(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(it.Metadata) != fmt.Sprint(want) {
			t.Errorf("%s metadata %v, want %v", ref, it.Metadata, want)
		}
	}
}
