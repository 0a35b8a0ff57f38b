package dbschema

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/workq/workq/workqtype"
)

func TestValidate(t *testing.T) {
	long := strings.Repeat("a", MaxLen)
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"workq", true},
		{"_x", true},
		{"app_jobs2", true},
		{long, true},
		{long + "a", false},
		{"", false},
		{"2x", false},
		{"Workq", false},
		{"my-schema", false},
		{"a.b", false},
		{`a"b`, false},
		{"pg_workq", false},
		// PostgreSQL's own schemas, and public (the application's)
		{"information_schema", false},
		{"pg_catalog", false},
		{"pg_toast", false},
		{"pg_temp", false},
		{"pg_temp_3", false},
		{"pg_toast_temp_3", false},
		{"public", false},
		{"information_schema2", true},
		{"publications", true},
		{"wörk", false},
	} {
		err := Validate(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("Validate(%q) = %v, want ok %v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidName) {
			t.Errorf("Validate(%q) = %v, not ErrInvalidName", tc.name, err)
		}
		if err != nil && !strings.Contains(err.Error(), strconv.Quote(tc.name)) {
			t.Errorf("Validate(%q) = %v: does not name it", tc.name, err)
		}
	}
	if len(workqtype.NotifyChannel(long, "job_runs")) > 63 {
		t.Errorf("channel of a %d-character schema is %d bytes", MaxLen, len(workqtype.NotifyChannel(long, "job_runs")))
	}
}

func TestRewrite(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"select * from workq.job_runs", `select * from "app".job_runs`},
		{"workq.workq_run_id('job_runs', 1, 2)", `"app".workq_run_id('job_runs', 1, 2)`},
		{"x::workq.workq_name", `x::"app".workq_name`},
		{"'workq.outbox'::regclass", `'"app".outbox'::regclass`},
		{"format('select 1 from workq.%I', t)", `format('select 1 from "app".%I', t)`},
		{"pg_notify('workq_job_runs', q)", "pg_notify('app_job_runs', q)"},
		{"pg_notify('workq_' || t, q)", "pg_notify('app_' || t, q)"},
		// not qualifiers: part of a longer identifier, or already qualified
		{"select myworkq.x, a.workq.y, \"workq\".z", "select myworkq.x, a.workq.y, \"workq\".z"},
		{"select workq_x from t", "select workq_x from t"},
	} {
		if got := Rewrite(tc.in, "app"); got != tc.want {
			t.Errorf("Rewrite(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
		if got := Rewrite(tc.in, Default); got != tc.in {
			t.Errorf("Rewrite(%q, default) changed it to %q", tc.in, got)
		}
	}
}

func TestRewriterCaches(t *testing.T) {
	r, err := NewRewriter("app")
	if err != nil {
		t.Fatal(err)
	}
	const q = "select 1 from workq.job_runs"
	if got := r.Rewrite(q); got != `select 1 from "app".job_runs` {
		t.Fatalf("Rewrite = %q", got)
	}
	if _, ok := r.cache.Load(q); !ok {
		t.Fatal("statement not cached")
	}
	def, err := NewRewriter("")
	if err != nil || def.Schema() != Default || def.Rewrite(q) != q {
		t.Fatalf("default Rewriter: %v %q %q", err, def.Schema(), def.Rewrite(q))
	}
	if _, err := NewRewriter("Bad"); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("NewRewriter(Bad) = %v", err)
	}
	if id := r.Identifier(pgx.Identifier{"workq", "job_runs"}); id[0] != "app" || id[1] != "job_runs" {
		t.Fatalf("Identifier = %v", id)
	}
}

func TestWrap(t *testing.T) {
	r, err := NewRewriter("app")
	if err != nil {
		t.Fatal(err)
	}
	r2, _ := NewRewriter("app")
	if r.cache != r2.cache {
		t.Fatal("two Rewriters of one schema do not share their cache")
	}
	var tx pgx.Tx = &Tx{} // any pgx.Tx
	w := r.Wrap(tx)
	if _, ok := w.(pgx.Tx); !ok {
		t.Fatalf("Wrap(pgx.Tx) = %T, not a pgx.Tx", w)
	}
	if r.Wrap(w) != w {
		t.Fatal("Wrap of a value wrapped for the same schema wrapped it again")
	}
	other, _ := NewRewriter("other")
	if other.Wrap(w) == w {
		t.Fatal("Wrap for another schema returned the value as is")
	}
	def, _ := NewRewriter("")
	if def.Wrap(tx) != tx {
		t.Fatal("the default schema's Wrap did not return its argument")
	}
}
