package lease_test

import (
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
	body = body[start+len("create table workq.workq_lease_table (") : strings.LastIndex(body, ");")]
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
