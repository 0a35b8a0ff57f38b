// Package dbschema puts workq's SQL into the schema the user chose.
//
// Every statement workq runs (the migrations, db/queries, the SQL in Go)
// names workq's objects as workq.<name>, and its notification channels as
// string literals 'workq_<table>'. With the default schema, workq, the text
// runs exactly as written. For another schema, Rewrite replaces each
// qualifier with the quoted schema ("s".) and each channel prefix with
// 's_', once per distinct statement (the result is cached), and DB wraps a
// connection, pool or transaction so that everything sent through it is
// rewritten. docs/design.md ("Schema isolation") has the reasoning;
// TestSQLMarkers keeps the two markers from appearing for any other reason.
package dbschema

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/workq/workq/workqtype"
)

// Default is the schema workq uses when none is chosen, and the one its SQL
// is written in.
const Default = "workq"

// MaxLen is the longest schema name: its longest notification channel,
// <schema>_job_runs, must fit PostgreSQL's 63-byte identifiers (a longer
// channel is truncated by LISTEN and refused by pg_notify).
const MaxLen = 63 - len("_job_runs")

// ErrInvalidName is returned (wrapped) for a schema name workq refuses.
var ErrInvalidName = workqtype.ErrInvalidSchema

// Validate checks a schema name: 1 to MaxLen characters, a lowercase letter
// or underscore, then lowercase letters, digits and underscores. Only such
// names are accepted so that the name is the same quoted and unquoted, in
// SQL and in channel names. It refuses PostgreSQL's own schemas
// (information_schema, and every name starting with pg_: pg_catalog,
// pg_toast, pg_temp_N...), and public: workq keeps to a schema of its own,
// beside the application's tables in public (docs/design.md, "Schema
// isolation"). Every place that takes a schema name (Config.Schema,
// migrate.Options.Schema, --schema) validates it here.
func Validate(name string) error {
	if name == "" || len(name) > MaxLen {
		return fmt.Errorf("%w %q: want 1 to %d characters", ErrInvalidName, name, MaxLen)
	}
	for i, c := range name {
		if c == '_' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9' {
			continue
		}
		return fmt.Errorf("%w %q: want a lowercase letter or _ first, then lowercase letters, digits or _", ErrInvalidName, name)
	}
	switch {
	case strings.HasPrefix(name, "pg_"):
		return fmt.Errorf("%w %q: names starting with pg_ are reserved by PostgreSQL", ErrInvalidName, name)
	case name == "information_schema":
		return fmt.Errorf("%w %q: a schema of PostgreSQL's own", ErrInvalidName, name)
	case name == "public":
		return fmt.Errorf("%w %q: workq keeps to a schema of its own, beside the application's public (default %s)", ErrInvalidName, name, Default)
	}
	return nil
}

// Name returns name, or Default when name is empty, after Validate.
func Name(name string) (string, error) {
	if name == "" {
		return Default, nil
	}
	if err := Validate(name); err != nil {
		return "", err
	}
	return name, nil
}

// The markers Rewrite replaces.
const (
	qualifier     = Default + "."
	channelPrefix = "'" + Default + "_"
)

// Rewriter rewrites SQL for one schema. The zero value, and the Rewriter
// of the default schema, leave SQL as it is.
type Rewriter struct {
	schema string    // "" for the default schema
	cache  *sync.Map // statement text -> rewritten text
}

// rewriters holds one Rewriter per schema, so that every component of a
// process on that schema shares one cache of rewritten statements.
var rewriters sync.Map // schema -> Rewriter

// NewRewriter returns the Rewriter of a schema ("" = Default); it is the
// same (and shares its cache) for every call with one name.
func NewRewriter(schema string) (Rewriter, error) {
	s, err := Name(schema)
	if err != nil {
		return Rewriter{}, err
	}
	if s == Default {
		return Rewriter{}, nil
	}
	if r, ok := rewriters.Load(s); ok {
		return r.(Rewriter), nil
	}
	r, _ := rewriters.LoadOrStore(s, Rewriter{schema: s, cache: new(sync.Map)})
	return r.(Rewriter), nil
}

// Schema returns the schema's name.
func (r Rewriter) Schema() string {
	if r.schema == "" {
		return Default
	}
	return r.schema
}

// Rewrite returns sql for the Rewriter's schema (cached per text).
func (r Rewriter) Rewrite(sql string) string {
	if r.schema == "" {
		return sql
	}
	if s, ok := r.cache.Load(sql); ok {
		return s.(string)
	}
	s := Rewrite(sql, r.schema)
	r.cache.Store(sql, s)
	return s
}

// Rewrite returns sql with every workq. qualifier (one that does not
// continue an identifier) replaced by the quoted schema, and every string
// literal starting 'workq_ (a notification channel) by 'schema_. It does
// not cache; Rewriter does.
func Rewrite(sql, schema string) string {
	if schema == "" || schema == Default {
		return sql
	}
	var b strings.Builder
	b.Grow(len(sql) + 16)
	for i := 0; i < len(sql); {
		switch {
		case strings.HasPrefix(sql[i:], qualifier) && (i == 0 || !identChar(sql[i-1])):
			b.WriteString(`"` + schema + `".`)
			i += len(qualifier)
		case strings.HasPrefix(sql[i:], channelPrefix):
			b.WriteString("'" + schema + "_")
			i += len(channelPrefix)
		default:
			b.WriteByte(sql[i])
			i++
		}
	}
	return b.String()
}

