package db

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/workq/workq/migrate"
	"github.com/workq/workq/workqtype"
)

// ErrSchemaBehind is returned by CheckSchema when the database's schema is
// older than the migrations this binary carries.
var ErrSchemaBehind = workqtype.ErrSchemaBehind

// Querier is what CheckSchema needs of a connection, pool or transaction.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// LatestVersion is the version of the newest embedded migration.
func LatestVersion() int64 { return migrate.Latest() }

// SchemaVersion reads the version recorded in workq.workq_migrations (0 when
// workq's schema was never applied). For another schema pass q wrapped by
// that schema's rewriter (internal/dbschema), as every workq component does.
func SchemaVersion(ctx context.Context, q Querier) (int64, error) {
	var v int64
	err := q.QueryRow(ctx, `select coalesce(max(version_id), 0) from workq.workq_migrations where is_applied`).Scan(&v)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "3F000") { // undefined table or schema: never migrated
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
	return CheckSchemaOf(ctx, q, "workq")
}

// CheckSchemaOf is CheckSchema for q wrapped into schema, naming it: a
// schema never migrated gives the error of workqtype.NotMigratedErr (the
// one message the Client's calls give too), which also matches
// ErrSchemaBehind; one behind gives ErrSchemaBehind with both versions.
func CheckSchemaOf(ctx context.Context, q Querier, schema string) error {
	v, err := SchemaVersion(ctx, q)
	if err != nil {
		return err
	}
	latest := LatestVersion()
	switch {
	case v == 0:
		return workqtype.NotMigratedErr(schema, fmt.Errorf("%w: schema %q is at version 0, this workq needs %d", ErrSchemaBehind, schema, latest))
	case v < latest:
		return fmt.Errorf("%w: the database is at version %d, this workq needs %d: run `%s`", ErrSchemaBehind, v, latest, workqtype.MigrateCommand(schema))
	}
	return nil
}
