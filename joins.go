package workq

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/outboxrt"
	"github.com/workq/workq/outbox"
)

// StartJoin creates an open fan-in join on the pool: it waits for
// s.Expected member messages (outbox messages sent with the join's ID as
// their JoinID) and, when all have ended, writes its outcome message
// (docs/outbox_joins.md). Start it in the members' transaction with
// StartJoinTx. An invalid spec returns an error wrapping ErrInvalid and
// writes nothing. A join and its members live on one database: on a
// sharded Client start it on a shard (client.Shard(name).StartJoin).
func (c *Client) StartJoin(ctx context.Context, s outbox.JoinSpec) (_ outbox.Join, err error) {
	defer c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return outbox.Join{}, err
	}
	if c.set != nil {
		return outbox.Join{}, c.errShardTx("StartJoin")
	}
	return outboxrt.StartJoin(ctx, c.db, s)
}

// StartJoinTx is StartJoin in the caller's transaction: the join exists if
// and only if tx commits.
func (c *Client) StartJoinTx(ctx context.Context, tx pgx.Tx, s outbox.JoinSpec) (_ outbox.Join, err error) {
	defer c.notMigrated(&err)
	if err := checkTx(ctx, tx); err != nil {
		return outbox.Join{}, err
	}
	if c.set != nil {
		return outbox.Join{}, c.errShardTx("StartJoinTx")
	}
	return outboxrt.StartJoin(ctx, c.in(tx), s)
}

// GetJoin reads a join's state: its status, counts, deadline, timestamps
// and outcome message id. An unknown id returns an error wrapping
// outbox.ErrJoinNotFound (and ErrNotFound).
func (c *Client) GetJoin(ctx context.Context, id int64) (_ outbox.Join, err error) {
	defer c.notMigrated(&err)
	if err := checkCtx(ctx); err != nil {
		return outbox.Join{}, err
	}
	if c.set != nil {
		return outbox.Join{}, c.errShardID("GetJoin")
	}
	return outboxrt.GetJoin(ctx, c.db, id)
}
