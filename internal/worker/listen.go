package worker

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/workqtype"
)

// listen holds one connection with LISTEN on the channel of every table the
// worker serves and wakes the producer of the (table, queue) each
// notification names. When the connection fails it wakes every producer
// once, in case a notification was missed, and reconnects with backoff
// (listenRetryBase doubling to listenRetryCap, full jitter); polling covers
// the gap. Once it listens again it wakes every producer: that also ends a
// claim loop's backoff after a database restart at once.
//
// It also listens on the cancel channel (lease.CancelChannel), whose
// payload "<table>:<id>" names a running item whose cancel was requested:
// the producer holding it cancels its handler. One sent before the
// listener listened (or while it was down) is caught by the heartbeat the
// producers beat when it does (lease.Engine.Beat).
func (w *Worker) listen(ctx context.Context, producers []*producer) {
	routes := map[string]map[string]*producer{} // channel -> queue -> producer
	byTable := map[string][]*producer{}         // table -> its producers, for cancel requests
	for _, p := range producers {
		ch := workqtype.NotifyChannel(w.rw.Schema(), string(p.src.Table))
		if routes[ch] == nil {
			routes[ch] = map[string]*producer{}
		}
		routes[ch][p.queue] = p
		byTable[string(p.src.Table)] = append(byTable[string(p.src.Table)], p)
	}
	cancelCh := workqtype.NotifyChannel(w.rw.Schema(), lease.CancelChannel)
	routes[cancelCh] = nil
	onCancel := func(payload string) {
		table, id, ok := parseCancel(payload)
		if !ok {
			return
		}
		for _, p := range byTable[table] {
			p.cancelRequested(id)
		}
	}
	for attempt := int32(0); ctx.Err() == nil; attempt++ {
		listened, err := w.listenOnce(ctx, routes, cancelCh, onCancel, producers, attempt > 0)
		if ctx.Err() != nil {
			return
		}
		switch {
		case listened:
			attempt = 0 // a fresh loss after a good connection backs off from the start
			if !w.outage.Failed(err, "loop", "listener") {
				w.log.Warn("listener lost its connection; polling until it is back", "err", err)
			}
			for _, p := range producers {
				p.notify()
			}
		case w.outage.Failed(err, "loop", "listener"):
		case attempt == 0:
			w.log.Warn("listener cannot connect; polling until it can", "err", err)
		default:
			w.log.Debug("listener still cannot connect", "attempt", attempt+1, "err", err)
		}
		if !sleepCtx(ctx, Backoff(min(attempt, 8), listenRetryBase, listenRetryCap)+time.Millisecond) {
			return
		}
	}
}

// The listener's reconnect backoff. Small: a failed connection attempt
// costs little, there is one listener per worker, and its reconnect is what
// ends the claim loops' backoff after a restart.
const (
	listenRetryBase = 25 * time.Millisecond
	listenRetryCap  = 500 * time.Millisecond
)

// listenOnce listens until the connection fails; listened reports whether it
// got as far as LISTEN. again says a connection was lost or failed before.
// Notifications on cancelCh go to onCancel.
func (w *Worker) listenOnce(ctx context.Context, routes map[string]map[string]*producer, cancelCh string, onCancel func(string),
	producers []*producer, again bool) (listened bool, err error) {
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
	if again {
		if w.outage.Down() {
			w.log.Debug("listener connected again")
		} else {
			w.log.Info("listener connected again")
		}
	}
	w.outage.OK()
	for _, p := range producers {
		p.notify()
		poke(p.listened)
	}
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		if n.Channel == cancelCh {
			onCancel(n.Payload)
			continue
		}
		if p, ok := routes[n.Channel][n.Payload]; ok {
			p.notify()
		}
	}
}

// parseCancel reads a cancel notification's payload, "<table>:<id>".
func parseCancel(payload string) (table string, id int64, ok bool) {
	table, num, ok := strings.Cut(payload, ":")
	if !ok {
		return "", 0, false
	}
	id, err := strconv.ParseInt(num, 10, 64)
	return table, id, err == nil && id > 0
}
