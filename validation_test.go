package workq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/workq/workq/inbox"
	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/inboxrt"
	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/lock"
	"github.com/workq/workq/internal/maintain"
	"github.com/workq/workq/internal/outboxrt"
	"github.com/workq/workq/internal/schedule"
	"github.com/workq/workq/internal/timersrt"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/publish"
	"github.com/workq/workq/timers"
	"github.com/workq/workq/workqtype"
)

// TestOneValidationError: every package's error for bad input matches the
// one workqtype.ErrInvalid, and the ingest and admin checks return a
// *workqtype.ValidationError naming the field (the API's JSON name). None
// of these touch a database (nil db: validation comes first).
func TestOneValidationError(t *testing.T) {
	ctx := context.Background()
	jobs := jobq.New(jobq.Options{})
	msgs := outboxrt.NewClient(outboxrt.ClientOptions{})
	in := inboxrt.NewClient(inboxrt.ClientOptions{})
	tm := timersrt.NewClient(timersrt.ClientOptions{})
	store := schedule.NewStore(schedule.StoreOptions{})
	okSpec := schedule.Spec{Name: "s", Kind: "k", Cron: "@hourly"}
	with := func(f func(*schedule.Spec)) schedule.Spec { sp := okSpec; f(&sp); return sp }
	cases := []struct {
		name  string
		err   error
		field string // "-": only errors.Is is required
	}{
		{"jobq queue", jobs.Validate(jobq.Job{Queue: "bad queue", Kind: "k"}), "queue"},
		{"jobq kind", jobs.Validate(jobq.Job{Kind: "no spaces"}), "kind"},
		{"jobq payload", jobs.Validate(jobq.Job{Kind: "k", Payload: []int{1}}), "payload"},
		{"jobq payload too large", jobq.New(jobq.Options{MaxPayloadBytes: 10}).Validate(jobq.Job{Kind: "k", Payload: map[string]string{"a": "0123456789"}}), "payload"},
		{"jobq dedup", jobs.Validate(jobq.Job{Kind: "k", DedupKey: "nul\x00"}), "dedup_key"},
		{"jobq delay", jobs.Validate(jobq.Job{Kind: "k", Delay: -time.Second}), "delay"},
		{"jobq run at and delay", jobs.Validate(jobq.Job{Kind: "k", Delay: time.Second, RunAt: time.Now()}), "run_at"},
		{"jobq max attempts", jobs.Validate(jobq.Job{Kind: "k", MaxAttempts: 5000}), "max_attempts"},
		{"outbox queue", msgs.Validate(outbox.Message{Queue: "bad queue", Topic: "t"}), "queue"},
		{"outbox topic", msgs.Validate(outbox.Message{Topic: " t"}), "topic"},
		{"outbox headers", msgs.Validate(outbox.Message{Topic: "t", Headers: map[string]string{"bad name": "v"}}), "headers"},
		{"outbox max attempts", msgs.Validate(outbox.Message{Topic: "t", MaxAttempts: -1}), "max_attempts"},
		{"outbox join", outboxrt.ValidateJoin(outbox.JoinSpec{Expected: 1, OnComplete: outbox.JoinMessage{}}), "on_complete.topic"},
		{"inbox source", in.Validate(inbox.Message{MessageID: "m"}), "source"},
		{"inbox message id", in.Validate(inbox.Message{Source: "s"}), "message_id"},
		{"inbox topic", in.Validate(inbox.Message{Source: "s", MessageID: "m", Topic: "new\nline"}), "topic"},
		{"inbox payload", in.Validate(inbox.Message{Source: "s", MessageID: "m", Payload: "a string"}), "payload"},
		{"timers topic", tm.Validate(timers.Timer{Delay: time.Second}), "topic"},
		{"timers due", tm.Validate(timers.Timer{Topic: "t"}), "due_time"},
		{"timers delay", tm.Validate(timers.Timer{Topic: "t", Delay: -time.Second}), "delay"},
		{"schedule name", store.Validate(with(func(s *schedule.Spec) { s.Name = "" })), "name"},
		{"schedule cron", store.Validate(with(func(s *schedule.Spec) { s.Cron = "nonsense" })), "cron"},
		{"schedule timezone", store.Validate(with(func(s *schedule.Spec) { s.Timezone = "Mars/Base" })), "timezone"},
		{"schedule overlap", store.Validate(with(func(s *schedule.Spec) { s.Overlap = "maybe" })), "overlap"},
		{"schedule max attempts", store.Validate(with(func(s *schedule.Spec) { s.MaxAttempts = 1001 })), "max_attempts"},
		{"lease pause queue", second(lease.Pause(ctx, nil, lease.JobRuns, "bad queue", "op", "")), "queue"},
		{"lease pause table", second(lease.Pause(ctx, nil, "nope", "q", "op", "")), "table"},
		{"lease pause by", second(lease.Pause(ctx, nil, lease.JobRuns, "q", "", "")), "by"},
		{"lease limit", lease.CheckLimit(lease.JobRuns, "q", lease.MaxLimit+1), "limit"},
		{"lock name", second(lock.TryAcquire(ctx, nil, "bad name", lock.Options{})), "name"},
		{"maintain task", maintain.New(nil, maintain.Options{}).Add(maintain.Task{Name: "t", Every: time.Nanosecond}), "every"},
		{"publish", second(publish.NewWebhook(publish.WebhookConfig{})), "-"},
		{"admin filter queue", admin.Filter{Queue: "bad queue"}.Validate(), "queue"},
		{"admin filter status", admin.Filter{Status: "sleeping"}.Validate(), "status"},
		{"admin filter limit", admin.Filter{Limit: -1}.Validate(), "limit"},
		{"admin list table", second(admin.List(ctx, nil, "nope", admin.Filter{})), "table"},
		{"admin ids", admin.CheckIDs(nil), "ids"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !errors.Is(c.err, workqtype.ErrInvalid) {
				t.Fatalf("error %v does not match workqtype.ErrInvalid", c.err)
			}
			if c.field == "-" {
				return
			}
			var v *workqtype.ValidationError
			if !errors.As(c.err, &v) {
				t.Fatalf("error %v (%T) is no *workqtype.ValidationError", c.err, c.err)
			}
			if v.Field != c.field {
				t.Errorf("error %v: field %q, want %q", c.err, v.Field, c.field)
			}
		})
	}
}

func second[T any](_ T, err error) error { return err }
