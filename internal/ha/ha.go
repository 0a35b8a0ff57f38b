// Package ha holds what workq does for high availability (issue 22, design
// §26): the pool settings that keep a session's commits synchronous and
// its connections off a demoted primary (ConfigurePool, exported as
// workq.ConfigurePool), the checks of the session's synchronous_commit
// and of the server's synchronous standbys (`workq doctor`, the
// maintenance task "replication", the Client's start), and the fencing
// epoch carried in the high bits of lease versions and lock tokens.
package ha

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Pool settings ConfigurePool applies.
const (
	// MaxConnLifetime is the longest a pooled connection lives (pgxpool's
	// default is 1h): a connection to a node that was demoted without the
	// connection breaking is replaced within it.
	MaxConnLifetime = 30 * time.Minute
	// MaxConnLifetimeJitter spreads the replacements of connections opened
	// together.
	MaxConnLifetimeJitter = 5 * time.Minute
	// MaxConnIdleTime closes idle connections sooner than pgxpool's 30m.
	MaxConnIdleTime = 5 * time.Minute
	// ConnectTimeout bounds one connection attempt to one host when the
	// URL sets none (connect_timeout): with several hosts, a dead first
	// host must not hold up the others for the kernel's TCP timeout.
	ConnectTimeout = 10 * time.Second
	// KeepAliveIdle, KeepAliveInterval and KeepAliveCount are the TCP
	// keepalives of every connection: a peer that vanished (a failed-over
	// primary's host, a network partition) is detected in about
	// KeepAliveIdle + KeepAliveCount*KeepAliveInterval = 60 s, where the
	// kernel defaults take over two hours.
	KeepAliveIdle     = 30 * time.Second
	KeepAliveInterval = 10 * time.Second
	KeepAliveCount    = 3
)

// ReadOnlySQLTransaction is SQLSTATE 25006, read_only_sql_transaction: the
// answer of a standby ("cannot execute ... in a read-only transaction",
// "cannot execute LISTEN during recovery") and of a demoted primary.
const ReadOnlySQLTransaction = "25006"

// safeSyncCommit are the synchronous_commit values under which a commit
// is acknowledged only once a synchronous standby has flushed (on) or
// applied (remote_apply) it.
var safeSyncCommit = map[string]bool{"on": true, "remote_apply": true}

// SyncCommitSafe reports whether a session's synchronous_commit value
// waits for synchronous standbys to flush the commit: on or remote_apply.
func SyncCommitSafe(v string) bool { return safeSyncCommit[strings.ToLower(strings.TrimSpace(v))] }

// ConfigurePool is workq.ConfigurePool; see its documentation.
func ConfigurePool(cfg *pgxpool.Config) {
	cc := cfg.ConnConfig
	// Not a startup parameter (RuntimeParams), which would save the round
	// trip: PgBouncer refuses a connection whose startup packet carries a
	// parameter it does not know ("unsupported startup parameter"), in
	// every pool mode. One SET per new connection costs a round trip every
	// MaxConnLifetime or so. A URL that asks for a safe value keeps it.
	if v, ok := cc.RuntimeParams["synchronous_commit"]; !ok || !SyncCommitSafe(v) {
		delete(cc.RuntimeParams, "synchronous_commit")
		prevAfter := cfg.AfterConnect
		cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
			if prevAfter != nil {
				if err := prevAfter(ctx, c); err != nil {
					return err
				}
			}
			if _, err := c.Exec(ctx, "set synchronous_commit = on"); err != nil {
				return fmt.Errorf("workq: set synchronous_commit = on: %w", err)
			}
			return nil
		}
	}
	prev := cc.OnPgError
	cc.OnPgError = func(c *pgconn.PgConn, e *pgconn.PgError) bool {
		if prev != nil && !prev(c, e) {
			return false
		}
		// pgconn's default: a FATAL error ends the connection.
		return !strings.EqualFold(e.Severity, "FATAL") && e.Code != ReadOnlySQLTransaction
	}
	if severalHosts(&cc.Config) && cc.ValidateConnect == nil {
		cc.ValidateConnect = pgconn.ValidateConnectTargetSessionAttrsReadWrite
	}
	if cc.ConnectTimeout == 0 {
		cc.ConnectTimeout = ConnectTimeout
	}
	d := &net.Dialer{KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: KeepAliveIdle, Interval: KeepAliveInterval, Count: KeepAliveCount}}
	cc.DialFunc = d.DialContext
	if cfg.MaxConnLifetime == 0 || cfg.MaxConnLifetime > MaxConnLifetime {
		cfg.MaxConnLifetime = MaxConnLifetime
	}
	if cfg.MaxConnLifetimeJitter == 0 {
		cfg.MaxConnLifetimeJitter = MaxConnLifetimeJitter
	}
	if cfg.MaxConnIdleTime == 0 || cfg.MaxConnIdleTime > MaxConnIdleTime {
		cfg.MaxConnIdleTime = MaxConnIdleTime
	}
}

