package workq

import (
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/ha"
)

// ConfigurePool sets what workq needs of a pool for failover without loss
// (docs/operations.md, "High availability"; design §26). Call it on the
// config from pgxpool.ParseConfig, before pgxpool.NewWithConfig; every
// `workq` command's pool is configured this way. It:
//
//   - pins synchronous_commit=on for every session (SET once per new
//     connection, in AfterConnect, after any AfterConnect already set),
//     unless the URL or RuntimeParams already ask for on or remote_apply:
//     a role's or database's default (ALTER ROLE ... SET
//     synchronous_commit = off) cannot then weaken it, and an
//     acknowledged enqueue or completion is on the synchronous standby.
//     Not a startup parameter, which PgBouncer refuses; behind PgBouncer
//     in transaction mode the SET reaches only the server connection it
//     ran on, so set synchronous_commit on the role PgBouncer connects as;
//   - closes a connection whose statement failed with SQLSTATE 25006
//     (read_only_sql_transaction: the node is, or became, a standby), so
//     the pool never hands it out again, as well as (pgx's default) one
//     that got a FATAL error;
//   - with several hosts in the URL and no target_session_attrs (or
//     target_session_attrs=any, which pgx does not tell apart), connects
//     only to the one that accepts writes (target_session_attrs=read-write;
//     another value, such as primary, is kept);
//   - bounds a connection's life to 30 minutes (plus up to 5 of jitter)
//     and its idle time to 5 minutes (shortening, never lengthening, what
//     the URL set), and a connection attempt to one host to 10 s when the
//     URL sets no connect_timeout;
//   - dials with TCP keepalives (30 s idle, then 3 probes 10 s apart), so
//     a connection to a vanished host fails in about a minute. It replaces
//     ConnConfig.DialFunc: set your own after calling it if you need one.
//
// A Client cannot change a pool it is given: its Start logs a warning when
// the pool's sessions do not run with synchronous_commit on or
// remote_apply.
func ConfigurePool(cfg *pgxpool.Config) { ha.ConfigurePool(cfg) }
