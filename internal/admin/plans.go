package admin

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/workq/workq/workqtype"
)

// customPlans runs every statement with its parameters bound at planning
// (pgx.QueryExecModeExec: an unnamed statement, planned anew each time).
// The page statements have optional filters ("$n is null or column = $n"),
// and a status filter can use a table's failed index only when the planner
// sees the status: a cached prepared statement may switch to a generic plan
// after five executions, which would walk the primary key past every done
// row instead. Operator statements are rare; planning each costs little.
type customPlans struct{ db workqtype.DB }

func (c customPlans) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return c.db.Exec(ctx, sql, append([]any{pgx.QueryExecModeExec}, args...)...)
}

func (c customPlans) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return c.db.Query(ctx, sql, append([]any{pgx.QueryExecModeExec}, args...)...)
}

func (c customPlans) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return c.db.QueryRow(ctx, sql, append([]any{pgx.QueryExecModeExec}, args...)...)
}
