package workq_test

import (
	"context"
	"fmt"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/outbox"
)

// A sharded Client serves one logical queue over two databases: keyed
// work goes to its key's shard, work in the caller's transaction to the
// database of that transaction (here the tenant's), and one set of
// workers drains both.
func ExampleNewShardedClient() {
	ctx := context.Background()
	eu, dropEU := testdb.ExamplePool() // two migrated databases
	defer dropEU()
	us, dropUS := testdb.ExamplePool()
	defer dropUS()

	done := make(chan string, 2)
	workers := workq.NewWorkers()
	workq.AddWorker(workers, workq.WorkFunc(func(ctx context.Context, job *workq.Job[EmailArgs]) error {
		done <- job.Args.To
		return nil
	}))
	client, err := workq.NewShardedClient([]workq.Shard{{Name: "eu", Pool: eu}, {Name: "us", Pool: us}},
		workq.Config{Workers: workers})
	if err != nil {
		panic(err)
	}
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	defer client.Stop(ctx)

	// Keyed: a dedup key places the job; the same key always goes to the
	// same shard, so it dedups across the shards.
	first, err := client.Enqueue(ctx, EmailArgs{To: "ada@example.com"}, &workq.EnqueueOpts{DedupKey: "welcome:ada"})
	if err != nil {
		panic(err)
	}
	again, err := client.Enqueue(ctx, EmailArgs{To: "ada@example.com"}, &workq.EnqueueOpts{DedupKey: "welcome:ada"})
	if err != nil {
		panic(err)
	}
	fmt.Println("same shard:", first.Shard == again.Shard, "duplicate:", again.Duplicate)

	// In the application's transaction: its tenant's database is the shard.
	tenantDB := map[string]string{"acme": "us"}
	shard, err := client.Shard(tenantDB["acme"])
	if err != nil {
		panic(err)
	}
	tx, err := shard.Pool().Begin(ctx)
	if err != nil {
		panic(err)
	}
	// ... the tenant's business writes in tx ...
	if _, err := shard.SendTx(ctx, tx, outbox.Message{Topic: "order.created", PartitionKey: "order-42"}); err != nil {
		panic(err)
	}
	res, err := shard.EnqueueTx(ctx, tx, EmailArgs{To: "bob@acme.example"}, nil)
	if err != nil {
		panic(err)
	}
	later, err := shard.EnqueueTx(ctx, tx, EmailArgs{To: "bob@acme.example"}, &workq.EnqueueOpts{Delay: time.Hour})
	if err != nil {
		panic(err)
	}
	if err := tx.Commit(ctx); err != nil {
		panic(err)
	}
	fmt.Println("in the tenant's transaction:", res.Shard, later.Shard)

	got := map[string]bool{<-done: true, <-done: true}
	fmt.Println("worked:", got["ada@example.com"], got["bob@acme.example"])
	// An item is (shard, id): its ref carries both, and the front cancels,
	// reads or retries it on its shard.
	cancelled, err := client.Cancel(ctx, later.Ref(), nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(cancelled)
	// Output:
	// same shard: true duplicate: true
	// in the tenant's transaction: us us
	// worked: true true
	// cancelled
}

// A unique job enqueued in the caller's transaction keeps its uniqueness
// across the shards when the transaction is opened on the shard the front
// would choose: ShardForArgs.
func ExampleClient_ShardForArgs() {
	ctx := context.Background()
	eu, dropEU := testdb.ExamplePool()
	defer dropEU()
	us, dropUS := testdb.ExamplePool()
	defer dropUS()
	client, err := workq.NewShardedClient([]workq.Shard{{Name: "eu", Pool: eu}, {Name: "us", Pool: us}},
		workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		panic(err)
	}
	args, opts := EmailArgs{To: "ada@example.com"}, &workq.EnqueueOpts{Unique: workq.UniqueOpts{ByArgs: true}}
	name, err := client.ShardForArgs(args, opts)
	if err != nil {
		panic(err)
	}
	shard, err := client.Shard(name)
	if err != nil {
		panic(err)
	}
	tx, err := shard.Pool().Begin(ctx)
	if err != nil {
		panic(err)
	}
	first, err := shard.EnqueueTx(ctx, tx, args, opts)
	if err != nil {
		panic(err)
	}
	if err := tx.Commit(ctx); err != nil {
		panic(err)
	}
	again, err := client.Enqueue(ctx, args, opts) // the front finds it
	if err != nil {
		panic(err)
	}
	fmt.Println("same run:", again.Shard == first.Shard && again.ID == first.ID, "duplicate:", again.Duplicate)
	unkeyed, _ := client.ShardForArgs(EmailArgs{To: "bob@example.com"}, nil)
	fmt.Printf("a job without a key: %q\n", unkeyed)
	// Output:
	// same run: true duplicate: true
	// a job without a key: ""
}
