package main

import (
	"context"
	"fmt"
	"time"

	"github.com/workq/workq/config"
	"github.com/workq/workq/lease"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/worker"
)

// burnDownOutbox is `workq bench --table outbox`: insert n outbox messages
// (unkeyed, or spread round-robin over keys partition keys), then relay
// them all with a no-op handler, counting committed completions.
func (b *bench) burnDownOutbox(ctx context.Context, cfg config.Config, n, keys int) (benchResult, error) {
	for _, sql := range []string{
		"delete from workq.outbox where queue = '" + benchQueue + "'",
		"delete from workq.runs where work_table = 'outbox' and queue = '" + benchQueue + "'",
	} {
		if _, err := b.pool.Exec(ctx, sql); err != nil {
			return benchResult{}, fmt.Errorf("bench reset: %w", err)
		}
	}
	client := outbox.NewClient(outbox.ClientOptions{})
	start := time.Now()
	for i := 0; i < n; i += 5000 {
		msgs := make([]outbox.Message, min(5000, n-i))
		for j := range msgs {
			msgs[j] = outbox.Message{Queue: benchQueue, Topic: "noop"}
			if keys > 0 {
				msgs[j].PartitionKey = fmt.Sprintf("key-%06d", (i+j)%keys)
			}
		}
		if _, err := client.SendMany(ctx, b.pool, msgs); err != nil {
			return benchResult{}, err
		}
	}
	insertRate := float64(n) / time.Since(start).Seconds()
	fmt.Fprintf(b.out, "inserted %d outbox messages (%.0f/s); relaying them\n", n, insertRate)
	if _, err := b.pool.Exec(ctx, "vacuum analyze workq.outbox"); err != nil {
		return benchResult{}, err
	}
	b.lat = make([]time.Duration, 0, n)
	relay := outbox.NewRelay(outbox.RelayOptions{})
	relay.HandleDefault(func(ctx context.Context, j *worker.Job) error {
		l := time.Since(j.RunAt)
		b.latMu.Lock()
		b.lat = append(b.lat, l)
		b.latMu.Unlock()
		if b.handlerTime > 0 {
			time.Sleep(b.handlerTime)
		}
		return nil
	})
	w, err := worker.New(b.pool, cfg, worker.Options{OnResult: func(r worker.Result) {
		if r.Applied && r.Status == lease.StatusDone {
			b.done.Add(1)
		}
	}})
	if err != nil {
		return benchResult{}, err
	}
	if err := w.AddSource(relay.Source(benchQueue)); err != nil {
		return benchResult{}, err
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	start = time.Now()
	errc := make(chan error, 1)
	go func() { errc <- w.Run(wctx) }()
	for b.done.Load() < int64(n) {
		if ctx.Err() != nil {
			return benchResult{}, ctx.Err()
		}
		time.Sleep(2 * time.Millisecond)
	}
	elapsed := time.Since(start)
	stop()
	if err := <-errc; err != nil {
		return benchResult{}, err
	}
	mode := "outbox burn-down"
	if keys > 0 {
		mode = fmt.Sprintf("outbox ordered burn-down (%d keys)", keys)
	}
	res := b.result(mode, b.done.Load(), elapsed, w)
	res.InsertPerS = insertRate
	return res, nil
}
