package publish_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/publish"
)

// A JetStream publisher sends each message of its topics to a subject
// derived from the topic, with the outbox message id as Nats-Msg-Id so that
// the stream drops a re-delivered copy.
func ExampleNewJetStream() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()

	nc, err := nats.Connect("nats://127.0.0.1:4222")
	if err != nil {
		panic(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		panic(err)
	}
	// The stream is the operator's; its duplicate window bounds the
	// de-duplication. (A unique name so that examples can run side by side.)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	prefix := "example" + hex.EncodeToString(b)
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: prefix, Subjects: []string{prefix + ".>"},
		Storage: jetstream.MemoryStorage, Duplicates: 2 * time.Minute})
	if err != nil {
		panic(err)
	}
	defer js.DeleteStream(ctx, prefix)

	pub, err := publish.NewJetStream(js, publish.JetStreamConfig{Prefix: prefix})
	if err != nil {
		panic(err)
	}
	client := relayTo(ctx, pool, "orders.created", pub.Handle)
	sendOutbox(ctx, client, "orders.created", `{"order": 7}`)

	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		panic(err)
	}
	msg, err := cons.Next(jetstream.FetchMaxWait(30 * time.Second))
	if err != nil {
		panic(err)
	}
	var id string
	if err := pool.QueryRow(ctx, "select message_id::text from workq.outbox").Scan(&id); err != nil {
		panic(err)
	}
	fmt.Println(msg.Subject()[len(prefix):], string(msg.Data()), msg.Headers().Get(jetstream.MsgIDHeader) == id)
	if err := client.Stop(ctx); err != nil {
		panic(err)
	}
	// Output: .orders.created {"order": 7} true
}
