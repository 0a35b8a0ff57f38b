package ha

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/pgembed"
)

func TestReplicationState(t *testing.T) {
	for _, c := range []struct {
		r    Replication
		want State
	}{
		{Replication{}, NoStandbys},
		{Replication{Standbys: 2, Synchronous: 1, SynchronousStandbyNames: "a"}, Synchronous},
		{Replication{Standbys: 1, SynchronousStandbyNames: "ANY 1 (a, b)"}, Unsafe},
		{Replication{Standbys: 1, Unknown: 1, SynchronousStandbyNames: ""}, Unsafe}, // nothing can be synchronous
		{Replication{Standbys: 1, Unknown: 1, SynchronousStandbyNames: "a"}, Unknown},
		{Replication{Standbys: 2, Synchronous: 1, Unknown: 1, SynchronousStandbyNames: "a"}, Synchronous},
	} {
		if got := c.r.State(); got != c.want {
			t.Errorf("%+v: %s, want %s", c.r, got, c.want)
		}
	}
}

func TestSyncCommitSafe(t *testing.T) {
	for v, want := range map[string]bool{"on": true, "remote_apply": true, "ON": true, "remote_write": false, "local": false, "off": false, "": false} {
		if got := SyncCommitSafe(v); got != want {
			t.Errorf("%q: %v", v, got)
		}
	}
}

func TestEpoch(t *testing.T) {
	for _, c := range []struct{ n, epoch, timeline int64 }{
		{1, 0, 1}, {1<<32 - 1, 0, 1}, {1 << 32, 1, 2}, {3<<32 + 7, 3, 4},
	} {
		if Epoch(c.n) != c.epoch || Timeline(c.n) != c.timeline {
			t.Errorf("%d: epoch %d timeline %d", c.n, Epoch(c.n), Timeline(c.n))
		}
	}
}

// ConfigurePool keeps a stronger synchronous_commit the URL asked for,
// replaces a weaker one, shortens lifetimes and never lengthens them, and
// asks several hosts for the writable one.
func TestConfigurePoolSettings(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"postgres://u@h/db", "on"},
		{"postgres://u@h/db?synchronous_commit=off", "on"},
		{"postgres://u@h/db?synchronous_commit=remote_apply", "remote_apply"},
	} {
		cfg, err := pgxpool.ParseConfig(c.url)
		if err != nil {
			t.Fatal(err)
		}
		ConfigurePool(cfg)
		// A safe value from the URL stays a startup parameter; otherwise
		// none is sent (PgBouncer refuses it) and AfterConnect sets on.
		got, ok := cfg.ConnConfig.RuntimeParams["synchronous_commit"]
		if c.want == "on" && (ok || cfg.AfterConnect == nil) || c.want != "on" && (got != c.want || cfg.AfterConnect != nil) {
			t.Errorf("%s: startup synchronous_commit %q (%v), AfterConnect set %v; want %q", c.url, got, ok, cfg.AfterConnect != nil, c.want)
		}
		if cfg.MaxConnLifetime != MaxConnLifetime || cfg.MaxConnIdleTime != MaxConnIdleTime || cfg.ConnConfig.ConnectTimeout != ConnectTimeout {
			t.Errorf("%s: lifetime %s idle %s connect %s", c.url, cfg.MaxConnLifetime, cfg.MaxConnIdleTime, cfg.ConnConfig.ConnectTimeout)
		}
		if cfg.ConnConfig.ValidateConnect != nil {
			t.Errorf("%s: one host, yet a ValidateConnect", c.url)
		}
	}
	cfg, err := pgxpool.ParseConfig("postgres://u@h1:5432,h2:5433/db?pool_max_conn_lifetime=1m&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	ConfigurePool(cfg)
	if cfg.MaxConnLifetime != time.Minute || cfg.ConnConfig.ConnectTimeout != 2*time.Second {
		t.Errorf("the URL's shorter lifetime or connect timeout was not kept: %s %s", cfg.MaxConnLifetime, cfg.ConnConfig.ConnectTimeout)
	}
	if cfg.ConnConfig.ValidateConnect == nil {
		t.Error("several hosts without target_session_attrs: no read-write check")
	}
	// OnPgError: 25006 and FATAL end the connection; others keep it.
	for code, keep := range map[string]bool{"25006": false, "23505": true} {
		if got := cfg.ConnConfig.OnPgError(nil, &pgconn.PgError{Severity: "ERROR", Code: code}); got != keep {
			t.Errorf("%s: keep %v", code, got)
		}
	}
	if cfg.ConnConfig.OnPgError(nil, &pgconn.PgError{Severity: "FATAL", Code: "57P01"}) {
		t.Error("FATAL: connection kept")
	}
}

// On a real primary and standby: a pool configured by ConfigurePool and
// pointed at the standby closes the connection that answered 25006 instead
// of returning it to the pool, and a URL listing the standby first connects
// to the primary.
func TestConfigurePoolStandby(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	primary, err := pgembed.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer primary.Stop()
	standby, err := primary.StartStandby(ctx, pgembed.StandbyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer standby.Stop()

	pool := newPool(t, ctx, standby.URL("postgres"))
	var pid int
	if err := pool.QueryRow(ctx, "select pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	_, err = pool.Exec(ctx, "create table t (id int)")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != ReadOnlySQLTransaction {
		t.Fatalf("a write on the standby: %v, want SQLSTATE 25006", err)
	}
	var pid2 int
	if err := pool.QueryRow(ctx, "select pg_backend_pid()").Scan(&pid2); err != nil {
		t.Fatal(err)
	}
	if pid2 == pid {
		t.Fatalf("the connection that answered 25006 (backend %d) was reused", pid)
	}
	var sc string
	if err := pool.QueryRow(ctx, "select current_setting('synchronous_commit')").Scan(&sc); err != nil || sc != "on" {
		t.Fatalf("synchronous_commit %q, %v (the server's default is off)", sc, err)
	}

	multi := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable", standby.Port(), primary.Port())
	mp := newPool(t, ctx, multi)
	var inRecovery bool
	if err := mp.QueryRow(ctx, "select pg_is_in_recovery()").Scan(&inRecovery); err != nil || inRecovery {
		t.Fatalf("several hosts, standby first: in recovery %v, %v", inRecovery, err)
	}
}

func newPool(t *testing.T, ctx context.Context, url string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	ConfigurePool(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}
