// Package testdb gives every test its own freshly migrated PostgreSQL
// database, cloned from a template that is migrated once per schema version.
//
// The shared server comes from, in order: TEST_DATABASE_URL; a
// testcontainers-go PostgreSQL container when a Docker engine answers; a
// throwaway cluster from the local initdb (internal/pgembed). With none of
// them the test fails with a message that says how to provide one: it never
// skips.
//
// A package whose tests depend on the state of the whole cluster, not only
// of their own database, runs on a throwaway cluster of its own instead
// (MainOwnCluster): a keyed outbox message is claimable only once every
// transaction older than it has ended in the whole cluster
// (pg_snapshot_xmin), so a transaction held open in any other database of a
// shared server stalls its delivery. docs/testing.md lists these packages.
//
// Packages that use it call testdb.Main or testdb.MainOwnCluster from
// TestMain so that a server the harness started is stopped when the tests
// end.
package testdb

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"

	"github.com/workq/workq/internal/db"
	"github.com/workq/workq/internal/pgembed"
)

// server is a PostgreSQL server the harness makes test databases on.
type server struct {
	find func() (admin string, stop func(), err error)

	once  sync.Once
	admin string // admin URL (any database)
	err   error
	stop  func() // stops a server the harness started; nil for TEST_DATABASE_URL

	templateMu   sync.Mutex
	templateName string
}

var (
	// shared is the server of TEST_DATABASE_URL (or its fallbacks), which
	// other clients may use at the same time.
	shared = &server{find: findServer}
	// own is a throwaway cluster private to this test process.
	own = &server{find: startOwnCluster}
	// current is where URL and Pool make databases: own under
	// MainOwnCluster, else shared.
	current = shared
)

// Main runs the tests of a package and stops any server the harness started.
// The tests' databases are on the shared server.
func Main(m *testing.M) {
	code := m.Run()
	for _, s := range []*server{shared, own} {
		if s.stop != nil {
			s.stop()
		}
	}
	os.Exit(code)
}

// MainOwnCluster is Main for a package whose tests depend on cluster-wide
// state: URL, Pool and NewDatabase make their databases on a throwaway
// cluster private to this test process (started from the local initdb on
// first use, with the shared server's settings that matter: autovacuum
// off), so no other client of the shared server can hold them up.
// SharedURL still reaches the shared server.
func MainOwnCluster(m *testing.M) {
	current = own
	Main(m)
}

// NewClusterURL starts a throwaway cluster for the calling test alone,
// stopped when the test ends, and returns the URL of a migrated database on
// it. It is for a test that needs keyed outbox messages delivered within a
// short window while it runs in parallel with tests that hold transactions
// open for seconds (filling 100k rows for a plan test): on a cluster shared
// with them, its messages would wait for those transactions. It costs an
// initdb and a migration, a second or two.
func NewClusterURL(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin, stop, err := startCluster(ctx, ownClusterOptions())
	if err != nil {
		t.Fatalf("testdb: start a throwaway cluster for this test (the PostgreSQL server binaries; Debian: apt-get install postgresql): %v", err)
	}
	t.Cleanup(stop)
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("testdb: connect to the test's cluster: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "create database test"); err != nil {
		t.Fatalf("testdb: create the test's database: %v", err)
	}
	u := withDatabase(admin, "test")
	if _, err := db.MigrateUp(ctx, u); err != nil {
		t.Fatalf("testdb: migrate: %v", err)
	}
	return u
}

// SharedURL is URL on the shared server (TEST_DATABASE_URL or its
// fallbacks), whichever Main the package uses.
func SharedURL(t testing.TB) string {
	t.Helper()
	return urlOn(t, shared)
}

// URL returns the URL of a new, migrated database that is dropped when the
// test ends. Use it for subprocesses; in-process tests usually want Pool.
func URL(t testing.TB) string {
	t.Helper()
	return urlOn(t, current)
}

func urlOn(t testing.TB, srv *server) string {
	t.Helper()
	u, drop, err := srv.newDatabase()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := drop(); err != nil {
			t.Log(err)
		}
	})
	return u
}

// NewDatabase creates a new, migrated database and returns its URL and a
// function that drops it. It is URL for code that has no testing.TB, such as
// runnable examples.
func NewDatabase() (url string, drop func() error, err error) { return current.newDatabase() }

