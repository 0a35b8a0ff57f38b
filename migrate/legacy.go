package migrate

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/db/migrations"
	"github.com/workq/workq/internal/dbschema"
)

// Functions created by migrations: create [or replace] function <schema>.<name>.
var createFunction = regexp.MustCompile(`(?i)^((?:\s*--[^\n]*\n)*\s*)create\s+(?:or\s+replace\s+)?function\s+"?[a-z0-9_]+"?\.([a-z0-9_]+)`)

// errNotWorkqs is returned (wrapped) when public holds workq's old layout
// beside a table of a workq table's name that is not workq's: adopting
// would have to move it or leave workq without that table.
var errNotWorkqs = errors.New("is not workq's")

// legacyLayout says whether public holds workq's objects of the layout
// before schema isolation. It looks for what only workq creates, never for
// table names alone (an application may have its own job_runs or outbox):
// the domain workq_name over text, workq's functions workq_table_code,
// workq_run_id and workq_claim_budget with their signatures, and a
// public.job_runs with workq's lease columns (owner_token, locked_until,
// lease_version) whose queue is of that domain. All of them exist from
// workq's first migration on.
func legacyLayout(ctx context.Context, tx pgx.Tx) (bool, error) {
	var found bool
	err := tx.QueryRow(ctx, `select
		exists (select 1 from pg_type where typnamespace = 'public'::regnamespace and typname = 'workq_name'
			and typtype = 'd' and typbasetype = 'text'::regtype)
		and to_regprocedure('public.workq_table_code(text)') is not null
		and to_regprocedure('public.workq_run_id(text, bigint, bigint)') is not null
		and to_regprocedure('public.workq_claim_budget(text, text, integer)') is not null
		and (select count(*) from pg_attribute a
			where a.attrelid = to_regclass('public.job_runs') and a.attnum > 0 and not a.attisdropped
			and (a.attname = 'owner_token' and a.atttypid = 'uuid'::regtype
				or a.attname = 'locked_until' and a.atttypid = 'timestamptz'::regtype
				or a.attname = 'lease_version' and a.atttypid = 'int8'::regtype
				or a.attname = 'queue' and a.atttypid = to_regtype('public.workq_name'))) = 4`).Scan(&found)
	if err != nil {
		return false, fmt.Errorf("migrate: look for the old layout in public: %w", err)
	}
	return found, nil
}

// legacyVersions returns workq's versions applied to the old layout, from
// public.goose_db_version (the newest row of each version wins, as in
// goose).
func (m *Migrator) legacyVersions(ctx context.Context, tx pgx.Tx) ([]int64, error) {
	var hasTable bool
	if err := tx.QueryRow(ctx, `select to_regclass('public.goose_db_version') is not null`).Scan(&hasTable); err != nil {
		return nil, fmt.Errorf("migrate: look for public.goose_db_version: %w", err)
	}
	var versions []int64
	if hasTable {
		known := make([]int64, len(m.migs))
		for i, mig := range m.migs {
			known[i] = mig.version
		}
		rows, err := tx.Query(ctx, `select version_id from (
			select distinct on (version_id) version_id, is_applied from public.goose_db_version
			where version_id = any($1) order by version_id, id desc) v
			where is_applied order by version_id`, known)
		if err != nil {
			return nil, fmt.Errorf("migrate: read public.goose_db_version: %w", err)
		}
		if versions, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
			return nil, fmt.Errorf("migrate: read public.goose_db_version: %w", err)
		}
	}
	if len(versions) == 0 || versions[0] != 1 {
		return nil, fmt.Errorf("migrate: public holds workq's objects of the layout before schema isolation (the domain workq_name, " +
			"its functions and public.job_runs with its lease columns), but public.goose_db_version does not record workq's " +
			"migration 1, so their version is unknown: record the versions that were applied in public.goose_db_version " +
			"(docs/operations.md, \"Upgrading\")")
	}
	return versions, nil
}

