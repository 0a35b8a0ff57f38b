package workq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq"
	"github.com/workq/workq/inbox"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/timers"
	"github.com/workq/workq/workqtype"
)

// InputArgs is the job of the input tests.
type InputArgs struct{}

func (InputArgs) Kind() string { return "input.test" }

// Issue 28, item 4: a run-at or due time PostgreSQL cannot store (year
// 300000, 4714 BC), or one outside the years 1 to 9999 that RFC 3339 and
// JSON can write, is refused with ErrInvalid naming the field, by every
// kind's enqueue (one and batch), and writes nothing; it used to reach
// the database as "timestamp out of range (SQLSTATE 22008)", or be stored.
func TestClientRefusesOutOfRangeTimes(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	ctx := context.Background()
	client, err := workq.NewClient(pool, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	bad := []time.Time{
		time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-4713, 11, 24, 0, 0, 0, 0, time.UTC), // 4714 BC
		time.Date(0, 6, 1, 0, 0, 0, 0, time.UTC),       // 1 BC: PostgreSQL takes it, JSON cannot write it
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 0, 0, 0, time.FixedZone("-10:00", -10*3600)), // year 10000 in UTC
		workqtype.MinTime.Add(-time.Nanosecond),
		workqtype.MaxTime.Add(time.Nanosecond),
	}
	calls := []struct {
		name  string
		field string
		call  func(at time.Time) error
	}{
		{"Enqueue", "run_at", func(at time.Time) error {
			_, err := client.Enqueue(ctx, InputArgs{}, &workq.EnqueueOpts{RunAt: at})
			return err
		}},
		{"EnqueueManyFast", "run_at", func(at time.Time) error {
			_, err := client.EnqueueManyFast(ctx, []workq.EnqueueParams{{Args: InputArgs{}, Opts: &workq.EnqueueOpts{RunAt: at}}})
			return err
		}},
		{"Send", "run_at", func(at time.Time) error {
			_, err := client.Send(ctx, outbox.Message{Topic: "t", RunAt: at})
			return err
		}},
		{"SendMany", "run_at", func(at time.Time) error {
			_, err := client.SendMany(ctx, []outbox.Message{{Topic: "t"}, {Topic: "t", RunAt: at}})
			return err
		}},
		{"ScheduleTimer", "due_time", func(at time.Time) error {
			_, err := client.ScheduleTimer(ctx, timers.Timer{Topic: "t", DueTime: at})
			return err
		}},
		{"ScheduleTimers", "due_time", func(at time.Time) error {
			_, err := client.ScheduleTimers(ctx, []timers.Timer{{Topic: "t", Delay: time.Second}, {Topic: "t", DueTime: at}})
			return err
		}},
	}
	for _, c := range calls {
		for _, at := range bad {
			t.Run(fmt.Sprintf("%s/%s", c.name, at.Format(time.RFC3339Nano)), func(t *testing.T) {
				err := c.call(at)
				if !errors.Is(err, workq.ErrInvalid) || workqtype.FieldOf(err) != c.field {
					t.Errorf("error %v (field %q), want ErrInvalid naming %s", err, workqtype.FieldOf(err), c.field)
				}
			})
		}
	}
	for _, table := range []string{"job_runs", "outbox", "timers"} {
		if n := countIn(t, pool, table, "true"); n != 0 {
			t.Errorf("%d rows in %s after refused requests, want none", n, table)
		}
	}
	// The bounds are accepted and stored as given (to the microsecond;
	// MinTime itself is the zero time.Time, which means unset).
	edges := []time.Time{workqtype.MinTime.Add(time.Microsecond), workqtype.MaxTime.Truncate(time.Microsecond)}
	for _, at := range edges {
		for _, c := range calls {
			if err := c.call(at); err != nil {
				t.Errorf("%s at %s: %v, want it accepted", c.name, at.Format(time.RFC3339Nano), err)
			}
		}
	}
	if n := countIn(t, pool, "job_runs", "run_at = any($1)", edges); n != 4 {
		t.Errorf("%d jobs stored at the bounds, want 4", n)
	}
}

