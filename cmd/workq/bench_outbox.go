package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/config"
	"github.com/workq/workq/outbox"
)

// burnDownOutbox is `workq bench --table outbox`: insert n outbox messages
// (unkeyed, or spread round-robin over keys partition keys), then relay
// them all with a no-op handler, counting committed completions.
func (b *bench) burnDownOutbox(ctx context.Context, cfg config.Config, n, keys int) (benchResult, error) {
	for _, sql := range []string{
		"delete from workq.outbox where queue = '" + benchQueue + "'",
		"delete from workq.runs where work_table = 'outbox' and queue = '" + benchQueue + "'",
	} {
		if _, err := b.db.Exec(ctx, sql); err != nil {
			return benchResult{}, fmt.Errorf("bench reset: %w", err)
		}
	}
	start := time.Now()
	for i := 0; i < n; i += 5000 {
		msgs := make([]outbox.Message, min(5000, n-i))
		for j := range msgs {
			msgs[j] = outbox.Message{Queue: benchQueue, Topic: "noop"}
			if keys > 0 {
				msgs[j].PartitionKey = fmt.Sprintf("key-%06d", (i+j)%keys)
			}
		}
		if _, err := b.client.SendMany(ctx, msgs); err != nil {
			return benchResult{}, err
		}
	}
	insertRate := float64(n) / time.Since(start).Seconds()
	fmt.Fprintf(b.out, "inserted %d outbox messages (%.0f/s); relaying them\n", n, insertRate)
	if _, err := b.db.Exec(ctx, "vacuum analyze workq.outbox"); err != nil {
		return benchResult{}, err
	}
	b.lat.reset()
	ws := workq.NewWorkers()
	err := workq.HandleOutbox(ws, "", func(_ context.Context, m *workq.Message[json.RawMessage]) error {
		b.record(m.RunAt)
		return nil
	})
	if err != nil {
		return benchResult{}, err
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	start = time.Now()
	errc, err := b.run(wctx, cfg, ws)
	if err != nil {
		return benchResult{}, err
	}
	if err := b.waitDone(ctx, int64(n), errc); err != nil {
		return benchResult{}, err
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
	res := b.result(mode, b.done(), elapsed)
	res.InsertPerS = insertRate
	return res, nil
}
