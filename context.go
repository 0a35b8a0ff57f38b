package workq

import (
	"context"
	"errors"
)

// clientKey is the context key of the Client that runs a handler.
type clientKey struct{}

// withClient returns ctx carrying c, for ClientFromContext.
func withClient(ctx context.Context, c *Client) context.Context {
	return context.WithValue(ctx, clientKey{}, c)
}

// ErrNoClient is the error of ClientFromContextSafely given a context
// that no Client made: one that is not a handler's.
var ErrNoClient = errors.New("workq: no Client in the context: ClientFromContext works in the handlers a Client runs")

// ClientFromContext returns the Client that runs the handler whose
// context ctx is (River's ClientFromContext): in every handler of a
// Client (job workers, outbox, inbox and timer handlers, and their work
// middleware), and in a handler run by workqtest.Work. Use it to enqueue
// follow-up work, on the pool or, with EnqueueTx, in the handler's own
// transaction beside job.CompleteTx. On a sharded Client it is the
// sharded Client (open a transaction on client.Shard(job.Shard)).
//
// It panics when ctx carries no Client, which never happens in a
// handler's context; ClientFromContextSafely returns ErrNoClient instead.
func ClientFromContext(ctx context.Context) *Client {
	c, err := ClientFromContextSafely(ctx)
	if err != nil {
		panic(err)
	}
	return c
}

// ClientFromContextSafely is ClientFromContext returning ErrNoClient
// when ctx carries no Client.
func ClientFromContextSafely(ctx context.Context) (*Client, error) {
	if ctx == nil {
		return nil, ErrNoClient
	}
	if c, ok := ctx.Value(clientKey{}).(*Client); ok && c != nil {
		return c, nil
	}
	return nil, ErrNoClient
}