// Issue 28, item 4: a nil context or a nil transaction given to a Client
// method is refused with ErrInvalid naming it ("ctx", "tx"), and writes
// nothing; EnqueueTx(ctx, nil, ...), SendTx(ctx, nil, ...) and a nil
// context used to panic inside pgx.
func TestClientRefusesNilContextAndTransaction(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	client, err := workq.NewClient(pool, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	var nilCtx context.Context //nolint:staticcheck // the point of the test
	ctx := context.Background()
	job := []workq.EnqueueParams{{Args: InputArgs{}}}
	msg := outbox.Message{Topic: "t"}
	in := inbox.Message{Source: "s", MessageID: "m"}
	timer := timers.Timer{Topic: "t", Delay: time.Second}
	type call = func(ctx context.Context, tx pgx.Tx) error
	e := func(_ any, err error) error { return err }
	calls := map[string]call{
		"Enqueue":           func(ctx context.Context, _ pgx.Tx) error { return e(client.Enqueue(ctx, InputArgs{}, nil)) },
		"EnqueueTx":         func(ctx context.Context, tx pgx.Tx) error { return e(client.EnqueueTx(ctx, tx, InputArgs{}, nil)) },
		"EnqueueMany":       func(ctx context.Context, _ pgx.Tx) error { return e(client.EnqueueMany(ctx, job)) },
		"EnqueueManyTx":     func(ctx context.Context, tx pgx.Tx) error { return e(client.EnqueueManyTx(ctx, tx, job)) },
		"EnqueueManyFast":   func(ctx context.Context, _ pgx.Tx) error { return e(client.EnqueueManyFast(ctx, job)) },
		"EnqueueManyFastTx": func(ctx context.Context, tx pgx.Tx) error { return e(client.EnqueueManyFastTx(ctx, tx, job)) },
		"Send":              func(ctx context.Context, _ pgx.Tx) error { return e(client.Send(ctx, msg)) },
		"SendTx":            func(ctx context.Context, tx pgx.Tx) error { return e(client.SendTx(ctx, tx, msg)) },
		"SendMany":          func(ctx context.Context, _ pgx.Tx) error { return e(client.SendMany(ctx, []outbox.Message{msg})) },
		"SendManyTx": func(ctx context.Context, tx pgx.Tx) error {
			return e(client.SendManyTx(ctx, tx, []outbox.Message{msg}))
		},
		"Receive":     func(ctx context.Context, _ pgx.Tx) error { return e(client.Receive(ctx, in)) },
		"ReceiveTx":   func(ctx context.Context, tx pgx.Tx) error { return e(client.ReceiveTx(ctx, tx, in)) },
		"ReceiveMany": func(ctx context.Context, _ pgx.Tx) error { return e(client.ReceiveMany(ctx, []inbox.Message{in})) },
		"ReceiveManyTx": func(ctx context.Context, tx pgx.Tx) error {
			return e(client.ReceiveManyTx(ctx, tx, []inbox.Message{in}))
		},
		"ScheduleTimer":   func(ctx context.Context, _ pgx.Tx) error { return e(client.ScheduleTimer(ctx, timer)) },
		"ScheduleTimerTx": func(ctx context.Context, tx pgx.Tx) error { return e(client.ScheduleTimerTx(ctx, tx, timer)) },
		"ScheduleTimers": func(ctx context.Context, _ pgx.Tx) error {
			return e(client.ScheduleTimers(ctx, []timers.Timer{timer}))
		},
		"ScheduleTimersTx": func(ctx context.Context, tx pgx.Tx) error {
			return e(client.ScheduleTimersTx(ctx, tx, []timers.Timer{timer}))
		},
		"CancelTimer":   func(ctx context.Context, _ pgx.Tx) error { return client.CancelTimer(ctx, 1) },
		"CancelTimerTx": func(ctx context.Context, tx pgx.Tx) error { return client.CancelTimerTx(ctx, tx, 1) },
		"Cancel":        func(ctx context.Context, _ pgx.Tx) error { return e(client.Cancel(ctx, workq.JobRef(1), nil)) },
		"CancelTx":      func(ctx context.Context, tx pgx.Tx) error { return e(client.CancelTx(ctx, tx, workq.JobRef(1), nil)) },
		"CreateSchedule": func(ctx context.Context, _ pgx.Tx) error {
			return e(client.CreateSchedule(ctx, workq.ScheduleSpec{Name: "s", Kind: "k", Cron: "@hourly"}))
		},
		"GetSchedule":     func(ctx context.Context, _ pgx.Tx) error { return e(client.GetSchedule(ctx, "s")) },
		"ListSchedules":   func(ctx context.Context, _ pgx.Tx) error { return e(client.ListSchedules(ctx)) },
		"DeleteSchedule":  func(ctx context.Context, _ pgx.Tx) error { return client.DeleteSchedule(ctx, "s") },
		"EnableSchedule":  func(ctx context.Context, _ pgx.Tx) error { return e(client.EnableSchedule(ctx, "s")) },
		"DisableSchedule": func(ctx context.Context, _ pgx.Tx) error { return e(client.DisableSchedule(ctx, "s")) },
		"UpdateSchedule": func(ctx context.Context, _ pgx.Tx) error {
			return e(client.UpdateSchedule(ctx, "s", workq.ScheduleChanges{}))
		},
		"TriggerSchedule": func(ctx context.Context, _ pgx.Tx) error { return e(client.TriggerSchedule(ctx, "s", false)) },
		"Start":           func(ctx context.Context, _ pgx.Tx) error { return client.Start(ctx) },
		"Stop":            func(ctx context.Context, _ pgx.Tx) error { return client.Stop(ctx) },
		"Run":             func(ctx context.Context, _ pgx.Tx) error { return client.Run(ctx) },
	}
	for name, c := range calls {
		t.Run(name+"/nil context", func(t *testing.T) {
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			if err := c(nilCtx, tx); !errors.Is(err, workq.ErrInvalid) || workqtype.FieldOf(err) != "ctx" {
				t.Errorf("error %v (field %q), want ErrInvalid naming ctx", err, workqtype.FieldOf(err))
			}
		})
		if !strings.HasSuffix(name, "Tx") {
			continue
		}
		t.Run(name+"/nil transaction", func(t *testing.T) {
			if err := c(ctx, nil); !errors.Is(err, workq.ErrInvalid) || workqtype.FieldOf(err) != "tx" {
				t.Errorf("error %v (field %q), want ErrInvalid naming tx", err, workqtype.FieldOf(err))
			}
		})
	}
	for _, table := range []string{"job_runs", "outbox", "inbox", "timers", "schedules"} {
		if n := countIn(t, pool, table, "true"); n != 0 {
			t.Errorf("%d rows in %s after refused requests, want none", n, table)
		}
	}
}
