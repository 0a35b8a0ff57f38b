package workq_test

import (
	"context"
	"fmt"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
)

// Ready is a readiness probe's check: every database answers and its
// schema is migrated.
func ExampleClient_Ready() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	client, err := workq.NewClient(pool, workq.Config{})
	if err != nil {
		panic(err)
	}
	v, err := client.Ready(context.Background())
	fmt.Println(v > 0, err)
	// Output:
	// true <nil>
}
