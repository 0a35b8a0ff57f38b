// Package migrate applies, reverts and prints workq's schema migrations in
// the PostgreSQL schema of your choice (default workq), on your pool, on one
// connection, or inside your own transaction.
//
// The migrations are the goose-format files in db/migrations. Applied
// versions are recorded in <schema>.workq_migrations (goose's column
// layout), never in goose's goose_db_version, so workq migrates beside an
// application that uses goose itself. A database of the layout before
// schema isolation (workq's objects in public, its versions in
// public.goose_db_version) is moved into the schema by the first Up, in one
// transaction. docs/design.md ("Schema isolation") explains why workq runs
// the files itself rather than through goose.
package migrate

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/db/migrations"
	"github.com/workq/workq/internal/dbschema"
	"github.com/workq/workq/workqtype"
)

// VersionTable is the name of the version table in the schema.
const VersionTable = "workq_migrations"

// ErrInvalidSchema is returned (wrapped) for a schema name workq refuses:
// 1 to 54 characters, a lowercase letter or _ first, then lowercase
// letters, digits or _, not starting with pg_, and not information_schema
// or public.
var ErrInvalidSchema = workqtype.ErrInvalidSchema

// DB is what a Migrator runs on: a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Options configure a Migrator.
type Options struct {
	// Schema is the PostgreSQL schema workq lives in ("" = workq).
	Schema string
	// Logger receives one line per migration applied or reverted (nil:
	// none).
	Logger *slog.Logger
}

// Migrator applies and reverts workq's migrations in one schema.
//
// On a pool or a connection, each migration runs in a transaction of its
// own (those marked NO TRANSACTION statement by statement, so their indexes
// are built CONCURRENTLY), under a session advisory lock per schema that
// makes concurrent migrators wait for each other. In a pgx.Tx everything
// runs in that transaction under a transaction advisory lock: it commits or
// rolls back with the caller's work, and indexes are built without
// CONCURRENTLY (a transaction refuses it), so they block writes to their
// table while they are built.
type Migrator struct {
	db     DB
	tx     bool // db is a pgx.Tx
	r      dbschema.Rewriter
	log    *slog.Logger
	migs   []migration
	latest int64
}

// New returns a Migrator over db for opts.Schema; db may be nil for a
// Migrator that only prints SQL. It fails with
// ErrInvalidSchema for a schema name workq refuses, before touching the
// database.
func New(db DB, opts Options) (*Migrator, error) {
	r, err := dbschema.NewRewriter(opts.Schema)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	migs, err := load(r)
	if err != nil {
		return nil, err
	}
	_, tx := db.(pgx.Tx)
	return &Migrator{db: db, tx: tx, r: r, log: opts.Logger, migs: migs, latest: migs[len(migs)-1].version}, nil
}

// load parses the embedded migrations, rewritten for r's schema.
func load(r dbschema.Rewriter) ([]migration, error) {
	migs, err := parseAll(migrations.Files)
	if err != nil {
		return nil, err
	}
	if len(migs) == 0 {
		return nil, errors.New("migrate: no migrations")
	}
	for i := range migs {
		for j, s := range migs[i].up {
			migs[i].up[j] = dbschema.Rewrite(s, r.Schema())
		}
		for j, s := range migs[i].down {
			migs[i].down[j] = dbschema.Rewrite(s, r.Schema())
		}
	}
	return migs, nil
}

// Files returns the migration files (goose's SQL format), written for the
// default schema workq.
func Files() fs.FS { return migrations.Files }

// Latest returns the newest migration's version.
func Latest() int64 {
	migs, err := parseAll(migrations.Files)
	if err != nil || len(migs) == 0 {
		return 0
	}
	return migs[len(migs)-1].version
}

// Schema returns the schema the Migrator works in.
func (m *Migrator) Schema() string { return m.r.Schema() }

// Latest returns the newest migration's version.
func (m *Migrator) Latest() int64 { return m.latest }

func (m *Migrator) schemaIdent() string { return pgx.Identifier{m.r.Schema()}.Sanitize() }

func (m *Migrator) versionTable() string {
	return pgx.Identifier{m.r.Schema(), VersionTable}.Sanitize()
}

// lockPoll is how often a migrator retries the schema's lock while another
// holds it.
const lockPoll = 50 * time.Millisecond

// conn is one session to run on: a connection of the pool (held for the
// whole run), the connection itself, or the caller's transaction.
type conn interface {
	DB
}