func (srv *server) newDatabase() (url string, drop func() error, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv.once.Do(func() { srv.admin, srv.stop, srv.err = srv.find() })
	if srv.err != nil {
		return "", nil, fmt.Errorf("testdb: no PostgreSQL server for tests: %w", srv.err)
	}
	admin := srv.admin
	tmpl, err := srv.ensureTemplate(ctx)
	if err != nil {
		return "", nil, fmt.Errorf("testdb: prepare template database: %w", err)
	}
	name := "workq_test_" + randomHex(6)
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", nil, fmt.Errorf("testdb: connect to %s: %w", redact(admin), err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, fmt.Sprintf("create database %s template %s", name, tmpl)); err != nil {
		return "", nil, fmt.Errorf("testdb: create database %s: %w", name, err)
	}
	drop = func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			return fmt.Errorf("testdb: drop %s: %w", name, err)
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, fmt.Sprintf("drop database if exists %s with (force)", name)); err != nil {
			return fmt.Errorf("testdb: drop %s: %w", name, err)
		}
		return nil
	}
	return withDatabase(admin, name), drop, nil
}

// Pool returns a connection pool on a new, migrated database that is closed
// and dropped when the test ends.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return PoolWith(t, 20)
}

// PoolWith is Pool with a chosen maximum number of connections.
func PoolWith(t testing.TB, maxConns int32) *pgxpool.Pool {
	t.Helper()
	return poolOn(t, current, maxConns)
}

// PoolTraced is Pool whose connections report every statement to tr (a
// pgx tracer): to count, see or fail a component's statements on a real
// database.
func PoolTraced(t testing.TB, tr pgx.QueryTracer) *pgxpool.Pool {
	t.Helper()
	return poolWith(t, current, 20, tr)
}

// SharedPool is Pool on the shared server, whichever Main the package uses:
// for a fuzz target of a MainOwnCluster package, whose worker processes
// would otherwise each start a cluster before fuzzing anything.
func SharedPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return poolOn(t, shared, 20)
}

func poolOn(t testing.TB, srv *server, maxConns int32) *pgxpool.Pool {
	t.Helper()
	return poolWith(t, srv, maxConns, nil)
}

func poolWith(t testing.TB, srv *server, maxConns int32, tr pgx.QueryTracer) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(urlOn(t, srv))
	if err != nil {
		t.Fatalf("testdb: parse URL: %v", err)
	}
	cfg.MaxConns = maxConns
	if tr != nil {
		cfg.ConnConfig.Tracer = tr
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("testdb: open pool: %v", err)
	}
	t.Cleanup(pool.Close) // registered after the drop, so it runs before it
	return pool
}

func findServer() (string, func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		if err := ping(ctx, u); err != nil {
			return "", nil, fmt.Errorf("TEST_DATABASE_URL=%s does not answer: %w", redact(u), err)
		}
		return u, nil, nil
	}
	var reasons []string
	if u, stop, err := startContainer(ctx); err == nil {
		return u, stop, nil
	} else {
		reasons = append(reasons, "docker: "+err.Error())
	}
	u, stop, err := startCluster(ctx, pgembed.Options{})
	if err == nil {
		return u, stop, nil
	}
	reasons = append(reasons, "local initdb: "+err.Error())
	return "", nil, fmt.Errorf("set TEST_DATABASE_URL (e.g. postgres://postgres@127.0.0.1:5432/test), run a Docker engine, or install the PostgreSQL server binaries (%s)",
		strings.Join(reasons, "; "))
}

// startOwnCluster starts the throwaway cluster of MainOwnCluster.
func startOwnCluster() (string, func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	u, stop, err := startCluster(ctx, ownClusterOptions())
	if err != nil {
		return "", nil, fmt.Errorf("this package runs on a throwaway cluster of its own (testdb.MainOwnCluster), started from the PostgreSQL server binaries (Debian: apt-get install postgresql): %w", err)
	}
	return u, stop, nil
}

// ownClusterOptions are the settings of the clusters the harness starts for
// MainOwnCluster and NewClusterURL: autovacuum off, as on the shared server
// of CI and the development machines, so that the plan tests' statistics
// change only when they analyze; and wal_level minimal (which needs
// max_wal_senders 0), under which rows written into a table truncated in the
// same transaction skip the WAL: package test fills its million-row tables
// that way, with about a third less CPU.
func ownClusterOptions() pgembed.Options {
	return pgembed.Options{Settings: map[string]string{"autovacuum": "off", "wal_level": "minimal", "max_wal_senders": "0"}}
}

// startCluster starts a throwaway cluster that is stopped and removed when
// the test process exits, even when it is killed (a test timeout).
func startCluster(ctx context.Context, o pgembed.Options) (string, func(), error) {
	o.StopWhenGone = os.Getpid()
	srv, err := pgembed.StartWith(ctx, o)
	if err != nil {
		return "", nil, err
	}
	return srv.URL("postgres"), func() { _ = srv.Stop() }, nil
}