// severalHosts reports whether the config lists more than one host (its
// fallbacks also hold the TLS and plain variants of one host, for
// sslmode=prefer).
func severalHosts(cc *pgconn.Config) bool {
	for _, fb := range cc.Fallbacks {
		if fb.Host != cc.Host || fb.Port != cc.Port {
			return true
		}
	}
	return false
}

// Querier runs one query; a pool, connection or transaction.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// SessionSyncCommit reads the session's synchronous_commit.
func SessionSyncCommit(ctx context.Context, q Querier) (string, error) {
	var v string
	if err := q.QueryRow(ctx, `select current_setting('synchronous_commit')`).Scan(&v); err != nil {
		return "", fmt.Errorf("read synchronous_commit: %w", err)
	}
	return v, nil
}

// Replication is what the server says of its standbys.
type Replication struct {
	// InRecovery: the server is itself a standby (workq cannot write there).
	InRecovery bool `json:"in_recovery"`
	// Standbys counts the connected WAL senders to standbys
	// (pg_stat_replication); Synchronous those whose sync_state is sync or
	// quorum; Unknown those whose sync_state this role may not see (it
	// needs pg_monitor, pg_read_all_stats or superuser).
	Standbys    int `json:"standbys"`
	Synchronous int `json:"synchronous"`
	Unknown     int `json:"unknown"`
	// SynchronousStandbyNames is the server's synchronous_standby_names.
	SynchronousStandbyNames string `json:"synchronous_standby_names"`
}

// State classifies a Replication.
type State string

const (
	// NoStandbys: nothing streams from the server; a failover has no
	// standby to promote (a managed service's hidden replication is not
	// seen here either).
	NoStandbys State = "no-standbys"
	// Synchronous: at least one standby is synchronous.
	Synchronous State = "synchronous"
	// Unsafe: standbys stream from the server and none is synchronous: a
	// failover to one of them may lose acknowledged commits.
	Unsafe State = "unsafe"
	// Unknown: standbys stream, but this role may not see whether any is
	// synchronous (grant it pg_monitor).
	Unknown State = "unknown"
)

// State says whether the standbys protect acknowledged commits.
func (r Replication) State() State {
	switch {
	case r.Standbys == 0:
		return NoStandbys
	case r.Synchronous > 0:
		return Synchronous
	case strings.TrimSpace(r.SynchronousStandbyNames) == "":
		// Without synchronous_standby_names no standby is synchronous,
		// whatever this role may see of them.
		return Unsafe
	case r.Unknown > 0:
		return Unknown
	default:
		return Unsafe
	}
}

// replicationSQL reads the standbys. Without pg_monitor (or
// pg_read_all_stats, or superuser) pg_stat_replication shows every row but
// only the pid: sync_state is null, counted as unknown.
const replicationSQL = `select pg_is_in_recovery(),
       (select count(*) from pg_stat_replication)::int,
       (select count(*) from pg_stat_replication where sync_state in ('sync', 'quorum'))::int,
       (select count(*) from pg_stat_replication where sync_state is null)::int,
       current_setting('synchronous_standby_names')`

// CheckReplication reads what the server says of its standbys.
func CheckReplication(ctx context.Context, q Querier) (Replication, error) {
	var r Replication
	err := q.QueryRow(ctx, replicationSQL).Scan(&r.InRecovery, &r.Standbys, &r.Synchronous, &r.Unknown, &r.SynchronousStandbyNames)
	if err != nil {
		return Replication{}, fmt.Errorf("read pg_stat_replication: %w", err)
	}
	return r, nil
}

// Epoch returns the fencing epoch in a lease version or lock token: its
// high 32 bits, the database timeline minus one when the number was handed
// out (migration 00021, workq.workq_epoch()).
func Epoch(n int64) int64 { return n >> 32 }

// Timeline returns the database timeline a lease version or lock token
// was handed out on (Epoch + 1).
func Timeline(n int64) int64 { return Epoch(n) + 1 }
