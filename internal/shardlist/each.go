package shardlist

import (
	"context"
	"sync"
	"time"
)

// Answer is one shard's answer to Each: what f returned on it.
type Answer[T any] struct {
	Shard string
	Value T
	Err   error
}

// Each is the scatter-gather of every operation on several shards: it
// runs f on every shard at once, each bounded by timeout (0: only ctx
// bounds it), waits for all of them, and returns each shard's answer in
// the shards' order. List reads its pages through it; the Client's
// operator methods (lookups, pauses, queue counts) use it too.
func Each[T any](ctx context.Context, shards []Shard, timeout time.Duration, f func(ctx context.Context, sh Shard) (T, error)) []Answer[T] {
	out := make([]Answer[T], len(shards))
	var wg sync.WaitGroup
	for i, sh := range shards {
		out[i].Shard = sh.Name
		wg.Add(1)
		go func() {
			defer wg.Done()
			sctx, cancel := ctx, context.CancelFunc(func() {})
			if timeout > 0 {
				sctx, cancel = context.WithTimeout(ctx, timeout)
			}
			defer cancel()
			out[i].Value, out[i].Err = f(sctx, sh)
		}()
	}
	wg.Wait()
	return out
}
