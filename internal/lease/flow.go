package lease

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/db/gen"
)

// Flow control (migration 00024, docs/concepts.md "Flow control"): a queue
// with rate limits, concurrency limits per kind or per key, fair claims
// over keys, paused kinds or a throttle has a row in flow_queues. The fast
// claim statements take nothing from such a queue (workq_claim_budget
// returns 0 for it); its claims run in a transaction that first locks
// that row and decides what may start (workq_flow_pick, or for the outbox,
// whose claim keeps its own order, workq_flow_grant), then claims it.

// flowCheckEvery is how often a claim loop whose claims come back empty
// asks whether its queue went under flow control.
const flowCheckEvery = 250 * time.Millisecond

// FlowCursor is what one queue's claim loop keeps between claims for flow
// control: whether the queue is under it, where the fair walk over limit
// keys stands, and whether the last claim was cut short by a limit. The
// zero value is ready; a claim without one (ClaimParams.Flow nil) asks
// the database after every empty claim.
type FlowCursor struct {
	on       bool
	checked  time.Time
	afterKey string
	limited  bool
	wait     time.Duration
}

// Limited reports whether the last claim took fewer items than it asked
// for because a limit, a throttle or a paused kind held them back (not
// because nothing was ready), and Wait how long until the queue's own
// rate or throttle lets it start again (0: unknown; claim again soon).
func (c *FlowCursor) Limited() bool { return c != nil && c.limited }

// Wait is how long the queue's own rate or throttle holds its claims back
// after a limited claim (0: not known).
func (c *FlowCursor) Wait() time.Duration {
	if c == nil {
		return 0
	}
	return c.wait
}

// On reports whether the queue was under flow control at the last claim.
func (c *FlowCursor) On() bool { return c != nil && c.on }

// claimQueue claims on the fast path, or on the flow path while the queue
// is under flow control (found when a fast claim comes back empty).
func (e *Engine) claimQueue(ctx context.Context, a claimArgs, cur *FlowCursor) ([]Item, error) {
	if cur == nil {
		cur = &FlowCursor{}
	}
	cur.limited, cur.wait = false, 0
	if cur.on {
		items, on, err := e.flowClaim(ctx, a, cur)
		if err != nil || on {
			return items, err
		}
		cur.on = false
	}
	items, err := e.def.claim(ctx, e.q, a)
	if err != nil || len(items) > 0 {
		return items, err
	}
	if !cur.checked.IsZero() && time.Since(cur.checked) < flowCheckEvery {
		return nil, nil
	}
	cur.checked = time.Now()
	on, err := e.q.FlowIsOn(ctx, string(e.table), a.queue)
	if err != nil || !on {
		return nil, err
	}
	items, on, err = e.flowClaim(ctx, a, cur)
	cur.on = on
	return items, err
}

// beginner is a database handle that can begin a transaction.
type beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// flowClaim runs one flow claim; on is false when the queue is not under
// flow control (nothing was claimed).
func (e *Engine) flowClaim(ctx context.Context, a claimArgs, cur *FlowCursor) (items []Item, on bool, err error) {
	b, ok := e.db.(beginner)
	if !ok {
		return nil, true, fmt.Errorf("queue %q is under flow control, whose claim is a transaction: %T cannot begin one", a.queue, e.db)
	}
	tx, err := b.Begin(ctx)
	if err != nil {
		return nil, true, err
	}
	defer func() {
		if err != nil || !on {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	q := gen.New(onTable{db: tx, def: e.def})
	if e.def.claimIDs == nil {
		granted, err := q.FlowGrant(ctx, gen.FlowGrantParams{WorkTable: string(e.table), Queue: a.queue, MaxRows: a.max})
		if err != nil || granted < 0 {
			return nil, false, err
		}
		if granted > 0 {
			a.grant = &granted
			if items, err = e.def.claim(ctx, q, a); err != nil {
				return nil, true, err
			}
			if len(items) > 0 {
				if _, err = q.FlowStarted(ctx, gen.FlowStartedParams{WorkTable: string(e.table), Queue: a.queue, N: int32(len(items))}); err != nil {
					return nil, true, err
				}
			}
		}
		if cur.limited = granted < a.max; cur.limited {
			ms, err := q.FlowWaitMs(ctx, string(e.table), a.queue)
			if err != nil {
				return nil, true, err
			}
			cur.wait = time.Duration(max(ms, 0)) * time.Millisecond
		}
	} else {
		raw, err := q.FlowPick(ctx, gen.FlowPickParams{WorkTable: string(e.table), Queue: a.queue, MaxRows: a.max, AfterKey: cur.afterKey})
		if err != nil || raw == nil {
			return nil, false, err
		}
		var pick struct {
			Off     bool      `json:"off"`
			IDs     []int64   `json:"ids"`
			After   string    `json:"after"`
			Limited bool      `json:"limited"`
			At      time.Time `json:"at"`
			WaitMs  *int64    `json:"wait_ms"`
		}
		if err := json.Unmarshal(raw, &pick); err != nil {
			return nil, true, fmt.Errorf("read flow pick: %w", err)
		}
		if pick.Off {
			// The queue left flow control (a throttle's adaptation ended):
			// commit that, and claim on the fast path.
			if err := tx.Commit(ctx); err != nil {
				return nil, true, err
			}
			return nil, false, nil
		}
		cur.afterKey, cur.limited = pick.After, pick.Limited
		if pick.WaitMs != nil && *pick.WaitMs > 0 {
			cur.wait = time.Duration(*pick.WaitMs) * time.Millisecond
		}
		if len(pick.IDs) > 0 {
			a.at = pick.At
			if items, err = e.def.claimIDs(ctx, q, a, pick.IDs); err != nil {
				return nil, true, err
			}
		}
	}
	if err = tx.Commit(ctx); err != nil {
		return nil, true, err
	}
	return items, true, nil
}
