package workq_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/outbox"
)

// The filters of one table's own columns: an outbox message's partition
// key (and its message id), an inbox message's source, a timer's due
// time. Each is its table's only: on another table List's error matches
// ErrInvalid and names it.
func ExampleListParams_kindFilters() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	client, err := workq.NewClient(pool, workq.Config{})
	if err != nil {
		panic(err)
	}
	var last outbox.Sent
	for i, key := range []string{"order-1", "order-2", "order-1"} {
		last, err = client.Send(ctx, outbox.Message{Topic: "order.changed", PartitionKey: key, Payload: map[string]int{"n": i}})
		if err != nil {
			panic(err)
		}
	}
	page, err := client.List(ctx, workq.ListParams{Table: workq.TableOutbox, PartitionKey: "order-1", Order: workq.OldestFirst})
	if err != nil {
		panic(err)
	}
	for _, it := range page.Items {
		fmt.Println(it.ID, it.Details["partition_key"], it.Details["key_seq"], string(it.Payload))
	}
	page, err = client.List(ctx, workq.ListParams{Table: workq.TableOutbox, MessageID: last.MessageID})
	if err != nil {
		panic(err)
	}
	fmt.Println("by message id:", page.Items[0].ID)
	_, err = client.List(ctx, workq.ListParams{Table: workq.TableTimers, PartitionKey: "order-1"})
	fmt.Println(errors.Is(err, workq.ErrInvalid))
	// Output:
	// 1 order-1 1 {"n": 0}
	// 3 order-1 2 {"n": 2}
	// by message id: 3
	// true
}
