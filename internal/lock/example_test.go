package lock_test

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq/internal/lock"
	"github.com/workq/workq/internal/testdb"
)

// A singleton task: whoever holds the lock runs it, under the lock's
// context, which ends when the lock is lost; its writes are fenced by the
// token.
func Example() {
	ctx := context.Background()
	url, drop, err := testdb.NewDatabase()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer drop()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()

	l, err := lock.Acquire(ctx, pool, "nightly-report", lock.Options{TTL: 10 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Release(ctx)

	// Work under l.Context(): it is cancelled if the lock is lost.
	_, err = pool.Exec(l.Context(), `create table report_runs (token bigint)`)
	if err == nil {
		_, err = pool.Exec(l.Context(), `insert into report_runs (token)
			select $2 where exists (select 1 from workq.workq_locks
			                        where name = $1 and token = $2 and expires_at > clock_timestamp() for share)`,
			l.Name(), l.Token())
	}
	fmt.Println("fenced write:", err, "token:", l.Token())
	// Output: fenced write: <nil> token: 1
}
