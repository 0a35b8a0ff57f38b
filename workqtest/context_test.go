package workqtest_test

import (
	"context"
	"testing"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/workqtest"
)

// A handler run by Work finds the Client in its context, as under the
// Client's worker.
func TestWorkPutsTheClientInTheContext(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	client, err := workq.NewClient(pool, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	var got *workq.Client
	w := workq.WorkFunc(func(ctx context.Context, _ *workq.Job[resultArgs]) error {
		got, err = workq.ClientFromContextSafely(ctx)
		return err
	})
	res := workqtest.Work(ctx, t, client, pool, w, resultArgs{}, nil)
	if res.Err != nil || got != client {
		t.Fatalf("ClientFromContext in the handler: %p, %v; want the Client %p", got, res.Err, client)
	}
}