func startContainer(ctx context.Context) (string, func(), error) {
	provider, err := testcontainers.NewDockerProvider()
	if err != nil {
		return "", nil, err
	}
	defer provider.Close()
	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := provider.Health(hctx); err != nil {
		return "", nil, fmt.Errorf("no Docker engine answers: %w", err)
	}
	c, err := tcpostgres.Run(ctx, "postgres:15-alpine",
		tcpostgres.WithDatabase("postgres"),
		tcpostgres.WithUsername("postgres"),
		tcpostgres.WithPassword("postgres"),
		tcpostgres.BasicWaitStrategies(),
	)
	if err != nil {
		return "", nil, fmt.Errorf("start postgres container: %w", err)
	}
	u, err := c.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		_ = testcontainers.TerminateContainer(c)
		return "", nil, err
	}
	return u, func() { _ = testcontainers.TerminateContainer(c) }, nil
}

// ensureTemplate creates (once per schema version, across concurrent test
// processes) a migrated database that every test database is cloned from.
func (srv *server) ensureTemplate(ctx context.Context) (string, error) {
	srv.templateMu.Lock()
	defer srv.templateMu.Unlock()
	if srv.templateName != "" {
		return srv.templateName, nil
	}
	admin := srv.admin
	hash, err := migrationsHash()
	if err != nil {
		return "", err
	}
	name := "workq_tmpl_" + hash
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", fmt.Errorf("connect to %s: %w", redact(admin), err)
	}
	defer conn.Close(ctx)
	// Test binaries of several packages run at once; one builds the template.
	if _, err := conn.Exec(ctx, "select pg_advisory_lock(hashtext('workq-testdb-template'))"); err != nil {
		return "", err
	}
	defer conn.Exec(context.Background(), "select pg_advisory_unlock(hashtext('workq-testdb-template'))")
	var isTemplate *bool
	err = conn.QueryRow(ctx, "select datistemplate from pg_database where datname = $1", name).Scan(&isTemplate)
	switch {
	case err == nil && isTemplate != nil && *isTemplate:
		srv.templateName = name
		return name, nil
	case err == nil: // left half-built by a crashed run
		if _, err := conn.Exec(ctx, fmt.Sprintf("drop database %s with (force)", name)); err != nil {
			return "", err
		}
	case !errors.Is(err, pgx.ErrNoRows):
		return "", err
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf("create database %s", name)); err != nil {
		return "", err
	}
	if _, err := db.MigrateUp(ctx, withDatabase(admin, name)); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf("alter database %s with is_template true", name)); err != nil {
		return "", err
	}
	srv.templateName = name
	return name, nil
}

func migrationsHash() (string, error) {
	fsys := db.Migrations()
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return "", err
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return "", err
		}
		h.Write([]byte(n))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

func ping(ctx context.Context, u string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return conn.Ping(ctx)
}

// withDatabase returns the admin URL pointed at database name. Both URL and
// keyword/value connection strings are accepted.
func withDatabase(admin, name string) string {
	if u, err := url.Parse(admin); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Path = "/" + name
		return u.String()
	}
	return admin + " dbname=" + name
}

func redact(u string) string {
	if p, err := url.Parse(u); err == nil && p.User != nil {
		if _, has := p.User.Password(); has {
			p.User = url.UserPassword(p.User.Username(), "xxxxx")
		}
		return p.String()
	}
	return u
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ExamplePool opens a pool on a new, migrated database for a runnable
// example (which has no testing.TB) and returns it with its cleanup, which
// closes the pool and drops the database. It panics when there is no
// server: an example cannot fail any other way.
func ExamplePool() (*pgxpool.Pool, func()) {
	url, drop, err := NewDatabase()
	if err != nil {
		panic(err)
	}
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		panic(err)
	}
	return pool, func() { pool.Close(); _ = drop() }
}

// Snapshot is a digest of every table of workq's schema and of public: equal
// snapshots mean nothing was written.
func Snapshot(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `select quote_ident(table_schema) || '.' || quote_ident(table_name) from information_schema.tables
		where table_schema in ('workq', 'public') and table_type = 'BASE TABLE' order by 1`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for _, tb := range tables {
		var n int64
		var sum string
		q := fmt.Sprintf(`select count(*), coalesce(md5(string_agg(x::text, '|' order by x::text)), '') from %s x`, tb)
		if err := pool.QueryRow(ctx, q).Scan(&n, &sum); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&sb, "%s:%d:%s\n", tb, n, sum)
	}
	return sb.String()
}
