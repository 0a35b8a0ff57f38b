package workqtype

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrNotMigrated is matched (errors.Is) by the error of an operation on a
// workq schema that was never migrated, or whose tables are gone: the
// Client's Start, and its enqueue, send, receive, timer and schedule calls,
// all with one message that names the command that migrates it.
var ErrNotMigrated = errors.New("workq schema not migrated")

// notMigratedError says that schema is not migrated; cause is what showed it
// (the database's error, or the version check's).
type notMigratedError struct {
	schema string
	cause  error
}

func (e *notMigratedError) Error() string {
	return fmt.Sprintf("workq: schema %q is not migrated: run `%s` (or Up of package migrate with Options{Schema: %q})",
		e.schema, MigrateCommand(e.schema), e.schema)
}

func (e *notMigratedError) Is(target error) bool { return target == ErrNotMigrated }

func (e *notMigratedError) Unwrap() error { return e.cause }

// NotMigratedErr returns the error that says schema is not migrated,
// matching ErrNotMigrated and wrapping cause.
func NotMigratedErr(schema string, cause error) error {
	return &notMigratedError{schema: schema, cause: cause}
}

// MigrateCommand is the command that migrates schema: `workq migrate up`,
// with --schema when it is not the default (workq).
func MigrateCommand(schema string) string {
	if schema == "" || schema == "workq" {
		return "workq migrate up"
	}
	return "workq migrate up --schema " + schema
}

// NotMigrated returns err as NotMigratedErr(schema, err) when it is
// PostgreSQL saying that schema does not exist (SQLSTATE 3F000) or that a
// relation of schema does not exist (42P01, its message naming
// schema.<relation>); any other error, and nil, as they are. A statement
// of workq names only workq's relations, so these mean that schema was
// never migrated (or was dropped); retrying cannot help until it is.
func NotMigrated(err error, schema string) error {
	var pgErr *pgconn.PgError
	if err == nil || errors.Is(err, ErrNotMigrated) || !errors.As(err, &pgErr) {
		return err
	}
	if schema == "" {
		schema = "workq"
	}
	switch {
	case pgErr.Code == "3F000" && names(pgErr.Message, schema, false),
		pgErr.Code == "42P01" && names(pgErr.Message, schema, true):
		return NotMigratedErr(schema, err)
	}
	return err
}

// names says whether msg names schema (qualified: as the qualifier of a
// relation, schema.), not as the tail of a longer identifier. The message
// may be translated (lc_messages), the names in it are not.
func names(msg, schema string, qualified bool) bool {
	if qualified {
		schema += "."
	}
	for i := 0; ; {
		j := strings.Index(msg[i:], schema)
		if j < 0 {
			return false
		}
		at := i + j
		end := at + len(schema)
		if (at == 0 || !identByte(msg[at-1])) && (qualified || end == len(msg) || !identByte(msg[end])) {
			return true
		}
		i = at + 1
	}
}

func identByte(c byte) bool {
	return c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
