package db

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrSchemaBehind is returned by CheckSchema when the database's schema is
// older than the migrations this binary carries.
var ErrSchemaBehind = errors.New("database schema is not current")

// Querier is what CheckSchema needs of a connection, pool or transaction.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// LatestVersion is the version of the newest embedded migration.
func LatestVersion() int64 {
	var latest int64
	entries, _ := fs.ReadDir(Migrations(), ".")
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		if !ok {
			continue
		}
		if v, err := strconv.ParseInt(num, 10, 64); err == nil && v > latest {
			latest = v
		}
	}
	return latest
}

// SchemaVersion reads the version goose recorded in the database (0 when
// workq's schema was never applied).
func SchemaVersion(ctx context.Context, q Querier) (int64, error) {
	var v int64
	err := q.QueryRow(ctx, `select coalesce(max(version_id), 0) from goose_db_version`).Scan(&v)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table: never migrated
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// CheckSchema returns an error wrapping ErrSchemaBehind, saying to run
// `workq migrate up`, when the database's schema is older than this
// binary's migrations.
func CheckSchema(ctx context.Context, q Querier) error {
	v, err := SchemaVersion(ctx, q)
	if err != nil {
		return err
	}
	if latest := LatestVersion(); v < latest {
		return fmt.Errorf("%w: the database is at version %d, this workq needs %d: run `workq migrate up`", ErrSchemaBehind, v, latest)
	}
	return nil
}
