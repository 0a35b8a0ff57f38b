package workq_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/workq/workq"
	"github.com/workq/workq/inbox"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/timers"
)

// The result of every kind's write names its item as an ItemRef, with its
// shard, which the operator methods take; so does an Item.
func TestResultRefs(t *testing.T) {
	ctx := context.Background()
	for name, c := range opsClients(t) {
		t.Run(name, func(t *testing.T) {
			enq, err := c.Enqueue(ctx, OpsArgs{N: 1}, nil)
			if err != nil {
				t.Fatal(err)
			}
			sent, err := c.Send(ctx, outbox.Message{Topic: "refs.topic", Payload: map[string]int{"n": 2}})
			if err != nil {
				t.Fatal(err)
			}
			rcv, err := c.Receive(ctx, inbox.Message{Topic: "refs.topic", Source: "refs", MessageID: uuid.NewString(), Payload: map[string]int{"n": 3}})
			if err != nil {
				t.Fatal(err)
			}
			tm, err := c.ScheduleTimer(ctx, timers.Timer{Topic: "refs.topic", Delay: 3600e9, Payload: map[string]int{"n": 4}})
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range []struct {
				ref   workq.ItemRef
				table workq.Table
				id    int64
				shard string
			}{
				{enq.Ref(), workq.TableJobRuns, enq.ID, enq.Shard},
				{sent.Ref(), workq.TableOutbox, sent.ID, sent.Shard},
				{rcv.Ref(), workq.TableInbox, rcv.ID, rcv.Shard},
				{tm.Ref(), workq.TableTimers, tm.ID, tm.Shard},
			} {
				if w.ref != (workq.ItemRef{Table: w.table, ID: w.id, Shard: w.shard}) || w.shard == "" {
					t.Fatalf("Ref of the %s write: %+v (id %d, shard %q)", w.table, w.ref, w.id, w.shard)
				}
				it, err := c.Get(ctx, w.ref)
				if err != nil || it.ID != w.id || it.Table != w.table {
					t.Fatalf("Get(%v): %+v %v", w.ref, it, err)
				}
				if it.Ref() != w.ref || workq.RefOf(it) != w.ref {
					t.Fatalf("Item.Ref = %v, RefOf = %v, want %v", it.Ref(), workq.RefOf(it), w.ref)
				}
			}
			// A duplicate receive names the stored message.
			dup, err := c.Receive(ctx, inbox.Message{Topic: "refs.topic", Source: "refs", MessageID: "fixed-" + name, Payload: map[string]int{"n": 5}})
			if err != nil {
				t.Fatal(err)
			}
			again, err := c.Receive(ctx, inbox.Message{Topic: "refs.topic", Source: "refs", MessageID: "fixed-" + name, Payload: map[string]int{"n": 5}})
			if err != nil || !again.Duplicate || again.Ref() != dup.Ref() {
				t.Fatalf("duplicate receive: %+v (%v), want the ref %v", again, err, dup.Ref())
			}
			// The ref is the argument of the actions.
			if _, err := c.Cancel(ctx, tm.Ref(), nil); err != nil {
				t.Fatalf("Cancel(timer ref): %v", err)
			}
			if err := c.Retry(ctx, tm.Ref(), nil); err != nil {
				t.Fatalf("Retry(timer ref): %v", err)
			}
		})
	}
}
