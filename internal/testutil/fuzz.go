package testutil

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/workq/workq/workqtype"
)

// CheckValidateAgrees is the body of the validation fuzz tests: Validate
// (verr) and the write (werr) agree. An input Validate rejects must make the
// write fail with workqtype.ErrInvalid too and leave table's row count alone; an
// input it accepts must be written. write runs the write and returns the new
// row's id; that row is deleted afterwards so that no unique key lingers for
// the next input.
func CheckValidateAgrees(t *testing.T, pool *pgxpool.Pool, table string, input any, verr error, write func() (int64, error)) {
	t.Helper()
	ctx := context.Background()
	count := func() int64 {
		var n int64
		if err := pool.QueryRow(ctx, "select count(*) from workq."+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := count()
	id, err := write()
	if verr != nil {
		if !errors.Is(verr, workqtype.ErrInvalid) || !errors.Is(err, workqtype.ErrInvalid) {
			t.Fatalf("rejected %+v: Validate %v, write %v: want both to wrap workqtype.ErrInvalid", input, verr, err)
		}
		if after := count(); after != before {
			t.Fatalf("a rejected %+v wrote %d rows", input, after-before)
		}
		return
	}
	if err != nil {
		t.Fatalf("Validate accepted %+v but the write failed: %v", input, err)
	}
	if _, err := pool.Exec(ctx, "delete from workq."+table+" where id = $1", id); err != nil {
		t.Fatal(err)
	}
}
