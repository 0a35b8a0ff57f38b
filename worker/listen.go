package worker

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq"
)

// listen holds one connection with LISTEN on the channel of every table the
// worker serves and wakes the producer of the (table, queue) each
// notification names. On any error it reconnects with backoff and wakes
// every producer, in case a notification was missed meanwhile; polling
// covers the gap.
func (w *Worker) listen(ctx context.Context, producers []*producer) {
	routes := map[string]map[string]*producer{} // channel -> queue -> producer
	for _, p := range producers {
		ch := workq.NotifyChannel(string(p.src.Table))
		if routes[ch] == nil {
			routes[ch] = map[string]*producer{}
		}
		routes[ch][p.queue] = p
	}
	for attempt := int32(0); ctx.Err() == nil; attempt++ {
		listened, err := w.listenOnce(ctx, routes, producers)
		if ctx.Err() != nil {
			return
		}
		if listened {
			attempt = 0 // a fresh loss after a good connection backs off from the start
		}
		w.log.Warn("listener lost its connection; polling until it is back", "err", err)
		for _, p := range producers {
			p.notify()
		}
		if !sleepCtx(ctx, Backoff(min(attempt, 6), 100*time.Millisecond, 5*time.Second)+50*time.Millisecond) {
			return
		}
	}
}

// listenOnce listens until the connection fails; listened reports whether it
// got as far as LISTEN.
func (w *Worker) listenOnce(ctx context.Context, routes map[string]map[string]*producer, producers []*producer) (listened bool, err error) {
	conn, err := w.pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	// A connection that has LISTENed must not go back to the pool.
	defer func() {
		_ = conn.Conn().Close(context.Background())
		conn.Release()
	}()
	for ch := range routes {
		if _, err := conn.Exec(ctx, "listen "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return false, err
		}
	}
	for _, p := range producers {
		p.notify()
	}
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		if p, ok := routes[n.Channel][n.Payload]; ok {
			p.notify()
		}
	}
}