// adopt moves a database of the layout before schema isolation into the
// Migrator's schema, inside tx (which has just created the version table,
// and applies the pending migrations after adopt returns: the move commits
// with them or not at all). It moves nothing unless public holds workq's
// own objects (legacyLayout), and then only what is workq's: the tables,
// domains and functions that workq's migrations, as applied to public,
// create. To know them it applies those migrations to a scratch schema in a
// savepoint it rolls back, and compares: a public table of a workq table's
// name must have every column of workq's, with the same type (or adopt
// fails, naming it, and nothing is moved); a function moves only with
// workq's argument types. Every workq table (with its indexes,
// constraints, triggers and identity sequences), the workq_name domain and
// every workq function move with ALTER ... SET SCHEMA; the functions are
// then redefined from the migrations as of the database's version, because
// their bodies named tables and functions unqualified (found through
// search_path, which need not contain the schema). CREATE OR REPLACE keeps
// each function's identity, so the triggers that call them stay attached.
// The applied versions are copied into the version table; goose_db_version
// is left as it is (an application may share it).
func (m *Migrator) adopt(ctx context.Context, tx pgx.Tx) error {
	legacy, err := legacyLayout(ctx, tx)
	if err != nil || !legacy {
		return err
	}
	versions, err := m.legacyVersions(ctx, tx)
	if err != nil {
		return err
	}
	upTo := versions[len(versions)-1]
	schema := m.r.Schema()

	ref, err := m.reference(ctx, tx, versions)
	if err != nil {
		return err
	}
	// The tables to move: every public table of a workq table's name, each
	// checked against workq's.
	var tables []string
	for name, cols := range ref.tables {
		have, err := columns(ctx, tx, "public", name)
		if err != nil {
			return err
		}
		if have == nil {
			// Its versions are recorded as applied, so no later migration
			// would create it: the workq found there is incomplete.
			return fmt.Errorf("migrate: public holds workq's old layout at version %d, but its table public.%s is missing. "+
				"Restore it (or drop the old layout), then run the upgrade again (nothing was changed)", upTo, name)
		}
		var wrong []string
		for col, typ := range cols {
			if got, ok := have[col]; !ok {
				wrong = append(wrong, col+" (missing)")
			} else if got != typ {
				wrong = append(wrong, fmt.Sprintf("%s (%s, workq's is %s)", col, got, typ))
			}
		}
		if len(wrong) > 0 {
			slices.Sort(wrong)
			return fmt.Errorf("migrate: public holds workq's old layout, but public.%s %w: it lacks workq's columns %s. "+
				"Rename or move the application's table, then run the upgrade again (nothing was changed)",
				name, errNotWorkqs, strings.Join(wrong, ", "))
		}
		tables = append(tables, name)
	}
	slices.Sort(tables)

	var stmts []string
	for _, t := range tables {
		stmts = append(stmts, fmt.Sprintf("alter table %s set schema %s", pgx.Identifier{"public", t}.Sanitize(), m.schemaIdent()))
	}
	for _, d := range ref.domains {
		stmts = append(stmts, fmt.Sprintf("alter domain %s set schema %s", pgx.Identifier{"public", d}.Sanitize(), m.schemaIdent()))
	}
	rows, err := tx.Query(ctx, `select format('alter function public.%I(%s) set schema %I', p.proname,
			pg_get_function_identity_arguments(p.oid), $2::text)
		from pg_proc p where p.pronamespace = 'public'::regnamespace
		and p.proname || '(' || `+argTypes+` || ')' = any($1) order by 1`, ref.funcs, schema)
	if err != nil {
		return fmt.Errorf("migrate: list workq's functions in public: %w", err)
	}
	fstmts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("migrate: list workq's functions in public: %w", err)
	}
	stmts = append(stmts, fstmts...)
	for _, s := range stmts {
		if _, err := tx.Exec(ctx, s); err != nil {
			return fmt.Errorf("migrate: move to schema %s: %s: %w", schema, s, err)
		}
	}

	// Redefine the moved functions as of upTo.
	var funcs []string
	funcDefs := map[string]string{} // name -> latest definition up to upTo
	for _, mig := range m.migs {
		if mig.version > upTo {
			break
		}
		for _, s := range mig.up {
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
		m.log.Info("migrate: moving workq from public into its schema", "schema", schema, "version", upTo, "tables", len(tables))
	}
	return nil
}

// argTypes is the SQL of a pg_proc p's argument type names, comma
// separated, without schemas (workq's functions in public and in the
// scratch schema compare equal).
const argTypes = `coalesce((select string_agg(t.typname, ',' order by a.n)
	from unnest(p.proargtypes::oid[]) with ordinality a(oid, n) join pg_type t on t.oid = a.oid), '')`

