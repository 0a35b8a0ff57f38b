// Package db holds workq's schema migrations (db/migrations, embedded into
// the binary and run by package migrate), the hand-written queries
// (db/queries) and their generated Go (db/gen). Every object is named
// workq.<name>; package migrate and internal/dbschema put it in the schema
// chosen.
package db

import (
	"context"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/migrate"
)

// Migrations returns the embedded migration files (goose SQL format),
// written for the default schema workq.
func Migrations() fs.FS { return migrate.Files() }

// Migrator applies and reverts workq's schema, in the default schema, on one
// database named by a DSN. Package migrate has the full API (a pool, a
// transaction, another schema, the SQL script).
type Migrator struct {
	conn *pgx.Conn
	*migrate.Migrator
}

// OpenMigrator connects to the database named by dsn (a libpq URL or keyword
// string). Close it when done.
func OpenMigrator(dsn string) (*Migrator, error) {
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	m, err := migrate.New(conn, migrate.Options{})
	if err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	return &Migrator{conn: conn, Migrator: m}, nil
}

// Close releases the migrator's connection.
func (m *Migrator) Close() error { return m.conn.Close(context.Background()) }

// DownTo reverts migrations until the schema is at version (0 = empty).
func (m *Migrator) DownTo(ctx context.Context, version int64) error {
	_, err := m.Migrator.DownTo(ctx, version)
	return err
}

// MigrationStatus is one migration and whether it is applied.
type MigrationStatus = migrate.MigrationStatus

// MigrateUp is OpenMigrator + Up + Close, for callers that only need the
// schema current (in the default schema workq).
func MigrateUp(ctx context.Context, dsn string) (int64, error) {
	m, err := OpenMigrator(dsn)
	if err != nil {
		return 0, err
	}
	defer m.Close()
	return m.Up(ctx)
}
