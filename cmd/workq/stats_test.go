package main

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/testdb"
)

// On a database older than the binary's migrations, the inspection commands
// say to migrate instead of failing on a missing table or column.
func TestStatsBeforeMigrateSaysToMigrate(t *testing.T) {
	isolateEnv(t)
	url := testdb.URL(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// One migration back: the schema a binary of the previous release left.
	if _, err := conn.Exec(ctx, `delete from workq.workq_migrations where version_id = (select max(version_id) from workq.workq_migrations)`); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DATABASE_URL", url)
	for _, args := range [][]string{{"stats"}, {"queue", "list"}} {
		_, err := runCLI(t, args...)
		if err == nil || !strings.Contains(err.Error(), "run `workq migrate up`") {
			t.Errorf("%v on an old schema: %v, want a hint to migrate", args, err)
		}
	}
	if _, err := conn.Exec(ctx, `drop table workq.workq_migrations`); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, "stats"); err == nil || !strings.Contains(err.Error(), "is not migrated: run `workq migrate up`") {
		t.Errorf("stats on a database never migrated: %v", err)
	}
}
