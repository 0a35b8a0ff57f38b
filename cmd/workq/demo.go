package main

// The demo of `workq run`: all four kinds of work flowing through one
// worker, with the maintenance leader materialising a schedule and failing
// overdue joins.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/workq/workq/internal/jobq"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/config"
	"github.com/workq/workq/db/gen"
	"github.com/workq/workq/inbox"
	"github.com/workq/workq/lease"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/schedule"
	"github.com/workq/workq/timers"
	"github.com/workq/workq/worker"
)

// demoShare is how many outbox messages, inbox messages and timers the demo
// writes beside n job runs.
func demoShare(n int) int { return max(1, n/3) }

// sleepy is a demo handler that works 5-50ms.
func sleepy(ctx context.Context, _ *worker.Job) error {
	select {
	case <-time.After(time.Duration(5+rand.IntN(45)) * time.Millisecond):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// newDemoWorker returns the worker of `workq run`: the built-in job kinds
// and the configured outbox publishers (as `workq worker`), plus, with the
// demo on, the demo's job kinds and its outbox, inbox and timer handlers.
func newDemoWorker(pool *pgxpool.Pool, cfg config.Config, log *slog.Logger, demo bool, obs *observability) (*worker.Worker, func(), error) {
	pubs, err := cfg.OutboxPublishers()
	if err != nil {
		return nil, nil, err
	}
	w, closePublishers, err := newCLIWorker(pool, cfg, log, workKinds{jobs: true, outbox: len(pubs) > 0}, obs)
	if err != nil {
		return nil, nil, err
	}
	if !demo {
		return w, closePublishers, nil
	}
	if err := registerDemo(w, cfg.Queues, len(pubs) > 0); err != nil {
		closePublishers()
		return nil, nil, err
	}
	return w, closePublishers, nil
}

func registerDemo(w *worker.Worker, queues []string, outboxServed bool) error {
	flaky := func(ctx context.Context, j *worker.Job) error {
		if j.Attempt == 1 {
			return fmt.Errorf("%s fails its first attempt on purpose", j.Kind)
		}
		return nil
	}
	fail := func(ctx context.Context, j *worker.Job) error {
		return worker.Permanent(fmt.Errorf("demo.fail always fails, permanently"))
	}
	for kind, h := range map[string]worker.HandlerFunc{"demo.hello": sleepy, "demo.flaky": flaky, "demo.fail": fail} {
		if err := w.Register(kind, h); err != nil {
			return err
		}
	}
	if !outboxServed { // with publishers configured, the relay is theirs
		relay := outbox.NewRelay(outbox.RelayOptions{})
		relay.HandleDefault(sleepy)
		if err := w.AddSource(relay.Source(queues...)); err != nil {
			return err
		}
	}
	in := inbox.NewProcessor()
	if err := in.Handle("demo.payment", flaky); err != nil {
		return err
	}
	in.HandleDefault(sleepy)
	if err := w.AddSource(in.Source(queues...)); err != nil {
		return err
	}
	tp := timers.NewProcessor()
	tp.HandleDefault(sleepy)
	return w.AddSource(tp.Source(queues...))
}

// enqueueDemo writes the demo's work: n job runs, a schedule, and n/3 each
// of outbox messages (ordered by order key, five of them members of a
// fan-in join), inbox messages (every fifth received twice) and timers
// (due over the next ten seconds, one cancelled).
func enqueueDemo(ctx context.Context, pool *pgxpool.Pool, queue string, n int) error {
	c := jobq.New(jobq.Options{})
	jobs := make([]jobq.Job, 0, n)
	for i := range n {
		j := jobq.Job{Queue: queue, Kind: "demo.hello", Payload: map[string]int{"n": i}, Priority: int16(i % 3)}
		switch {
		case i%50 == 49:
			j.Kind = "demo.fail"
			j.MaxAttempts = 1
		case i%10 == 9:
			j.Kind = "demo.flaky"
		case i%7 == 6:
			j.Delay = time.Duration(1+i%5) * time.Second
		}
		jobs = append(jobs, j)
	}
	if _, err := c.EnqueueMany(ctx, pool, jobs); err != nil {
		return fmt.Errorf("demo job runs: %w", err)
	}
	_, err := schedule.NewStore(schedule.StoreOptions{}).Create(ctx, pool, schedule.Spec{
		Name: "demo.every-5s", Cron: "@every 5s", Queue: queue, Kind: "demo.hello", Overlap: schedule.OverlapSkip})
	if err != nil && !errors.Is(err, schedule.ErrExists) {
		return fmt.Errorf("demo schedule: %w", err)
	}
	m := demoShare(n)
	// The outbox messages and the join are written in one transaction: all
	// of them exist, or none.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		join, err := outbox.StartJoin(ctx, tx, outbox.JoinSpec{Expected: 5, Timeout: time.Minute,
			OnComplete: outbox.JoinMessage{Topic: "demo.order.shipped", Queue: queue, Payload: map[string]string{"order": "order-0"}}})
		if err != nil {
			return err
		}
		msgs := make([]outbox.Message, m)
		for i := range msgs {
			msgs[i] = outbox.Message{Queue: queue, Topic: "demo.order.event", Payload: map[string]int{"seq": i},
				PartitionKey: fmt.Sprintf("order-%d", i%10)}
			if i < 5 {
				msgs[i] = outbox.Message{Queue: queue, Topic: "demo.shipment", JoinID: join.ID, Payload: map[string]int{"parcel": i}}
			}
		}
		_, err = outbox.NewClient(outbox.ClientOptions{}).SendMany(ctx, tx, msgs)
		return err
	})
	if err != nil {
		return fmt.Errorf("demo outbox: %w", err)
	}
	recv := make([]inbox.Message, 0, m+m/5)
	for i := range m {
		topic := "demo.payment"
		if i%2 == 0 {
			topic = "demo.refund"
		}
		msg := inbox.Message{Queue: queue, Source: "demo-psp", MessageID: fmt.Sprintf("evt-%d", i), Topic: topic, Payload: map[string]int{"cents": 100 * i}}
		recv = append(recv, msg)
		if i%5 == 0 {
			recv = append(recv, msg) // a redelivery: recorded once
		}
	}
	if _, err := inbox.NewClient(inbox.ClientOptions{}).ReceiveMany(ctx, pool, recv); err != nil {
		return fmt.Errorf("demo inbox: %w", err)
	}
	tc := timers.NewClient(timers.ClientOptions{})
	ts := make([]timers.Timer, m)
	for i := range ts {
		ts[i] = timers.Timer{Queue: queue, Topic: "demo.reminder", Delay: time.Duration(1+i%10) * time.Second, Payload: map[string]int{"n": i}}
	}
	sched, err := tc.ScheduleMany(ctx, pool, ts)
	if err != nil {
		return fmt.Errorf("demo timers: %w", err)
	}
	if err := tc.Cancel(ctx, pool, sched[len(sched)-1].ID); err != nil {
		return fmt.Errorf("demo timer cancel: %w", err)
	}
	return nil
}

