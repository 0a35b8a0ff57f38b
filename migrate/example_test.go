package migrate_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/migrate"
)

// examplePool is a pool on a new database without workq in it, and its
// cleanup.
func examplePool() (*pgxpool.Pool, func()) {
	pool, done := testdb.ExamplePool()
	if _, err := pool.Exec(context.Background(), `drop schema workq cascade`); err != nil {
		panic(err)
	}
	return pool, done
}

// Migrate workq into a schema of its own on the application's pool.
func ExampleMigrator_Up() {
	ctx := context.Background()
	pool, done := examplePool()
	defer done()

	m, err := migrate.New(pool, migrate.Options{Schema: "jobs"})
	if err != nil {
		fmt.Println(err)
		return
	}
	v, err := m.Up(ctx)
	fmt.Println(v == migrate.Latest(), err)
	// Output: true <nil>
}

// Migrate inside the application's own transaction: workq's schema commits
// or rolls back with the application's migration.
func ExampleMigrator_Up_transaction() {
	ctx := context.Background()
	pool, done := examplePool()
	defer done()

	tx, err := pool.Begin(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `create table orders (id bigint primary key)`); err != nil {
		fmt.Println(err)
		return
	}
	m, err := migrate.New(tx, migrate.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := m.Up(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(tx.Commit(ctx))
	// Output: <nil>
}

// Print the SQL for a migration tool of your own (workq migrate sql).
func ExampleMigrator_SQL() {
	m, err := migrate.New(nil, migrate.Options{Schema: "jobs"}) // no database needed
	if err != nil {
		fmt.Println(err)
		return
	}
	script, err := m.SQL(0, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(strings.Contains(script, `create table "jobs".job_runs`))
	// Output: true
}

// Revert to an earlier version, and read the version and the status.
func ExampleMigrator_DownTo() {
	ctx := context.Background()
	pool, done := examplePool()
	defer done()

	m, err := migrate.New(pool, migrate.Options{})
	if err == nil {
		_, err = m.Up(ctx)
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(m.DownTo(ctx, 2))
	fmt.Println(m.Version(ctx))
	st, _ := m.Status(ctx)
	fmt.Println(st[1].Version, st[1].Applied, st[2].Version, st[2].Applied)
	// Output:
	// 2 <nil>
	// 2 <nil>
	// 2 true 3 false
}

// A schema name workq refuses fails before anything is touched.
func ExampleNew_invalidSchema() {
	_, err := migrate.New(nil, migrate.Options{Schema: "My-Jobs"})
	fmt.Println(err)
	// Output: migrate: invalid schema name "My-Jobs": want a lowercase letter or _ first, then lowercase letters, digits or _
}