// session runs fn on one session holding the schema's advisory lock.
func (m *Migrator) session(ctx context.Context, fn func(c conn) error) error {
	if m.db == nil {
		return errNoDB
	}
	const lockSQL = `select pg_advisory_xact_lock(hashtextextended('workq migrate ' || $1, 0))`
	if m.tx {
		if _, err := m.db.Exec(ctx, lockSQL, m.r.Schema()); err != nil {
			return fmt.Errorf("migrate: lock schema %s: %w", m.r.Schema(), err)
		}
		return fn(m.db)
	}
	var c conn = m.db
	if p, ok := m.db.(*pgxpool.Pool); ok {
		pc, err := p.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("migrate: acquire a connection: %w", err)
		}
		defer pc.Release()
		c = pc
	}
	// Poll rather than wait in pg_advisory_lock: a session waiting in a
	// statement holds a snapshot, which CREATE INDEX CONCURRENTLY in the
	// lock holder's migration waits for (a deadlock).
	for {
		var got bool
		if err := c.QueryRow(ctx, `select pg_try_advisory_lock(hashtextextended('workq migrate ' || $1, 0))`, m.r.Schema()).Scan(&got); err != nil {
			return fmt.Errorf("migrate: lock schema %s: %w", m.r.Schema(), err)
		}
		if got {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("migrate: wait for another migrator of schema %s: %w", m.r.Schema(), ctx.Err())
		case <-time.After(lockPoll):
		}
	}
	defer func() {
		// A fresh context: the unlock must run even when ctx has ended (a
		// connection whose unlock failed is closed by the pool's health
		// check only on error, so say so).
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := c.Exec(uctx, `select pg_advisory_unlock(hashtextextended('workq migrate ' || $1, 0))`, m.r.Schema()); err != nil && m.log != nil {
			m.log.Warn("migrate: unlock schema", "schema", m.r.Schema(), "err", err)
		}
	}()
	return fn(c)
}

// transact runs fn in a transaction on c (a savepoint when c is a
// transaction).
func transact(ctx context.Context, c conn, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, c, fn)
}

// Up applies every pending migration and returns the version reached. The
// first Up in a schema creates the schema and its version table, and moves
// a database of the layout before schema isolation into the schema
// (docs/migration.md).
func (m *Migrator) Up(ctx context.Context) (int64, error) {
	return m.UpTo(ctx, m.latest)
}

// UpTo applies the pending migrations up to and including version and
// returns the version reached.
//
// The first UpTo in a schema (no version table yet) runs in one
// transaction: it creates the schema and its version table, moves a
// database of the old layout into the schema (adopt), and applies every
// migration, building the indexes of NO TRANSACTION migrations without
// CONCURRENTLY. If any step fails nothing is left of it: no schema, no
// version table, nothing moved out of public.
func (m *Migrator) UpTo(ctx context.Context, version int64) (int64, error) {
	if v, ok := m.upToDate(ctx, version); ok {
		return v, nil
	}
	var reached int64
	err := m.session(ctx, func(c conn) error {
		exists, err := m.tableExists(ctx, c)
		if err != nil {
			return err
		}
		if exists {
			reached, err = m.upTo(ctx, c, version, m.tx)
			return err
		}
		err = transact(ctx, c, func(tx pgx.Tx) error {
			if err := m.prepare(ctx, tx); err != nil {
				return err
			}
			reached, err = m.upTo(ctx, tx, version, true)
			return err
		})
		if err != nil {
			return fmt.Errorf("migrate: the first Up of schema %s was rolled back, nothing was changed: %w", m.r.Schema(), err)
		}
		return nil
	})
	return reached, err
}

// upTo applies the pending migrations up to version on c (inTx: c is a
// transaction, in which NO TRANSACTION migrations build their indexes
// without CONCURRENTLY) and returns the version reached.
func (m *Migrator) upTo(ctx context.Context, c conn, version int64, inTx bool) (int64, error) {
	applied, err := m.applied(ctx, c)
	if err != nil {
		return 0, err
	}
	for _, mig := range m.migs {
		if mig.version > version || applied[mig.version] {
			continue
		}
		if err := m.apply(ctx, c, mig, mig.up, true, inTx); err != nil {
			return 0, err
		}
	}
	return m.version(ctx, c)
}

// upToDate reports, without the lock, whether every migration up to
// version is applied already (ok), and the version then. Every process
// start migrates (`workq run`, embedded services), and most find nothing to
// do: they take no session lock then, which also keeps them right behind
// PgBouncer's transaction pooling, where a session lock would stay on a
// server connection other clients get. Any doubt (no version table yet, a
// legacy layout, an error) takes the locked path.
func (m *Migrator) upToDate(ctx context.Context, version int64) (int64, bool) {
	if m.db == nil || m.tx {
		return 0, false
	}
	applied, err := m.applied(ctx, m.db)
	if err != nil {
		return 0, false
	}
	for _, mig := range m.migs {
		if mig.version <= version && !applied[mig.version] {
			return 0, false
		}
	}
	v, err := m.version(ctx, m.db)
	return v, err == nil
}

