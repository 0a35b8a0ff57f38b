package lease_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/workq/workq/internal/lease"
)

// The shared lease statements (db/queries/lease.sql) are type-checked by
// sqlc against the template table in db/template/lease_table.sql and run on
// every registered work table. That is sound only while every table has each
// template column with the same type, nullability and domain: this test
// reads the template's columns from its file and the tables' from the
// migrated database.
func TestEveryWorkTableHasTheLeaseTemplateColumns(t *testing.T) {
	e := newLeaseDB(t, 2)
	b, err := os.ReadFile(filepath.Join("..", "..", "db", "template", "lease_table.sql"))
	if err != nil {
		t.Fatal(err)
	}
	body := string(b)
	start := strings.Index(body, "create table workq.workq_lease_table (")
	if start < 0 {
		t.Fatal("lease_table.sql has no create table workq_lease_table")
	}
	body = body[start+len("create table workq.workq_lease_table ("):]
	body = body[:strings.Index(body, ");")]
	col := regexp.MustCompile(`^\s*(\w+)\s+(?:workq\.)?(\w+)(.*)$`)
	type column struct{ typ, notNull string }
	want := map[string]column{}
	for _, line := range strings.Split(body, "\n") {
		m := col.FindStringSubmatch(strings.TrimSuffix(strings.TrimSpace(line), ","))
		if m == nil {
			continue
		}
		want[m[1]] = column{typ: m[2], notNull: map[bool]string{true: "not null", false: "null"}[strings.Contains(m[3], "not null") || strings.Contains(m[3], "primary key")]}
	}
	if len(want) < 10 {
		t.Fatalf("read %d template columns from lease_table.sql, expected all the lease columns", len(want))
	}
	for _, tb := range lease.Tables {
		rows, err := e.pool.Query(e.ctx, `
			select a.attname, coalesce(d.typname, t.typname), case when a.attnotnull then 'not null' else 'null' end
			from pg_attribute a
			join pg_type t on t.oid = a.atttypid
			left join pg_type d on d.oid = t.oid and t.typtype = 'd'
			where a.attrelid = $1::regclass and a.attnum > 0 and not a.attisdropped`, "workq."+string(tb))
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]column{}
		for rows.Next() {
			var name string
			var c column
			if err := rows.Scan(&name, &c.typ, &c.notNull); err != nil {
				t.Fatal(err)
			}
			got[name] = c
		}
		rows.Close()
		for name, w := range want {
			g, ok := got[name]
			w.typ = pgTypeName(w.typ)
			switch {
			case !ok:
				t.Errorf("%s has no column %s, which the shared lease statements use", tb, name)
			case g.typ != w.typ || g.notNull != w.notNull:
				t.Errorf("%s.%s is %s %s, the template says %s %s", tb, name, g.typ, g.notNull, w.typ, w.notNull)
			}
		}
	}
}

// pgTypeName maps the SQL spelling used in the template to pg_type.typname.
func pgTypeName(sql string) string {
	switch sql {
	case "bigint":
		return "int8"
	case "integer":
		return "int4"
	case "smallint":
		return "int2"
	}
	return sql
}

