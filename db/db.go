// Package db holds workq's schema migrations, embedded into the binary, and
// runs them with goose. The hand-written queries live in db/queries and their
// generated Go in db/gen.
package db

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations returns the embedded migration files (goose SQL format).
func Migrations() fs.FS {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		panic(err) // the embed pattern above guarantees the directory
	}
	return sub
}

// Migrator applies and reverts workq's schema on one database.
type Migrator struct {
	sqlDB    *sql.DB
	provider *goose.Provider
}

// OpenMigrator connects to the database named by dsn (a libpq URL or keyword
// string). Close it when done.
func OpenMigrator(dsn string) (*Migrator, error) {
	sqlDB, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, Migrations())
	if err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	return &Migrator{sqlDB: sqlDB, provider: p}, nil
}

// Close releases the migrator's connections.
func (m *Migrator) Close() error { return m.sqlDB.Close() }

// Up applies every pending migration and returns the version reached.
func (m *Migrator) Up(ctx context.Context) (int64, error) {
	if _, err := m.provider.Up(ctx); err != nil {
		return 0, fmt.Errorf("migrate up: %w", err)
	}
	return m.Version(ctx)
}

// Down reverts the newest applied migration.
func (m *Migrator) Down(ctx context.Context) (int64, error) {
	if _, err := m.provider.Down(ctx); err != nil && !errors.Is(err, goose.ErrNoNextVersion) {
		return 0, fmt.Errorf("migrate down: %w", err)
	}
	return m.Version(ctx)
}

// DownTo reverts migrations until the schema is at version (0 = empty).
func (m *Migrator) DownTo(ctx context.Context, version int64) error {
	if _, err := m.provider.DownTo(ctx, version); err != nil {
		return fmt.Errorf("migrate down to %d: %w", version, err)
	}
	return nil
}

// Version returns the newest applied migration version (0 when none).
func (m *Migrator) Version(ctx context.Context) (int64, error) {
	v, err := m.provider.GetDBVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// MigrationStatus is one migration and whether it is applied.
type MigrationStatus struct {
	Version   int64  `json:"version"`
	Source    string `json:"source"`
	Applied   bool   `json:"applied"`
	AppliedAt string `json:"applied_at,omitempty"`
}

// Status lists every known migration and whether it is applied.
func (m *Migrator) Status(ctx context.Context) ([]MigrationStatus, error) {
	st, err := m.provider.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("migration status: %w", err)
	}
	out := make([]MigrationStatus, 0, len(st))
	for _, s := range st {
		ms := MigrationStatus{Version: s.Source.Version, Source: s.Source.Path, Applied: s.State == goose.StateApplied}
		if ms.Applied {
			ms.AppliedAt = s.AppliedAt.UTC().Format("2006-01-02T15:04:05Z")
		}
		out = append(out, ms)
	}
	return out, nil
}

// MigrateUp is OpenMigrator + Up + Close, for callers that only need the
// schema current.
func MigrateUp(ctx context.Context, dsn string) (int64, error) {
	m, err := OpenMigrator(dsn)
	if err != nil {
		return 0, err
	}
	defer m.Close()
	return m.Up(ctx)
}

// The pgx stdlib driver registers itself as "pgx"; referencing it here keeps
// the import explicit rather than a blank side-effect import.
var _ = stdlib.GetDefaultDriver
