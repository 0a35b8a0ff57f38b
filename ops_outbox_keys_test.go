package workq_test

import (
	"context"
	"errors"
	"testing"

	"github.com/workq/workq"
	"github.com/workq/workq/outbox"
)

// TestOutboxKeys: every key with messages not done is listed in key order
// with its head; OnlyBlocked keeps the key whose head failed; pages go on
// after AfterKey; a sharded Client reads the shard named.
func TestOutboxKeys(t *testing.T) {
	ctx := context.Background()
	for name, c := range opsClients(t) {
		t.Run(name, func(t *testing.T) {
			shard := ""
			if len(c.Shards()) > 1 {
				shard = c.Shards()[1]
				if _, err := c.OutboxKeys(ctx, outbox.KeyQuery{Queue: "keys"}); !errors.Is(err, workq.ErrInvalid) {
					t.Fatalf("OutboxKeys without a shard on a sharded Client: %v, want ErrInvalid", err)
				}
			}
			sc, err := c.Shard(shard)
			if err != nil {
				t.Fatal(err)
			}
			send := func(key string) outbox.Sent {
				s, err := sc.Send(ctx, outbox.Message{Queue: "keys", Topic: "k.topic", PartitionKey: key})
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			a1 := send("a")
			send("a")
			b1 := send("b")
			fail(t, c, workq.ItemRef{Table: workq.TableOutbox, ID: b1.ID, Shard: b1.Shard})

			all, err := c.OutboxKeys(ctx, outbox.KeyQuery{Queue: "keys", Shard: shard})
			if err != nil {
				t.Fatal(err)
			}
			if len(all) != 2 || all[0].PartitionKey != "a" || all[0].HeadID != a1.ID || all[0].MessageID != a1.MessageID ||
				all[0].Status != workq.StateReady || all[0].Blocked || all[0].Shard != sc.ShardName() ||
				all[1].PartitionKey != "b" || all[1].Status != workq.StateFailed || !all[1].Blocked || all[1].LastError != "boom" {
				t.Fatalf("OutboxKeys = %+v", all)
			}
			blocked, err := c.OutboxKeys(ctx, outbox.KeyQuery{Queue: "keys", OnlyBlocked: true, Shard: shard})
			if err != nil || len(blocked) != 1 || blocked[0].HeadID != b1.ID {
				t.Fatalf("OnlyBlocked = %+v, %v", blocked, err)
			}
			next, err := c.OutboxKeys(ctx, outbox.KeyQuery{Queue: "keys", AfterKey: "a", Limit: 1, Shard: shard})
			if err != nil || len(next) != 1 || next[0].PartitionKey != "b" {
				t.Fatalf("AfterKey a = %+v, %v", next, err)
			}
			if _, err := c.OutboxKeys(ctx, outbox.KeyQuery{Queue: "bad queue", Shard: shard}); !errors.Is(err, workq.ErrInvalid) {
				t.Fatalf("bad queue: %v, want ErrInvalid", err)
			}
		})
	}
}