// A done row is inserted into its done table as the work table's row type
// (workq_done_rows), by position: every <table>_done must have exactly its
// work table's columns, in the same order and of the same types. A
// migration that adds a column to a work table adds it to the done table
// too (ALTER TABLE on the partitioned done table reaches its partitions).
func TestEveryDoneTableHasItsWorkTablesColumns(t *testing.T) {
	e := newLeaseDB(t, 2)
	columns := func(table string) []string {
		t.Helper()
		rows, err := e.pool.Query(e.ctx, `
			select a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
			from pg_attribute a
			where a.attrelid = $1::regclass and a.attnum > 0 and not a.attisdropped
			order by a.attnum`, "workq."+table)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var c string
			if err := rows.Scan(&c); err != nil {
				t.Fatal(err)
			}
			out = append(out, c)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, tb := range lease.Tables {
		work, done := columns(string(tb)), columns(string(tb)+"_done")
		if tb == lease.JobRuns {
			if all := columns("job_runs_all"); strings.Join(work, ", ") != strings.Join(all, ", ") {
				t.Errorf("the view job_runs_all's columns differ from job_runs':\n  work: %s\n  view: %s",
					strings.Join(work, ", "), strings.Join(all, ", "))
			}
		}
		if len(work) < 10 {
			t.Fatalf("%s: read %d columns", tb, len(work))
		}
		if strings.Join(work, ", ") != strings.Join(done, ", ") {
			t.Errorf("%s_done's columns differ from %s's:\n  work: %s\n  done: %s", tb, tb,
				strings.Join(work, ", "), strings.Join(done, ", "))
		}
	}
}

// workq_done_rows (migration 00029, what LeaseComplete builds done rows
// with) and workq_done_row (kept for the previous release's completions
// during an upgrade) must make the same done row of any work row: a
// migration that adds a column to a work table rewrites both, or a worker
// of the previous release fails every completion of that table. Checked
// on a row with every column set to a value of its own, from the catalog,
// with an output and without one.
func TestDoneRowFunctionsAgree(t *testing.T) {
	e := newLeaseDB(t, 2)
	samples := map[string]func(i int) any{
		"bigint":                   func(i int) any { return 1000 + i },
		"integer":                  func(i int) any { return 100 + i },
		"smallint":                 func(i int) any { return i },
		"boolean":                  func(i int) any { return i%2 == 0 },
		"text":                     func(i int) any { return fmt.Sprintf("text %d", i) },
		"workq.workq_name":         func(i int) any { return fmt.Sprintf("name%d", i) },
		"jsonb":                    func(i int) any { return map[string]int{"column": i} },
		"bytea":                    func(i int) any { return fmt.Sprintf(`\x%02x`, i) },
		"uuid":                     func(i int) any { return fmt.Sprintf("00000000-0000-0000-0000-%012d", i) },
		"timestamp with time zone": func(i int) any { return fmt.Sprintf("2026-01-%02dT10:00:00Z", 1+i%28) },
	}
	for _, tb := range lease.Tables {
		t.Run(string(tb), func(t *testing.T) {
			rows, err := e.pool.Query(e.ctx, `
				select a.attname, format_type(a.atttypid, a.atttypmod) from pg_attribute a
				where a.attrelid = $1::regclass and a.attnum > 0 and not a.attisdropped order by a.attnum`, "workq."+string(tb))
			if err != nil {
				t.Fatal(err)
			}
			row := map[string]any{}
			for i := 0; rows.Next(); i++ {
				var name, typ string
				if err := rows.Scan(&name, &typ); err != nil {
					t.Fatal(err)
				}
				sample, ok := samples[typ]
				if !ok {
					t.Fatalf("column %s.%s has type %s, which this test has no sample value for: add one", tb, name, typ)
				}
				row[name] = sample(i)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			value, err := json.Marshal(row)
			if err != nil {
				t.Fatal(err)
			}
			for _, output := range []*string{nil, ptr(`{"output": 1}`)} {
				var same bool
				var rowsText, rowText string
				err := e.pool.QueryRow(e.ctx, fmt.Sprintf(`
					select (select x from workq.workq_done_rows(r, $2::jsonb) x) is not distinct from workq.workq_done_row(r, $2::jsonb),
					       (select x from workq.workq_done_rows(r, $2::jsonb) x)::text, workq.workq_done_row(r, $2::jsonb)::text
					from jsonb_populate_record(null::workq.%s, $1::jsonb) r`, tb), value, output).Scan(&same, &rowsText, &rowText)
				if err != nil {
					t.Fatal(err)
				}
				if !same {
					t.Errorf("output %v: the done row functions differ:\n  workq_done_rows: %s\n  workq_done_row:  %s", output, rowsText, rowText)
				}
			}
		})
	}
}
