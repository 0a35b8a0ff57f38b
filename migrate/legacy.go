package migrate

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Objects named in migrations: create table/domain/function <schema>.<name>.
var (
	createTable    = regexp.MustCompile(`(?i)\bcreate\s+table\s+(?:if\s+not\s+exists\s+)?"?[a-z0-9_]+"?\.([a-z0-9_]+)`)
	createDomain   = regexp.MustCompile(`(?i)\bcreate\s+domain\s+"?[a-z0-9_]+"?\.([a-z0-9_]+)`)
	createFunction = regexp.MustCompile(`(?i)^((?:\s*--[^\n]*\n)*\s*)create\s+(?:or\s+replace\s+)?function\s+"?[a-z0-9_]+"?\.([a-z0-9_]+)`)
)

// adopt moves a database of the layout before schema isolation into the
// Migrator's schema, inside tx (which has just created the version table):
// when public.goose_db_version records workq migrations and public.job_runs
// exists. Every workq table (with its indexes, constraints, triggers and
// identity sequences), the workq_name domain and every workq function move
// with ALTER ... SET SCHEMA; the functions are then redefined from the
// migrations as of the database's version, because their bodies named
// tables and functions unqualified (found through search_path, which need
// not contain the schema). CREATE OR REPLACE keeps each function's identity,
// so the triggers that call them stay attached. The applied versions are
// copied into the version table; goose_db_version is left as it is (an
// application may share it).
func (m *Migrator) adopt(ctx context.Context, tx pgx.Tx) error {
	var legacy bool
	if err := tx.QueryRow(ctx, `select to_regclass('public.goose_db_version') is not null
		and to_regclass('public.job_runs') is not null`).Scan(&legacy); err != nil {
		return fmt.Errorf("migrate: look for the old layout: %w", err)
	}
	if !legacy {
		return nil
	}
	known := make([]int64, len(m.migs))
	for i, mig := range m.migs {
		known[i] = mig.version
	}
	rows, err := tx.Query(ctx, `select version_id from (
		select distinct on (version_id) version_id, is_applied from public.goose_db_version
		where version_id = any($1) order by version_id, id desc) v
		where is_applied order by version_id`, known)
	if err != nil {
		return fmt.Errorf("migrate: read public.goose_db_version: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return fmt.Errorf("migrate: read public.goose_db_version: %w", err)
	}
	if len(versions) == 0 || versions[0] != 1 {
		return nil // public.job_runs is not workq's (its first migration is not recorded)
	}
	upTo := versions[len(versions)-1]
	schema := m.r.Schema()

	var tables, domains, funcs []string
	funcDefs := map[string]string{} // name -> latest definition up to upTo
	for _, mig := range m.migs {
		if mig.version > upTo {
			break
		}
		for _, s := range mig.up {
			for _, mm := range createTable.FindAllStringSubmatch(s, -1) {
				tables = append(tables, mm[1])
			}
			for _, mm := range createDomain.FindAllStringSubmatch(s, -1) {
				domains = append(domains, mm[1])
			}
			if mm := createFunction.FindStringSubmatchIndex(s); mm != nil {
				name := s[mm[4]:mm[5]]
				funcs = append(funcs, name)
				// as CREATE OR REPLACE, after any leading comments
				body := s[mm[3]:]
				body = body[strings.Index(strings.ToLower(body), "function"):]
				funcDefs[name] = "create or replace " + body
			}
		}
	}
	moves := []struct{ kind, query string }{
		{"table", `select format('alter table public.%I set schema %I', c.relname, $2::text) from pg_class c
			where c.relnamespace = 'public'::regnamespace and c.relkind in ('r', 'p') and c.relname = any($1)`},
		{"domain", `select format('alter domain public.%I set schema %I', t.typname, $2::text) from pg_type t
			where t.typnamespace = 'public'::regnamespace and t.typtype = 'd' and t.typname = any($1)`},
		{"function", `select format('alter function public.%I(%s) set schema %I', p.proname,
				pg_get_function_identity_arguments(p.oid), $2::text) from pg_proc p
			where p.pronamespace = 'public'::regnamespace and p.proname = any($1)`},
	}
	names := [][]string{tables, domains, funcs}
	for i, mv := range moves {
		rows, err := tx.Query(ctx, mv.query, names[i], schema)
		if err != nil {
			return fmt.Errorf("migrate: list old %ss: %w", mv.kind, err)
		}
		stmts, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("migrate: list old %ss: %w", mv.kind, err)
		}
		for _, s := range stmts {
			if _, err := tx.Exec(ctx, s); err != nil {
				return fmt.Errorf("migrate: move to schema %s: %s: %w", schema, s, err)
			}
		}
	}
	for _, name := range uniq(funcs) {
		var exists bool
		if err := tx.QueryRow(ctx, `select exists (select 1 from pg_proc where pronamespace = $1::regnamespace and proname = $2)`,
			m.schemaIdent(), name).Scan(&exists); err != nil {
			return fmt.Errorf("migrate: look for function %s: %w", name, err)
		}
		if !exists {
			continue // dropped by a later migration
		}
		if _, err := tx.Exec(ctx, funcDefs[name]); err != nil {
			return fmt.Errorf("migrate: redefine function %s.%s: %w", schema, name, err)
		}
	}
	for _, v := range versions {
		if _, err := tx.Exec(ctx, `insert into `+m.versionTable()+` (version_id, is_applied) values ($1, true)`, v); err != nil {
			return fmt.Errorf("migrate: record version %d: %w", v, err)
		}
	}
	if m.log != nil {
		m.log.Info("migrate: moved workq from public into its schema", "schema", schema, "version", upTo)
	}
	return nil
}

func uniq(s []string) []string {
	seen := map[string]bool{}
	out := s[:0:0]
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
