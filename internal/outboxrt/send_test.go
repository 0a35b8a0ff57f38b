package outboxrt_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/outboxrt"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/workqtype"
)

func TestSendInTransaction(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	c := outboxrt.NewClient(outboxrt.ClientOptions{})

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, tx, outbox.Message{Topic: "order.created", Payload: map[string]int{"order": 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SendMany(ctx, tx, []outbox.Message{{Topic: "a"}, {Topic: "b", PartitionKey: "k"}}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(t, pool, "select count(*) from workq.outbox"); n != 0 {
		t.Fatalf("rolled back transaction left %d messages, want 0", n)
	}

	tx, err = pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := uuid.New()
	runAt := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	s, err := c.Send(ctx, tx, outbox.Message{Queue: "q1", Topic: "order.created", MessageID: id, PartitionKey: "order-1",
		CorrelationID: "corr", Headers: map[string]string{"X-Tenant": "t1"}, RunAt: runAt, Priority: 3, MaxAttempts: 7, JoinID: 0})
	if err != nil {
		t.Fatal(err)
	}
	if s.MessageID != id {
		t.Fatalf("message id %s, want %s", s.MessageID, id)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := admin.Get(ctx, pool, lease.Outbox, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	headers, _ := r.Details["headers"].(json.RawMessage)
	if r.Queue != "q1" || r.Details["partition_key"] != "order-1" || r.Details["correlation_id"] != "corr" || !r.RunAt.Equal(runAt) ||
		r.MaxAttempts != 7 || r.Priority != 3 || string(headers) != `{"X-Tenant": "t1"}` || r.Details["key_seq"] != int64(1) {
		t.Fatalf("stored %+v", r)
	}
}

func TestSendManyValidationWritesNothing(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	c := outboxrt.NewClient(outboxrt.ClientOptions{})
	dup := uuid.New()
	cases := []struct {
		name string
		bad  outbox.Message
		want []error
	}{
		{"no topic", outbox.Message{}, []error{workqtype.ErrInvalid}},
		{"topic with control character", outbox.Message{Topic: "a\nb"}, []error{workqtype.ErrInvalid}},
		{"topic with a C1 control character", outbox.Message{Topic: "a\u0085b"}, []error{workqtype.ErrInvalid}},
		{"partition key with a C1 control character", outbox.Message{Topic: "t", PartitionKey: "k\u009b"}, []error{workqtype.ErrInvalid}},
		{"header value with a C1 control character", outbox.Message{Topic: "t", Headers: map[string]string{"X": "a\u0085b"}}, []error{workqtype.ErrInvalid}},
		{"bad queue", outbox.Message{Topic: "t", Queue: "a b"}, []error{workqtype.ErrInvalid}},
		{"payload not an object", outbox.Message{Topic: "t", Payload: []byte(`[1]`)}, []error{workqtype.ErrInvalid}},
		{"payload not JSON", outbox.Message{Topic: "t", Payload: []byte(`{`)}, []error{workqtype.ErrInvalid}},
		{"header name", outbox.Message{Topic: "t", Headers: map[string]string{"bad name": "v"}}, []error{workqtype.ErrInvalid}},
		{"header value", outbox.Message{Topic: "t", Headers: map[string]string{"X": "a\r\nb"}}, []error{workqtype.ErrInvalid}},
		{"header value too long", outbox.Message{Topic: "t", Headers: map[string]string{"X": strings.Repeat("v", 4097)}}, []error{workqtype.ErrInvalid}},
		{"partition key too long", outbox.Message{Topic: "t", PartitionKey: strings.Repeat("k", 257)}, []error{workqtype.ErrInvalid}},
		{"correlation id not UTF-8", outbox.Message{Topic: "t", CorrelationID: "\xff"}, []error{workqtype.ErrInvalid}},
		{"run at and delay", outbox.Message{Topic: "t", RunAt: time.Now(), Delay: time.Second}, []error{workqtype.ErrInvalid}},
		{"negative delay", outbox.Message{Topic: "t", Delay: -time.Second}, []error{workqtype.ErrInvalid}},
		{"max attempts", outbox.Message{Topic: "t", MaxAttempts: 1001}, []error{workqtype.ErrInvalid}},
		{"negative join id", outbox.Message{Topic: "t", JoinID: -1}, []error{workqtype.ErrInvalid}},
		{"duplicate id in the call", outbox.Message{Topic: "t", MessageID: dup}, []error{workqtype.ErrInvalid, outbox.ErrDuplicateMessageID}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msgs := []outbox.Message{{Topic: "ok"}, {Topic: "ok", MessageID: dup}, tc.bad, {Topic: "ok"}}
			_, err := c.SendMany(ctx, pool, msgs)
			if err == nil {
				t.Fatal("SendMany accepted a bad message")
			}
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Fatalf("error %q does not wrap %v", err, w)
				}
			}
			if !strings.Contains(err.Error(), "message 2") {
				t.Errorf("error %q does not name the bad message (2)", err)
			}
			if tc.bad.MessageID == uuid.Nil { // alone, the duplicate case's message is fine
				if _, err := c.Send(ctx, pool, tc.bad); !errors.Is(err, workqtype.ErrInvalid) {
					t.Fatalf("Send of the bad message: %v, want ErrInvalid", err)
				}
			}
			if n := count(t, pool, "select count(*) from workq.outbox"); n != 0 {
				t.Fatalf("%d messages written, want 0", n)
			}
		})
	}
}

func TestDuplicateMessageID(t *testing.T) {
	pool := testdb.Pool(t)
	ctx := context.Background()
	c := outboxrt.NewClient(outboxrt.ClientOptions{})
	id := uuid.New()
	if _, err := c.Send(ctx, pool, outbox.Message{Topic: "t", MessageID: id}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Send(ctx, pool, outbox.Message{Topic: "t", MessageID: id})
	if !errors.Is(err, outbox.ErrDuplicateMessageID) || !strings.Contains(err.Error(), id.String()) {
		t.Fatalf("second send: %v, want ErrDuplicateMessageID naming %s", err, id)
	}
	_, err = c.SendMany(ctx, pool, []outbox.Message{{Topic: "t"}, {Topic: "t", MessageID: id}, {Topic: "t"}})
	if !errors.Is(err, outbox.ErrDuplicateMessageID) {
		t.Fatalf("SendMany with a stored id: %v, want ErrDuplicateMessageID", err)
	}
	if n := count(t, pool, "select count(*) from workq.outbox"); n != 1 {
		t.Fatalf("%d messages, want 1: a call with a duplicate must write nothing", n)
	}
}
