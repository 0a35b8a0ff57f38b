package workq_test

import (
	"context"
	"fmt"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/outbox"
)

// EachShard reads every shard at once, each bounded by a timeout, and
// names the shards that failed: a view of every shard shows the ones that
// answered (here a Client of one database: its one shard, "default").
func ExampleClient_EachShard() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	client, err := workq.NewClient(pool, workq.Config{})
	if err != nil {
		panic(err)
	}
	failed := client.EachShard(ctx, 3*time.Second, func(ctx context.Context, shard *workq.Client) error {
		queues, err := shard.ListQueues(ctx)
		if err == nil {
			fmt.Printf("shard %s: %d queues\n", shard.ShardName(), len(queues))
		}
		return err
	})
	for name, err := range failed {
		fmt.Printf("shard %s did not answer: %v\n", name, err)
	}
	// Output:
	// shard default: 0 queues
}

// QueueControls reads the pauses and limits of every queue without
// counting any item: cheap enough to poll.
func ExampleClient_QueueControls() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	client, err := workq.NewClient(pool, workq.Config{})
	if err != nil {
		panic(err)
	}
	mail := workq.QueueRef{Table: workq.TableJobRuns, Queue: "mail"}
	if _, err := client.PauseQueue(ctx, mail, &workq.ActionOpts{Actor: "ops:alice", Reason: "smtp down"}); err != nil {
		panic(err)
	}
	if err := client.SetQueueLimit(ctx, workq.QueueRef{Table: workq.TableJobRuns, Queue: "bills"}, 5); err != nil {
		panic(err)
	}
	ctl, err := client.QueueControls(ctx)
	if err != nil {
		panic(err)
	}
	for _, q := range ctl {
		fmt.Printf("%s/%s paused=%v by %q", q.Table, q.Queue, q.Paused, q.PausedBy)
		if q.Limit != nil {
			fmt.Printf(" W=%d", *q.Limit)
		}
		fmt.Println()
	}
	// Output:
	// job_runs/bills paused=false by "" W=5
	// job_runs/mail paused=true by "ops:alice"
}

// OutboxKeys lists an outbox queue's partition keys with the head message
// each waits behind; OnlyBlocked keeps the keys a failing head holds up.
func ExampleClient_OutboxKeys() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	client, err := workq.NewClient(pool, workq.Config{})
	if err != nil {
		panic(err)
	}
	for _, key := range []string{"order-2", "order-1", "order-2"} {
		if _, err := client.Send(ctx, outbox.Message{Queue: "hooks", Topic: "order.paid", PartitionKey: key}); err != nil {
			panic(err)
		}
	}
	keys, err := client.OutboxKeys(ctx, workq.OutboxKeysParams{Queue: "hooks"})
	if err != nil {
		panic(err)
	}
	for _, k := range keys {
		fmt.Println(k.PartitionKey, k.Topic, k.State, k.Blocked)
	}
	blocked, err := client.OutboxKeys(ctx, workq.OutboxKeysParams{Queue: "hooks", OnlyBlocked: true})
	fmt.Println(len(blocked), err)
	// Output:
	// order-1 order.paid ready false
	// order-2 order.paid ready false
	// 0 <nil>
}

// ListJoins lists the fan-in joins, newest first, with their progress.
func ExampleClient_ListJoins() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	client, err := workq.NewClient(pool, workq.Config{})
	if err != nil {
		panic(err)
	}
	for _, n := range []int{3, 5} {
		if _, err := client.StartJoin(ctx, outbox.JoinSpec{Expected: n, OnComplete: outbox.JoinMessage{Topic: "batch.done"}}); err != nil {
			panic(err)
		}
	}
	joins, err := client.ListJoins(ctx, workq.ListJoinsParams{OnlyOpen: true})
	if err != nil {
		panic(err)
	}
	for _, j := range joins {
		fmt.Printf("%s: %d of %d ended\n", j.Status, j.Completed+j.Failed, j.Expected)
	}
	// Output:
	// open: 0 of 5 ended
	// open: 0 of 3 ended
}

// QueueDepths, DatabaseTime and EndedBetween are what the dashboard's
// history samples: the backlog from the partial indexes, and the
// attempts that ended since the previous sample by the database's clock.
func ExampleClient_QueueDepths() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()
	client, err := workq.NewClient(pool, workq.Config{})
	if err != nil {
		panic(err)
	}
	for _, who := range []string{"ada", "bob"} {
		if _, err := client.Enqueue(ctx, BillArgs{Customer: who}, &workq.EnqueueOpts{Queue: "bills"}); err != nil {
			panic(err)
		}
	}
	depths, err := client.QueueDepths(ctx)
	if err != nil {
		panic(err)
	}
	for _, d := range depths {
		fmt.Printf("%s/%s ready %d in progress %d\n", d.Table, d.Queue, d.Ready, d.InProgress)
	}
	now, err := client.DatabaseTime(ctx)
	if err != nil {
		panic(err)
	}
	ended, err := client.EndedBetween(ctx, now.Add(-time.Minute), now)
	fmt.Println(len(ended), err)
	// Output:
	// job_runs/bills ready 2 in progress 0
	// 0 <nil>
}
