package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
)

// ackCounter counts acknowledgements across consumers and closes done once
// n have been counted.
type ackCounter struct {
	n     int64
	acked atomic.Int64
	done  chan struct{}
	once  sync.Once
}

func newAckCounter(n int) *ackCounter { return &ackCounter{n: int64(n), done: make(chan struct{})} }

func (c *ackCounter) add(k int) {
	if c.acked.Add(int64(k)) >= c.n {
		c.once.Do(func() { close(c.done) })
	}
}

func (c *ackCounter) finished() bool { return c.acked.Load() >= c.n }

// runConsumers runs consumer(ctx, k) for k in 0..consumers-1 until all
// return. The first error cancels the others, and so does the counter
// reaching its end (a consumer blocked in a read returns at once; its
// context error is then not an error).
func runConsumers(ctx context.Context, c *ackCounter, consumers int, consumer func(ctx context.Context, k int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-c.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	g, gctx := errgroup.WithContext(ctx)
	for k := range consumers {
		g.Go(func() error {
			err := consumer(gctx, k)
			if err != nil && c.finished() && gctx.Err() != nil {
				return nil
			}
			return err
		})
	}
	return g.Wait()
}

// waitEmpty returns once remaining reports an empty queue: the server has
// applied every acknowledgement. It gives up after 30 s.
func waitEmpty(ctx context.Context, remaining func(context.Context) (int64, error)) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		left, err := remaining(ctx)
		if err != nil || left == 0 {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d messages still in the queue after every ack: %w", left, ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
}