// refObjects is what workq's migrations create: each table's columns
// (name -> type name), the domains, and the functions as name(argtypes).
type refObjects struct {
	tables  map[string]map[string]string
	domains []string
	funcs   []string
}

// reference applies the migrations of versions to a scratch schema in a
// savepoint of tx, reads what they created, and rolls the savepoint back.
func (m *Migrator) reference(ctx context.Context, tx pgx.Tx, versions []int64) (refObjects, error) {
	out := refObjects{tables: map[string]map[string]string{}}
	migs, err := parseAll(migrations.Files)
	if err != nil {
		return out, err
	}
	sp, err := tx.Begin(ctx)
	if err != nil {
		return out, fmt.Errorf("migrate: scratch schema: %w", err)
	}
	defer sp.Rollback(ctx) //nolint:errcheck // rolled back on every path: the scratch schema is never kept
	var scratch string
	if err := sp.QueryRow(ctx, `select 'workq_adopt_' || txid_current()`).Scan(&scratch); err != nil {
		return out, fmt.Errorf("migrate: scratch schema: %w", err)
	}
	if _, err := sp.Exec(ctx, `create schema `+pgx.Identifier{scratch}.Sanitize()); err != nil {
		return out, fmt.Errorf("migrate: scratch schema: %w", err)
	}
	for _, mig := range migs {
		if !slices.Contains(versions, mig.version) {
			continue
		}
		for _, s := range mig.up {
			if _, err := sp.Exec(ctx, plainIndex(dbschema.Rewrite(s, scratch))); err != nil {
				return out, fmt.Errorf("migrate: apply %s to a scratch schema: %w", mig.name, err)
			}
		}
	}
	rows, err := sp.Query(ctx, `select c.relname, a.attname, t.typname
		from pg_class c join pg_attribute a on a.attrelid = c.oid join pg_type t on t.oid = a.atttypid
		where c.relnamespace = $1::regnamespace and c.relkind in ('r', 'p') and not c.relispartition
		and a.attnum > 0 and not a.attisdropped`, scratch)
	if err != nil {
		return out, fmt.Errorf("migrate: read the scratch schema: %w", err)
	}
	var table, col, typ string
	if _, err := pgx.ForEachRow(rows, []any{&table, &col, &typ}, func() error {
		if out.tables[table] == nil {
			out.tables[table] = map[string]string{}
		}
		out.tables[table][col] = typ
		return nil
	}); err != nil {
		return out, fmt.Errorf("migrate: read the scratch schema: %w", err)
	}
	rows, err = sp.Query(ctx, `select typname from pg_type where typnamespace = $1::regnamespace and typtype = 'd' order by 1`, scratch)
	if err != nil {
		return out, fmt.Errorf("migrate: read the scratch schema: %w", err)
	}
	if out.domains, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		return out, fmt.Errorf("migrate: read the scratch schema: %w", err)
	}
	rows, err = sp.Query(ctx, `select p.proname || '(' || `+argTypes+` || ')' from pg_proc p
		where p.pronamespace = $1::regnamespace order by 1`, scratch)
	if err != nil {
		return out, fmt.Errorf("migrate: read the scratch schema: %w", err)
	}
	if out.funcs, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		return out, fmt.Errorf("migrate: read the scratch schema: %w", err)
	}
	return out, nil
}

// columns returns the columns of schema.table (name -> type name), nil when
// there is no such table.
func columns(ctx context.Context, tx pgx.Tx, schema, table string) (map[string]string, error) {
	rows, err := tx.Query(ctx, `select a.attname, t.typname
		from pg_class c join pg_attribute a on a.attrelid = c.oid join pg_type t on t.oid = a.atttypid
		where c.relnamespace = $1::regnamespace and c.relname = $2 and c.relkind in ('r', 'p')
		and a.attnum > 0 and not a.attisdropped`, pgx.Identifier{schema}.Sanitize(), table)
	if err != nil {
		return nil, fmt.Errorf("migrate: read the columns of %s.%s: %w", schema, table, err)
	}
	var out map[string]string
	var col, typ string
	if _, err := pgx.ForEachRow(rows, []any{&col, &typ}, func() error {
		if out == nil {
			out = map[string]string{}
		}
		out[col] = typ
		return nil
	}); err != nil {
		return nil, fmt.Errorf("migrate: read the columns of %s.%s: %w", schema, table, err)
	}
	return out, nil
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
