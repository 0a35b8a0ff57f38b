package workq_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workq/workq"
	"github.com/workq/workq/inbox"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/timers"
)

// The filters of one table's own columns (ListParams.PartitionKey,
// MessageID, Source, DueAfter, DueBefore), newest and oldest first, on a
// Client of one database (default schema and another) and a sharded one;
// a filter on a table that has not the column is ErrInvalid naming it;
// Item.Details carry the outbox's key_seq and the inbox's payload_hash.
func TestClientListKindFilters(t *testing.T) {
	ctx := context.Background()
	for name, c := range opsClients(t) {
		t.Run(name, func(t *testing.T) {
			var keyed []workq.ItemRef
			var mid uuid.UUID
			for i, key := range []string{"k1", "k2", "k1", "", "k1"} {
				s, err := c.Send(ctx, outbox.Message{Queue: "kf", Topic: "t", PartitionKey: key, Payload: map[string]int{"n": i}})
				if err != nil {
					t.Fatal(err)
				}
				if key == "k1" {
					keyed = append(keyed, workq.ItemRef{Table: workq.TableOutbox, ID: s.ID, Shard: s.Shard})
				}
				if i == 1 {
					mid = s.MessageID
				}
			}
			var fromA []workq.ItemRef
			for i, src := range []string{"a", "b", "a"} {
				r, err := c.Receive(ctx, inbox.Message{Queue: "kf", Source: src, MessageID: uuid.NewString(), Payload: map[string]int{"n": i}})
				if err != nil {
					t.Fatal(err)
				}
				if src == "a" {
					fromA = append(fromA, workq.ItemRef{Table: workq.TableInbox, ID: r.ID, Shard: r.Shard})
				}
			}
			base := time.Now().Add(time.Hour).Truncate(time.Second)
			var timerRefs []workq.ItemRef
			for i := range 4 {
				r, err := c.ScheduleTimer(ctx, timers.Timer{Queue: "kf", Topic: "t", DueTime: base.Add(time.Duration(i) * time.Minute)})
				if err != nil {
					t.Fatal(err)
				}
				timerRefs = append(timerRefs, workq.ItemRef{Table: workq.TableTimers, ID: r.ID, Shard: r.Shard})
			}
			cases := []struct {
				name string
				p    workq.ListParams
				want []workq.ItemRef // oldest first
			}{
				{"partition key", workq.ListParams{Table: workq.TableOutbox, PartitionKey: "k1"}, keyed},
				{"message id", workq.ListParams{Table: workq.TableOutbox, MessageID: mid}, nil},
				{"source", workq.ListParams{Table: workq.TableInbox, Source: "a"}, fromA},
				{"due after", workq.ListParams{Table: workq.TableTimers, DueAfter: base.Add(2 * time.Minute)}, timerRefs[2:]},
				{"due before", workq.ListParams{Table: workq.TableTimers, DueBefore: base.Add(time.Minute)}, timerRefs[:1]},
				{"due between", workq.ListParams{Table: workq.TableTimers, DueAfter: base.Add(time.Minute), DueBefore: base.Add(3 * time.Minute)}, timerRefs[1:3]},
				{"no such source", workq.ListParams{Table: workq.TableInbox, Source: "nope"}, []workq.ItemRef{}},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					tc.p.Queue, tc.p.Limit, tc.p.Order = "kf", 1, workq.OldestFirst
					got := listRefs(t, c, tc.p)
					if tc.want == nil { // the message id: one message
						if len(got) != 1 {
							t.Fatalf("by message id: %v", got)
						}
						it, err := c.Get(ctx, got[0])
						if err != nil || it.Details["message_id"] != mid {
							t.Fatalf("by message id: %+v %v", it, err)
						}
						return
					}
					if !slices.Equal(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
						t.Fatalf("oldest first: %v, want %v", got, tc.want)
					}
					tc.p.Order = workq.NewestFirst
					checkNewestFirst(t, c, tc.p, tc.want)
				})
			}
			bad := []struct {
				field string
				p     workq.ListParams
			}{
				{"partition_key", workq.ListParams{PartitionKey: "k1"}},
				{"partition_key", workq.ListParams{Table: workq.TableInbox, PartitionKey: "k1"}},
				{"message_id", workq.ListParams{Table: workq.TableTimers, MessageID: mid}},
				{"source", workq.ListParams{Table: workq.TableOutbox, Source: "a"}},
				{"due_after", workq.ListParams{Table: workq.TableJobRuns, DueAfter: base}},
				{"due_before", workq.ListParams{Table: workq.TableInbox, DueBefore: base}},
			}
			for _, b := range bad {
				_, err := c.List(ctx, b.p)
				if !errors.Is(err, workq.ErrInvalid) || !strings.Contains(err.Error(), b.field) {
					t.Errorf("%s on %s: %v, want ErrInvalid naming it", b.field, b.p.Table, err)
				}
				if _, err := c.DeleteMatching(ctx, workq.ListParams{Table: b.p.Table, Source: b.p.Source, PartitionKey: b.p.PartitionKey,
					MessageID: b.p.MessageID, DueAfter: b.p.DueAfter, DueBefore: b.p.DueBefore, Shard: shardOf(c)}, 0); !errors.Is(err, workq.ErrInvalid) {
					t.Errorf("DeleteMatching %s on %s: %v, want ErrInvalid", b.field, b.p.Table, err)
				}
			}

			// The outbox's key_seq and the inbox's payload hash are details.
			it, err := c.Get(ctx, keyed[1])
			if err != nil || it.Details["key_seq"] != int64(2) {
				t.Errorf("outbox key_seq: %v (%v)", it.Details, err)
			}
			it, err = c.Get(ctx, fromA[0])
			if h, _ := it.Details["payload_hash"].(string); err != nil || len(h) != 64 {
				t.Errorf("inbox payload_hash: %v (%v)", it.Details, err)
			}
		})
	}
}

// shardOf names a shard of c when it is sharded (the bulk actions take
// one).
func shardOf(c *workq.Client) string {
	if names := c.Shards(); len(names) > 1 {
		return names[0]
	}
	return ""
}
