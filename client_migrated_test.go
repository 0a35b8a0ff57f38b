package workq_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq"
	"github.com/workq/workq/inbox"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/timers"
)

// On a schema that was never migrated (missing, or there but empty), every
// enqueue, send, receive, timer and schedule call fails with
// ErrNotMigrated and the very message Start gives, which says to run
// `workq migrate up`: not `relation "...job_runs" does not exist`.
func TestUnmigratedSchemaSaysToMigrate(t *testing.T) {
	ctx := context.Background()
	pool := testdb.Pool(t)
	if _, err := pool.Exec(ctx, `create schema wq_empty`); err != nil {
		t.Fatal(err)
	}
	inTx := func(fn func(tx pgx.Tx) error) error {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx) //nolint:errcheck
		return fn(tx)
	}
	job := workq.RawArgs{KindName: "k"}
	msg := outbox.Message{Topic: "t"}
	in := inbox.Message{Source: "s", MessageID: "m"}
	timer := timers.Timer{Topic: "t", Delay: time.Minute}
	ops := map[string]func(c *workq.Client) error{
		"Enqueue": func(c *workq.Client) error { _, err := c.Enqueue(ctx, job, nil); return err },
		"EnqueueTx": func(c *workq.Client) error {
			return inTx(func(tx pgx.Tx) error { _, err := c.EnqueueTx(ctx, tx, job, nil); return err })
		},
		"EnqueueMany": func(c *workq.Client) error {
			_, err := c.EnqueueMany(ctx, []workq.EnqueueParams{{Args: job}})
			return err
		},
		"EnqueueManyFast": func(c *workq.Client) error {
			_, err := c.EnqueueManyFast(ctx, []workq.EnqueueParams{{Args: job}})
			return err
		},
		"Send":     func(c *workq.Client) error { _, err := c.Send(ctx, msg); return err },
		"SendMany": func(c *workq.Client) error { _, err := c.SendMany(ctx, []outbox.Message{msg}); return err },
		"SendTx": func(c *workq.Client) error {
			return inTx(func(tx pgx.Tx) error { _, err := c.SendTx(ctx, tx, msg); return err })
		},
		"Receive":        func(c *workq.Client) error { _, err := c.Receive(ctx, in); return err },
		"ReceiveMany":    func(c *workq.Client) error { _, err := c.ReceiveMany(ctx, []inbox.Message{in}); return err },
		"ScheduleTimer":  func(c *workq.Client) error { _, err := c.ScheduleTimer(ctx, timer); return err },
		"ScheduleTimers": func(c *workq.Client) error { _, err := c.ScheduleTimers(ctx, []timers.Timer{timer}); return err },
		"CancelTimer":    func(c *workq.Client) error { return c.CancelTimer(ctx, 1) },
		"Cancel":         func(c *workq.Client) error { _, err := c.Cancel(ctx, workq.JobRef(1), nil); return err },
		"CreateSchedule": func(c *workq.Client) error {
			_, err := c.CreateSchedule(ctx, workq.ScheduleSpec{Name: "n", Cron: "0 3 * * *", Kind: "k"})
			return err
		},
		"GetSchedule":     func(c *workq.Client) error { _, err := c.GetSchedule(ctx, "n"); return err },
		"ListSchedules":   func(c *workq.Client) error { _, err := c.ListSchedules(ctx); return err },
		"DeleteSchedule":  func(c *workq.Client) error { return c.DeleteSchedule(ctx, "n") },
		"TriggerSchedule": func(c *workq.Client) error { _, err := c.TriggerSchedule(ctx, "n", false); return err },
	}
	for _, schema := range []string{"wq_missing", "wq_empty"} {
		t.Run(schema, func(t *testing.T) {
			c, err := workq.NewClient(pool, workq.Config{Schema: schema, Maintenance: workq.MaintenanceConfig{Disabled: true}})
			if err != nil {
				t.Fatal(err)
			}
			start := c.Start(ctx)
			if !errors.Is(start, workq.ErrNotMigrated) || !errors.Is(start, workq.ErrSchemaBehind) {
				t.Fatalf("Start: %v, want ErrNotMigrated and ErrSchemaBehind", start)
			}
			want := "workq: schema \"" + schema + "\" is not migrated: run `workq migrate up --schema " + schema +
				"` (or Up of package migrate with Options{Schema: \"" + schema + "\"})"
			if start.Error() != want {
				t.Fatalf("Start: %q\nwant %q", start, want)
			}
			for name, op := range ops {
				err := op(c)
				if !errors.Is(err, workq.ErrNotMigrated) || err.Error() != want {
					t.Errorf("%s: %v; want ErrNotMigrated, saying %q", name, err, want)
				}
			}
		})
	}
	// A sharded Client says which shard, with the same message.
	t.Run("sharded", func(t *testing.T) {
		schema := "wq_missing"
		c, err := workq.NewShardedClient([]workq.Shard{{Name: "a", Pool: pool}, {Name: "b", Pool: testdb.Pool(t)}},
			workq.Config{Schema: schema, Maintenance: workq.MaintenanceConfig{Disabled: true}})
		if err != nil {
			t.Fatal(err)
		}
		want := "workq: schema \"" + schema + "\" is not migrated: run `workq migrate up --schema " + schema +
			"` (or Up of package migrate with Options{Schema: \"" + schema + "\"})"
		start := c.Start(ctx)
		if !errors.Is(start, workq.ErrNotMigrated) || !strings.HasPrefix(start.Error(), "shard a: "+want) {
			t.Fatalf("Start: %v, want ErrNotMigrated saying shard a: %s", start, want)
		}
		notSharded := map[string]bool{"EnqueueTx": true, "SendTx": true, "Cancel": true, "CancelTimer": true}
		for name, op := range ops {
			if notSharded[name] {
				continue
			}
			err := op(c)
			if !errors.Is(err, workq.ErrNotMigrated) || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %v; want ErrNotMigrated, saying %q", name, err, want)
			}
		}
	})
	// A schema that is migrated: no ErrNotMigrated (the operations work, or
	// fail for their own reasons).
	c, err := workq.NewClient(pool, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	for name, op := range ops {
		if err := op(c); errors.Is(err, workq.ErrNotMigrated) {
			t.Errorf("%s on the migrated schema: %v", name, err)
		}
	}
}
