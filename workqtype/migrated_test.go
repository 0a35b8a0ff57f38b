package workqtype

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestNotMigrated(t *testing.T) {
	pg := func(code, msg string) error {
		return fmt.Errorf("enqueue: %w", &pgconn.PgError{Code: code, Message: msg})
	}
	cases := []struct {
		name   string
		err    error
		schema string
		want   bool
	}{
		{"relation of the schema", pg("42P01", `relation "workq.job_runs" does not exist`), "workq", true},
		{"default schema given as empty", pg("42P01", `relation "workq.job_runs" does not exist`), "", true},
		{"relation of another schema", pg("42P01", `relation "jobs.job_runs" does not exist`), "workq", false},
		{"schema as the tail of a longer name", pg("42P01", `relation "myworkq.job_runs" does not exist`), "workq", false},
		{"unqualified relation", pg("42P01", `relation "job_runs" does not exist`), "workq", false},
		{"translated message", pg("42P01", `Relation »jobs.outbox« existiert nicht`), "jobs", true},
		{"schema missing", pg("3F000", `schema "jobs" does not exist`), "jobs", true},
		{"another schema missing", pg("3F000", `schema "jobs2" does not exist`), "jobs", false},
		{"another error", pg("23505", `duplicate key value violates unique constraint "workq.x"`), "workq", false},
		{"not a database error", errors.New(`relation "workq.job_runs" does not exist`), "workq", false},
		{"nil", nil, "workq", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := NotMigrated(tc.err, tc.schema)
			if errors.Is(got, ErrNotMigrated) != tc.want {
				t.Fatalf("NotMigrated(%v, %q) = %v; want ErrNotMigrated %v", tc.err, tc.schema, got, tc.want)
			}
			if !tc.want && got != tc.err {
				t.Fatalf("NotMigrated changed an error it does not translate: %v", got)
			}
			if tc.want && !errors.Is(got, tc.err) {
				t.Fatalf("NotMigrated(%v) = %v: does not wrap the cause", tc.err, got)
			}
		})
	}
	if s := NotMigratedErr("jobs", nil).Error(); s != "workq: schema \"jobs\" is not migrated: run `workq migrate up --schema jobs` (or Up of package migrate with Options{Schema: \"jobs\"})" {
		t.Fatalf("message %q", s)
	}
}
