package test

import (
	"context"
	"testing"

	"github.com/workq/workq/internal/db"
	"github.com/workq/workq/internal/testdb"
)

// Every migration must be reversible: up, down to zero (no workq object
// left), and up again.
func TestMigrationsRoundTrip(t *testing.T) {
	ctx := context.Background()
	url := testdb.URL(t) // already migrated from the template
	m, err := db.OpenMigrator(url)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()

	top, err := m.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if top < 1 {
		t.Fatalf("template database at version %d, want >= 1", top)
	}
	if err := m.DownTo(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if v, _ := m.Version(ctx); v != 0 {
		t.Fatalf("after down to 0: version %d", v)
	}
	conn := mustConnect(t, url)
	var left int
	if err := conn.QueryRow(ctx, `select count(*) from pg_class c join pg_namespace n on n.oid = c.relnamespace
		where n.nspname in ('public', 'workq') and c.relname not like 'workq_migrations%'`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d relations left after migrating down to 0", left)
	}
	var fns int
	if err := conn.QueryRow(ctx, `select count(*) from pg_proc p join pg_namespace n on n.oid = p.pronamespace
		where n.nspname in ('public', 'workq')`).Scan(&fns); err != nil {
		t.Fatal(err)
	}
	if fns != 0 {
		t.Fatalf("%d functions left after migrating down to 0", fns)
	}
	v, err := m.Up(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v != top {
		t.Fatalf("up again reached %d, want %d", v, top)
	}
	st, err := m.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if !s.Applied {
			t.Errorf("migration %d (%s) not applied after up", s.Version, s.Source)
		}
	}
}