// DownTo reverts applied migrations, newest first, until the schema is at
// version (0: every migration reverted; the schema and its version table
// stay). It returns the version reached.
func (m *Migrator) DownTo(ctx context.Context, version int64) (int64, error) {
	var reached int64
	err := m.session(ctx, func(c conn) error {
		applied, err := m.applied(ctx, c)
		if err != nil {
			return err
		}
		for i := len(m.migs) - 1; i >= 0; i-- {
			mig := m.migs[i]
			if mig.version <= version || !applied[mig.version] {
				continue
			}
			if err := m.apply(ctx, c, mig, mig.down, false, m.tx); err != nil {
				return err
			}
		}
		reached, err = m.version(ctx, c)
		return err
	})
	return reached, err
}

// Down reverts the newest applied migration and returns the version
// reached.
func (m *Migrator) Down(ctx context.Context) (int64, error) {
	v, err := m.Version(ctx)
	if err != nil || v == 0 {
		return v, err
	}
	var prev int64
	for _, mig := range m.migs {
		if mig.version < v {
			prev = mig.version
		}
	}
	return m.DownTo(ctx, prev)
}

// apply runs one migration's statements and records it (up) or removes its
// record (down); inTx says that c is a transaction.
func (m *Migrator) apply(ctx context.Context, c conn, mig migration, stmts []string, up, inTx bool) error {
	start := time.Now()
	record := func(ctx context.Context, q DB) error {
		var err error
		if up {
			_, err = q.Exec(ctx, `insert into `+m.versionTable()+` (version_id, is_applied) values ($1, true)`, mig.version)
		} else {
			_, err = q.Exec(ctx, `delete from `+m.versionTable()+` where version_id = $1`, mig.version)
		}
		return err
	}
	run := func(ctx context.Context, q DB, stmts []string) error {
		for _, s := range stmts {
			if _, err := q.Exec(ctx, s); err != nil {
				return fmt.Errorf("migrate: %s: %w\nstatement:\n%s", mig.name, err, s)
			}
		}
		return record(ctx, q)
	}
	var err error
	switch {
	case mig.noTx && !inTx:
		// Statement by statement outside a transaction (CONCURRENTLY).
		err = run(ctx, c, stmts)
	case mig.noTx:
		plain := make([]string, len(stmts))
		for i, s := range stmts {
			plain[i] = plainIndex(s)
		}
		err = transact(ctx, c, func(tx pgx.Tx) error { return run(ctx, tx, plain) })
	default:
		err = transact(ctx, c, func(tx pgx.Tx) error { return run(ctx, tx, stmts) })
	}
	if err != nil {
		return err
	}
	if m.log != nil {
		dir := "applied"
		if !up {
			dir = "reverted"
		}
		m.log.Info("migrate: "+dir, "schema", m.r.Schema(), "version", mig.version, "file", mig.name, "took", time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// prepare creates the schema and the version table in tx, adopting a
// database of the old layout (adopt).
func (m *Migrator) prepare(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, `create schema if not exists `+m.schemaIdent()); err != nil {
		return fmt.Errorf("migrate: create schema %s: %w", m.r.Schema(), err)
	}
	if _, err := tx.Exec(ctx, m.createVersionTable()); err != nil {
		return fmt.Errorf("migrate: create %s: %w", m.versionTable(), err)
	}
	return m.adopt(ctx, tx)
}

// createVersionTable is goose's version table layout (so goose's own tools
// can read it), created with its version 0 row.
func (m *Migrator) createVersionTable() string {
	t := m.versionTable()
	return `create table if not exists ` + t + ` (
    id integer primary key generated by default as identity,
    version_id bigint not null,
    is_applied boolean not null,
    tstamp timestamp not null default now()
);
insert into ` + t + ` (version_id, is_applied) select 0, true
where not exists (select 1 from ` + t + ` where version_id = 0);`
}

func (m *Migrator) tableExists(ctx context.Context, q DB) (bool, error) {
	var ok bool
	if err := q.QueryRow(ctx, `select to_regclass($1) is not null`, m.versionTable()).Scan(&ok); err != nil {
		return false, fmt.Errorf("migrate: look for %s: %w", m.versionTable(), err)
	}
	return ok, nil
}

// applied returns the versions recorded as applied.
func (m *Migrator) applied(ctx context.Context, q DB) (map[int64]bool, error) {
	out := map[int64]bool{}
	ok, err := m.tableExists(ctx, q)
	if err != nil || !ok {
		return out, err
	}
	rows, err := q.Query(ctx, `select version_id from `+m.versionTable()+` where is_applied and version_id > 0`)
	if err != nil {
		return nil, fmt.Errorf("migrate: read %s: %w", m.versionTable(), err)
	}
	vs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("migrate: read %s: %w", m.versionTable(), err)
	}
	for _, v := range vs {
		out[v] = true
	}
	return out, nil
}

func (m *Migrator) version(ctx context.Context, q DB) (int64, error) {
	ok, err := m.tableExists(ctx, q)
	if err != nil || !ok {
		return 0, err
	}
	var v int64
	if err := q.QueryRow(ctx, `select coalesce(max(version_id), 0) from `+m.versionTable()+` where is_applied`).Scan(&v); err != nil {
		return 0, fmt.Errorf("migrate: read schema version: %w", err)
	}
	return v, nil
}

// Version returns the newest applied migration's version (0: none, or no
// version table yet).
func (m *Migrator) Version(ctx context.Context) (int64, error) {
	if m.db == nil {
		return 0, errNoDB
	}
	return m.version(ctx, m.db)
}

// errNoDB is returned by a Migrator made without a database (for SQL only).
var errNoDB = errors.New("migrate: no database (New was given nil: only SQL works)")

// MigrationStatus is one migration and whether it is applied.
type MigrationStatus struct {
	Version   int64  `json:"version"`
	Source    string `json:"source"`
	Applied   bool   `json:"applied"`
	AppliedAt string `json:"applied_at,omitempty"`
}

// Status lists every migration and whether it is applied.
func (m *Migrator) Status(ctx context.Context) ([]MigrationStatus, error) {
	if m.db == nil {
		return nil, errNoDB
	}
	at := map[int64]time.Time{}
	ok, err := m.tableExists(ctx, m.db)
	if err != nil {
		return nil, err
	}
	if ok {
		rows, err := m.db.Query(ctx, `select version_id, max(tstamp) from `+m.versionTable()+` where is_applied group by version_id`)
		if err != nil {
			return nil, fmt.Errorf("migrate: status: %w", err)
		}
		var v int64
		var t time.Time
		if _, err := pgx.ForEachRow(rows, []any{&v, &t}, func() error { at[v] = t; return nil }); err != nil {
			return nil, fmt.Errorf("migrate: status: %w", err)
		}
	}
	out := make([]MigrationStatus, 0, len(m.migs))
	for _, mig := range m.migs {
		s := MigrationStatus{Version: mig.version, Source: mig.name}
		if t, ok := at[mig.version]; ok {
			s.Applied, s.AppliedAt = true, t.UTC().Format("2006-01-02T15:04:05Z")
		}
		out = append(out, s)
	}
	return out, nil
}

// SQL returns the script that takes the schema from version from to
// version to (to 0: the latest when from is below it): for teams that run
// their own migration tool. Upward it starts by creating the schema and the
// version table when missing; each migration is one transaction (BEGIN ...
// COMMIT) that also records it in the version table, except those marked
// NO TRANSACTION, whose statements run one by one (psql in autocommit). It
// does not adopt a database of the layout before schema isolation: run Up
// once for that.
func (m *Migrator) SQL(from, to int64) (string, error) {
	if to == 0 && from < m.latest {
		to = m.latest
	}
	if from < 0 || to < 0 || to > m.latest || from > m.latest {
		return "", fmt.Errorf("migrate: versions from %d to %d: want 0 to %d", from, to, m.latest)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "-- workq schema %s: migrations from version %d to %d.\n", m.r.Schema(), from, to)
	up := from <= to
	if up {
		fmt.Fprintf(&b, "create schema if not exists %s;\n%s\n", m.schemaIdent(), m.createVersionTable())
	}
	emit := func(mig migration, stmts []string, record string) {
		fmt.Fprintf(&b, "\n-- %s\n", mig.name)
		if !mig.noTx {
			b.WriteString("begin;\n")
		}
		for _, s := range stmts {
			b.WriteString(s)
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, record+"\n", mig.version)
		if !mig.noTx {
			b.WriteString("commit;\n")
		}
	}
	if up {
		for _, mig := range m.migs {
			if mig.version > from && mig.version <= to {
				emit(mig, mig.up, `insert into `+m.versionTable()+` (version_id, is_applied) values (%d, true);`)
			}
		}
		return b.String(), nil
	}
	for i := len(m.migs) - 1; i >= 0; i-- {
		if mig := m.migs[i]; mig.version <= from && mig.version > to {
			emit(mig, mig.down, `delete from `+m.versionTable()+` where version_id = %d;`)
		}
	}
	return b.String(), nil
}
