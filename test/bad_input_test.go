package test

// Issue 11 scenario 6 through the Go API: every public write path rejects
// bad input with an error wrapping its package's ErrInvalid, and nothing
// stored changes (a digest of every table before and after). The HTTP API's
// cases are in package api, the fuzz tests beside each client.

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/workq/workq/internal/inboxrt"
	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/outboxrt"
	"github.com/workq/workq/internal/timersrt"

	"github.com/workq/workq/inbox"
	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/schedule"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/timers"
	"github.com/workq/workq/workqtype"
)

func TestBadInputGoAPI(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	// One item in each table, for the actions that take ids.
	job, err := jobq.New(jobq.Options{}).Enqueue(ctx, pool, jobq.Job{Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	jobs := jobq.New(jobq.Options{MaxPayloadBytes: 1024})
	ob := outboxrt.NewClient(outboxrt.ClientOptions{MaxPayloadBytes: 1024})
	in := inboxrt.NewClient(inboxrt.ClientOptions{MaxPayloadBytes: 1024})
	tm := timersrt.NewClient(timersrt.ClientOptions{MaxPayloadBytes: 1024})
	store := schedule.NewStore(schedule.StoreOptions{})
	big := json.RawMessage(`{"a":"` + strings.Repeat("x", 2000) + `"}`)
	long := strings.Repeat("q", 300)
	const sqlMeta = `x'); delete from job_runs; --`
	who := admin.Actor{Name: "test"}

	cases := []struct {
		name string
		call func() error
	}{
		// jobq.Client
		{"job: empty kind", func() error { _, err := jobs.Enqueue(ctx, pool, jobq.Job{}); return err }},
		{"job: invalid JSON", func() error {
			_, err := jobs.Enqueue(ctx, pool, jobq.Job{Kind: "k", Payload: json.RawMessage(`{"a":`)})
			return err
		}},
		{"job: payload over the limit", func() error { _, err := jobs.Enqueue(ctx, pool, jobq.Job{Kind: "k", Payload: big}); return err }},
		{"job: payload not an object", func() error {
			_, err := jobs.Enqueue(ctx, pool, jobq.Job{Kind: "k", Payload: json.RawMessage(`[1]`)})
			return err
		}},
		{"job: over-long queue", func() error { _, err := jobs.Enqueue(ctx, pool, jobq.Job{Kind: "k", Queue: long}); return err }},
		{"job: SQL in the queue", func() error { _, err := jobs.Enqueue(ctx, pool, jobq.Job{Kind: "k", Queue: sqlMeta}); return err }},
		{"job: NUL in the kind", func() error { _, err := jobs.Enqueue(ctx, pool, jobq.Job{Kind: "k\x00"}); return err }},
		{"job: invalid UTF-8 dedup key", func() error {
			_, err := jobs.Enqueue(ctx, pool, jobq.Job{Kind: "k", DedupKey: "\xff"})
			return err
		}},
		{"job: negative delay", func() error { _, err := jobs.Enqueue(ctx, pool, jobq.Job{Kind: "k", Delay: -time.Second}); return err }},
		{"job: negative max attempts", func() error { _, err := jobs.Enqueue(ctx, pool, jobq.Job{Kind: "k", MaxAttempts: -1}); return err }},
		{"job batch: one bad job writes none", func() error {
			_, err := jobs.EnqueueMany(ctx, pool, []jobq.Job{{Kind: "k"}, {Kind: ""}})
			return err
		}},
		// outbox
		{"outbox: empty topic", func() error { _, err := ob.Send(ctx, pool, outbox.Message{}); return err }},
		{"outbox: control character in the topic", func() error { _, err := ob.Send(ctx, pool, outbox.Message{Topic: "t\x01"}); return err }},
		{"outbox: payload over the limit", func() error { _, err := ob.Send(ctx, pool, outbox.Message{Topic: "t", Payload: big}); return err }},
		{"outbox: header name with a space", func() error {
			_, err := ob.Send(ctx, pool, outbox.Message{Topic: "t", Headers: map[string]string{"a b": "v"}})
			return err
		}},
		{"outbox: invalid UTF-8 header value", func() error {
			_, err := ob.Send(ctx, pool, outbox.Message{Topic: "t", Headers: map[string]string{"A": "\xff"}})
			return err
		}},
		{"outbox: NUL in the correlation id", func() error {
			_, err := ob.Send(ctx, pool, outbox.Message{Topic: "t", CorrelationID: "c\x00"})
			return err
		}},
		{"outbox: over-long partition key", func() error {
			_, err := ob.Send(ctx, pool, outbox.Message{Topic: "t", PartitionKey: strings.Repeat("k", 300)})
			return err
		}},
		{"outbox: SQL in the queue", func() error { _, err := ob.Send(ctx, pool, outbox.Message{Topic: "t", Queue: sqlMeta}); return err }},
		{"outbox: negative delay", func() error {
			_, err := ob.Send(ctx, pool, outbox.Message{Topic: "t", Delay: -time.Second})
			return err
		}},
		// inbox
		{"inbox: empty source", func() error { _, err := in.Receive(ctx, pool, inbox.Message{MessageID: "m"}); return err }},
		{"inbox: empty message id", func() error { _, err := in.Receive(ctx, pool, inbox.Message{Source: "s"}); return err }},
		{"inbox: invalid UTF-8 source", func() error {
			_, err := in.Receive(ctx, pool, inbox.Message{Source: "\xff", MessageID: "m"})
			return err
		}},
		{"inbox: NUL in the message id", func() error {
			_, err := in.Receive(ctx, pool, inbox.Message{Source: "s", MessageID: "m\x00"})
			return err
		}},
		{"inbox: invalid JSON", func() error {
			_, err := in.Receive(ctx, pool, inbox.Message{Source: "s", MessageID: "m", Payload: json.RawMessage(`nope`)})
			return err
		}},
		{"inbox: SQL in the queue", func() error {
			_, err := in.Receive(ctx, pool, inbox.Message{Source: "s", MessageID: "m", Queue: sqlMeta})
			return err
		}},
		// timers
		{"timer: neither due time nor delay", func() error { _, err := tm.Schedule(ctx, pool, timers.Timer{Topic: "t"}); return err }},
		{"timer: negative delay", func() error {
			_, err := tm.Schedule(ctx, pool, timers.Timer{Topic: "t", Delay: -time.Second})
			return err
		}},
		{"timer: both due time and delay", func() error {
			_, err := tm.Schedule(ctx, pool, timers.Timer{Topic: "t", Delay: time.Second, DueTime: time.Now()})
			return err
		}},
		{"timer: empty topic", func() error { _, err := tm.Schedule(ctx, pool, timers.Timer{Delay: time.Second}); return err }},
		{"timer: payload over the limit", func() error {
			_, err := tm.Schedule(ctx, pool, timers.Timer{Topic: "t", Delay: time.Second, Payload: big})
			return err
		}},
		// schedule.Store
		{"schedule: empty name", func() error {
			_, err := store.Create(ctx, pool, schedule.Spec{Cron: "* * * * *", Kind: "k"})
			return err
		}},
		{"schedule: SQL in the name", func() error {
			_, err := store.Create(ctx, pool, schedule.Spec{Name: sqlMeta, Cron: "* * * * *", Kind: "k"})
			return err
		}},
		{"schedule: bad cron", func() error {
			_, err := store.Create(ctx, pool, schedule.Spec{Name: "n", Cron: "61 * * * *", Kind: "k"})
			return err
		}},
		{"schedule: unknown time zone", func() error {
			_, err := store.Create(ctx, pool, schedule.Spec{Name: "n", Cron: "* * * * *", Kind: "k", Timezone: "Mars/Olympus"})
			return err
		}},
		{"schedule: unknown overlap policy", func() error {
			_, err := store.Create(ctx, pool, schedule.Spec{Name: "n", Cron: "* * * * *", Kind: "k", Overlap: "sometimes"})
			return err
		}},
		{"schedule: negative misfire cap", func() error {
			_, err := store.Create(ctx, pool, schedule.Spec{Name: "n", Cron: "* * * * *", Kind: "k", MisfireCap: -1})
			return err
		}},
		// lease: pause and limits
		{"pause: unknown table", func() error { _, err := lease.Pause(ctx, pool, "jobs", "default", "me", ""); return err }},
		{"pause: SQL in the queue", func() error { _, err := lease.Pause(ctx, pool, lease.JobRuns, sqlMeta, "me", ""); return err }},
		{"pause: empty actor", func() error { _, err := lease.Pause(ctx, pool, lease.JobRuns, "default", " ", ""); return err }},
		{"pause: NUL in the actor", func() error { _, err := lease.Pause(ctx, pool, lease.JobRuns, "default", "me\x00", ""); return err }},
		{"pause: invalid UTF-8 reason", func() error { _, err := lease.Pause(ctx, pool, lease.JobRuns, "default", "me", "\xff"); return err }},
		{"pause: over-long reason", func() error {
			_, err := lease.Pause(ctx, pool, lease.JobRuns, "default", "me", strings.Repeat("r", 2000))
			return err
		}},
		{"limit: over the maximum", func() error { return lease.SetLimit(ctx, pool, lease.JobRuns, "default", lease.MaxLimit+1) }},
		{"limit: empty queue", func() error { return lease.SetLimit(ctx, pool, lease.JobRuns, "", 1) }},
		// admin
		{"admin retry: no ids", func() error { _, err := admin.Retry(ctx, pool, lease.JobRuns, who); return err }},
		{"admin retry: negative id", func() error { _, err := admin.Retry(ctx, pool, lease.JobRuns, who, -1); return err }},
		{"admin cancel: empty actor", func() error { _, err := admin.Cancel(ctx, pool, lease.JobRuns, admin.Actor{}, job.ID); return err }},
		{"admin cancel: NUL in the actor", func() error {
			_, err := admin.Cancel(ctx, pool, lease.JobRuns, admin.Actor{Name: "me\x00"}, job.ID)
			return err
		}},
		{"admin cancel: invalid UTF-8 reason", func() error {
			_, err := admin.Cancel(ctx, pool, lease.JobRuns, admin.Actor{Name: "me", Reason: "\xff"}, job.ID)
			return err
		}},
		{"admin delete: id twice", func() error { _, err := admin.Delete(ctx, pool, lease.JobRuns, job.ID, job.ID); return err }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := testdb.Snapshot(t, pool)
			err := c.call()
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, workqtype.ErrInvalid) && !errors.Is(err, lease.ErrInvalid) {
				t.Errorf("error %q does not wrap ErrInvalid (workq or lease)", err)
			}
			if strings.TrimSpace(err.Error()) == "" {
				t.Errorf("empty error message")
			}
			if after := testdb.Snapshot(t, pool); after != before {
				t.Errorf("rejected (%v), but the database changed", err)
			}
		})
	}
}
