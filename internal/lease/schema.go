package lease

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

// IsSchemaMissing reports whether err is the database saying that a table,
// column, function or type of workq's schema does not exist: the database
// was never migrated (`workq migrate up`), or its schema was dropped or
// rolled back to an older version under a running process. Retrying the
// statement cannot help until someone migrates.
func IsSchemaMissing(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "42P01", // undefined_table
		"42883", // undefined_function
		"42703", // undefined_column
		"42704": // undefined_object (a type)
		return true
	}
	return false
}
