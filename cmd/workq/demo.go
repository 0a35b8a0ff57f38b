package main

// The demo of `workq run`: all four kinds of work flowing through one
// worker, with the maintenance leader materialising a schedule and failing
// overdue joins.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq"
	"github.com/workq/workq/inbox"
	"github.com/workq/workq/internal/config"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/timers"
)

// demoShare is how many outbox messages, inbox messages and timers the demo
// writes beside n job runs.
func demoShare(n int) int { return max(1, n/3) }

// sleepy is a demo handler that works 5-50ms.
func sleepy(ctx context.Context) error {
	select {
	case <-time.After(time.Duration(5+rand.IntN(45)) * time.Millisecond):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// demoWorkers returns the handlers of `workq run`: the built-in job kinds
// and the configured outbox publishers (as `workq worker`), plus, with the
// demo on, the demo's job kinds and its outbox, inbox and timer handlers.
// The returned function closes the publishers' connections.
func demoWorkers(cfg config.Config, log *slog.Logger, demo bool) (*workq.Workers, func(), error) {
	pubs, err := cfg.OutboxPublishers()
	if err != nil {
		return nil, nil, err
	}
	ws, closePublishers, err := cliWorkers(cfg, log, workKinds{jobs: true, outbox: len(pubs) > 0})
	if err != nil {
		return nil, nil, err
	}
	if !demo {
		return ws, closePublishers, nil
	}
	if err := addDemo(ws, len(pubs) > 0); err != nil {
		closePublishers()
		return nil, nil, err
	}
	return ws, closePublishers, nil
}

// demoMessage is the demo's outbox, inbox and timer payload, as it is.
type demoMessage = workq.Message[json.RawMessage]

// The demo's job kinds: any payload (their args have no fields).
type (
	demoHello struct{}
	demoFlaky struct{}
	demoFail  struct{}
)

func (demoHello) Kind() string { return "demo.hello" }
func (demoFlaky) Kind() string { return "demo.flaky" }
func (demoFail) Kind() string  { return "demo.fail" }

func addDemo(ws *workq.Workers, outboxServed bool) error {
	err := errors.Join(
		workq.AddWorkerSafely(ws, workq.WorkFunc(func(ctx context.Context, _ *workq.Job[demoHello]) error { return sleepy(ctx) })),
		workq.AddWorkerSafely(ws, workq.WorkFunc(func(ctx context.Context, j *workq.Job[demoFlaky]) error {
			if j.Attempt == 1 {
				return fmt.Errorf("%s fails its first attempt on purpose", j.Kind)
			}
			return nil
		})),
		workq.AddWorkerSafely(ws, workq.WorkFunc(func(ctx context.Context, j *workq.Job[demoFail]) error {
			return workq.Permanent(fmt.Errorf("demo.fail always fails, permanently"))
		})))
	if err != nil {
		return err
	}
	sleepyMessage := func(ctx context.Context, _ *demoMessage) error { return sleepy(ctx) }
	if !outboxServed { // with publishers configured, the relay is theirs
		if err := workq.HandleOutbox(ws, "", sleepyMessage); err != nil {
			return err
		}
	}
	err = workq.HandleInbox(ws, "demo.payment", func(ctx context.Context, m *demoMessage) error {
		if m.Attempt == 1 {
			return fmt.Errorf("%s fails its first attempt on purpose", m.Topic)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := workq.HandleInbox(ws, "", sleepyMessage); err != nil {
		return err
	}
	return workq.HandleTimer(ws, "", sleepyMessage)
}

// enqueueDemo writes the demo's work through client: n job runs, a
// schedule, and n/3 each of outbox messages (ordered by order key, five of
// them members of a fan-in join), inbox messages (every fifth received
// twice) and timers (due over the next ten seconds, one cancelled).
func enqueueDemo(ctx context.Context, client *workq.Client, queue string, n int) error {
	jobs := make([]workq.EnqueueParams, 0, n)
	for i := range n {
		args := workq.RawArgs{KindName: "demo.hello", Payload: map[string]int{"n": i}}
		opts := &workq.EnqueueOpts{Queue: queue, Priority: int16(i % 3)}
		switch {
		case i%50 == 49:
			args.KindName = "demo.fail"
			opts.MaxAttempts = 1
		case i%10 == 9:
			args.KindName = "demo.flaky"
		case i%7 == 6:
			opts.Delay = time.Duration(1+i%5) * time.Second
		}
		jobs = append(jobs, workq.EnqueueParams{Args: args, Opts: opts})
	}
	if _, err := client.EnqueueMany(ctx, jobs); err != nil {
		return fmt.Errorf("demo job runs: %w", err)
	}
	_, err := client.CreateSchedule(ctx, workq.ScheduleSpec{
		Name: "demo.every-5s", Cron: "@every 5s", Queue: queue, Kind: "demo.hello", Overlap: workq.OverlapSkip})
	if err != nil && !errors.Is(err, workq.ErrScheduleExists) {
		return fmt.Errorf("demo schedule: %w", err)
	}
	m := demoShare(n)
	// The outbox messages and the join are written in one transaction: all
	// of them exist, or none.
	err = pgx.BeginFunc(ctx, client.Pool(), func(tx pgx.Tx) error {
		join, err := client.StartJoinTx(ctx, tx, outbox.JoinSpec{Expected: 5, Timeout: time.Minute,
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
		_, err = client.SendManyTx(ctx, tx, msgs)
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
	if _, err := client.ReceiveMany(ctx, recv); err != nil {
		return fmt.Errorf("demo inbox: %w", err)
	}
	ts := make([]timers.Timer, m)
	for i := range ts {
		ts[i] = timers.Timer{Queue: queue, Topic: "demo.reminder", Delay: time.Duration(1+i%10) * time.Second, Payload: map[string]int{"n": i}}
	}
	sched, err := client.ScheduleTimers(ctx, ts)
	if err != nil {
		return fmt.Errorf("demo timers: %w", err)
	}
	if err := client.CancelTimer(ctx, sched[len(sched)-1].ID); err != nil {
		return fmt.Errorf("demo timer cancel: %w", err)
	}
	return nil
}

// progress prints one line a second until ctx ends: every table's counts,
// and client's.
func progress(ctx context.Context, out io.Writer, client *workq.Client) {
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
		st, err := client.ListQueues(ctx)
		if err != nil {
			continue
		}
		type counts struct{ ready, inProgress, done, failed int64 }
		by := map[workq.Table]*counts{}
		for _, s := range st {
			c := by[s.Table]
			if c == nil {
				c = &counts{}
				by[s.Table] = c
			}
			c.ready, c.inProgress, c.done, c.failed = c.ready+s.Ready+s.Scheduled, c.inProgress+s.InProgress, c.done+s.Done, c.failed+s.Failed
		}
		line := fmt.Sprintf("[%4.0fs]", time.Since(start).Seconds())
		for _, tbl := range workq.Tables() {
			c := by[tbl]
			if c == nil {
				c = &counts{}
			}
			line += fmt.Sprintf(" %s %d/%d/%d/%d", tbl, c.ready, c.inProgress, c.done, c.failed)
		}
		ws := client.Stats()
		fmt.Fprintf(out, "%s (ready/in progress/done/failed) | this worker: done %d (+%d/s) retried %d failed %d\n",
			line, ws.Done, ws.Done-last, ws.Retried, ws.Failed)
		last = ws.Done
	}
}