// identChar says whether c can be part of an SQL identifier (or closes a
// quoted one): workq. after it is not a qualifier.
func identChar(c byte) bool {
	return c == '_' || c == '$' || c == '"' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// DBTX is the connection interface of the generated queries (db/gen.DBTX).
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Wrap returns db with every statement rewritten for the Rewriter's
// schema: db itself for the default schema (zero cost) or when it is
// already wrapped for this schema, a *Tx for a pgx.Tx (so it stays one),
// else a *DB. When db can begin transactions or COPY, so can the result.
func (r Rewriter) Wrap(db DBTX) DBTX {
	if r.schema == "" {
		return db
	}
	switch d := db.(type) {
	case *DB:
		if d.r.schema == r.schema {
			return d
		}
	case *Tx:
		if d.r.schema == r.schema {
			return d
		}
	}
	if tx, ok := db.(pgx.Tx); ok {
		return &Tx{Tx: tx, r: r}
	}
	return &DB{db: db, r: r}
}

// TxDB is a DBTX that can begin a transaction (workqtype.TxDB).
type TxDB interface {
	DBTX
	Begin(ctx context.Context) (pgx.Tx, error)
}

// WrapTx is Wrap for a value that can begin a transaction (a pool, a
// connection or a transaction); so can the result.
func (r Rewriter) WrapTx(db TxDB) TxDB { return r.Wrap(db).(TxDB) }

// DB is a DBTX whose statements are rewritten for one schema. Begin and
// CopyFrom are passed on when the wrapped value has them (a pool, a
// connection or a transaction); a transaction begun through DB is wrapped
// too.
type DB struct {
	db DBTX
	r  Rewriter
}

// Exec runs a rewritten statement.
func (d *DB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return d.db.Exec(ctx, d.r.Rewrite(sql), args...)
}

// Query runs a rewritten query.
func (d *DB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return d.db.Query(ctx, d.r.Rewrite(sql), args...)
}

// QueryRow runs a rewritten query for one row.
func (d *DB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return d.db.QueryRow(ctx, d.r.Rewrite(sql), args...)
}

// Unwrap returns the wrapped connection, pool or transaction.
func (d *DB) Unwrap() DBTX { return d.db }

type beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

type copier interface {
	CopyFrom(ctx context.Context, tableName pgx.Identifier, columnNames []string, rowSrc pgx.CopyFromSource) (int64, error)
}

// Begin begins a transaction (or a savepoint, in a transaction) on the
// wrapped value, and returns it wrapped.
func (d *DB) Begin(ctx context.Context) (pgx.Tx, error) {
	b, ok := d.db.(beginner)
	if !ok {
		return nil, fmt.Errorf("dbschema: %T cannot begin a transaction", d.db)
	}
	tx, err := b.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &Tx{Tx: tx, r: d.r}, nil
}

// CopyFrom copies into a table; a table named workq.<name> ({"workq",
// name}) is put into the schema.
func (d *DB) CopyFrom(ctx context.Context, tableName pgx.Identifier, columnNames []string, rowSrc pgx.CopyFromSource) (int64, error) {
	c, ok := d.db.(copier)
	if !ok {
		return 0, fmt.Errorf("dbschema: %T cannot COPY", d.db)
	}
	return c.CopyFrom(ctx, d.r.Identifier(tableName), columnNames, rowSrc)
}

// Identifier returns id with a leading workq schema replaced by the
// Rewriter's schema.
func (r Rewriter) Identifier(id pgx.Identifier) pgx.Identifier {
	if r.schema == "" || len(id) < 2 || id[0] != Default {
		return id
	}
	out := append(pgx.Identifier{r.schema}, id[1:]...)
	return out
}

// Tx is a transaction whose statements are rewritten for one schema.
type Tx struct {
	pgx.Tx
	r Rewriter
}

// Exec runs a rewritten statement.
func (t *Tx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.Tx.Exec(ctx, t.r.Rewrite(sql), args...)
}

// Query runs a rewritten query.
func (t *Tx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.Tx.Query(ctx, t.r.Rewrite(sql), args...)
}

// QueryRow runs a rewritten query for one row.
func (t *Tx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.Tx.QueryRow(ctx, t.r.Rewrite(sql), args...)
}

// Begin begins a savepoint, wrapped.
func (t *Tx) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := t.Tx.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &Tx{Tx: tx, r: t.r}, nil
}

// SendBatch sends a batch of rewritten statements.
func (t *Tx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return t.Tx.SendBatch(ctx, t.r.batch(b))
}

// Prepare prepares a rewritten statement.
func (t *Tx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.Tx.Prepare(ctx, name, t.r.Rewrite(sql))
}

// batch returns a copy of b with its statements rewritten.
func (r Rewriter) batch(b *pgx.Batch) *pgx.Batch {
	out := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, len(b.QueuedQueries))}
	for i, q := range b.QueuedQueries {
		c := *q
		c.SQL = r.Rewrite(q.SQL)
		out.QueuedQueries[i] = &c
	}
	return out
}

// CopyFrom copies into a table; a table named workq.<name> is put into the
// schema.
func (t *Tx) CopyFrom(ctx context.Context, tableName pgx.Identifier, columnNames []string, rowSrc pgx.CopyFromSource) (int64, error) {
	return t.Tx.CopyFrom(ctx, t.r.Identifier(tableName), columnNames, rowSrc)
}