// progress prints one line a second until ctx ends.
func progress(ctx context.Context, out io.Writer, db gen.DBTX, w *worker.Worker) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	start := time.Now()
	var last int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		st, err := admin.Queues(ctx, db)
		if err != nil {
			continue
		}
		type counts struct{ ready, inProgress, done, failed int64 }
		by := map[lease.Table]*counts{}
		for _, s := range st {
			c := by[s.Table]
			if c == nil {
				c = &counts{}
				by[s.Table] = c
			}
			c.ready, c.inProgress, c.done, c.failed = c.ready+s.Ready+s.Scheduled, c.inProgress+s.InProgress, c.done+s.Done, c.failed+s.Failed
		}
		line := fmt.Sprintf("[%4.0fs]", time.Since(start).Seconds())
		for _, tbl := range lease.Tables {
			c := by[tbl]
			if c == nil {
				c = &counts{}
			}
			line += fmt.Sprintf(" %s %d/%d/%d/%d", tbl, c.ready, c.inProgress, c.done, c.failed)
		}
		ws := w.Stats()
		fmt.Fprintf(out, "%s (ready/in progress/done/failed) | this worker: done %d (+%d/s) retried %d failed %d\n",
			line, ws.Done, ws.Done-last, ws.Retried, ws.Failed)
		last = ws.Done
	}
}
