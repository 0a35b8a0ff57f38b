package workqtype

import "fmt"

// ItemRef names one item: its table, its id and, on a Client of several
// shards, its shard (ids are unique per shard only). The root package
// re-exports it as workq.ItemRef, the argument of the Client's Get,
// Attempts, Retry, Cancel and Delete. The result of every write makes one
// with its shard: workq.Enqueued.Ref, outbox.Sent.Ref, inbox.Received.Ref,
// timers.Scheduled.Ref, and Item.Ref of an item Get or List returned. A
// ref without a shard is looked up on every shard.
//
// It lives here, below the root, so that the packages of the other kinds
// (outbox, inbox, timers), which the root imports, can return it.
type ItemRef struct {
	Table Table
	ID    int64
	Shard string // "" on a Client of one shard; on a sharded Client: looked up
}

// String is "table/id", or "shard:table/id".
func (r ItemRef) String() string {
	if r.Shard == "" {
		return fmt.Sprintf("%s/%d", r.Table, r.ID)
	}
	return fmt.Sprintf("%s:%s/%d", r.Shard, r.Table, r.ID)
}

// Ref is the ItemRef of the item, with its shard.
func (it Item) Ref() ItemRef { return ItemRef{Table: it.Table, ID: it.ID, Shard: it.Shard} }
