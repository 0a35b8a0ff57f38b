package publish_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/publish"
)

// relayTo returns a started workq.Client that relays topic's outbox
// messages to publisher: a publisher's Handle is an outbox handler.
func relayTo(ctx context.Context, pool *pgxpool.Pool, topic string, publisher func(context.Context, *workq.Message[json.RawMessage]) error) *workq.Client {
	workers := workq.NewWorkers()
	if err := workq.HandleOutbox(workers, topic, publisher); err != nil {
		panic(err)
	}
	client, err := workq.NewClient(pool, workq.Config{Workers: workers})
	if err != nil {
		panic(err)
	}
	if err := client.Start(ctx); err != nil {
		panic(err)
	}
	return client
}

// sendOutbox writes one outbox message (in a service: inside the
// transaction that changes the state the message announces, with SendTx).
func sendOutbox(ctx context.Context, client *workq.Client, topic, payload string) {
	_, err := client.Send(ctx, outbox.Message{Topic: topic, Payload: json.RawMessage(payload), Headers: map[string]string{"X-Tenant": "acme"}})
	if err != nil {
		panic(err)
	}
}

// A webhook publisher POSTs each message of its topic to one URL, signed;
// the receiver checks the signature and the timestamp with VerifyWebhook.
func ExampleNewWebhook() {
	pool, cleanup := testdb.ExamplePool()
	defer cleanup()
	ctx := context.Background()

	const secret = "shared-with-the-receiver"
	got := make(chan string, 1)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := publish.VerifyWebhook(secret, r.Header, body, 5*time.Minute, time.Now()); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized) // 4xx: the message fails, not retried
			return
		}
		got <- fmt.Sprintf("%s %s tenant=%s", r.Header.Get(publish.HeaderTopic), body, r.Header.Get("X-Tenant"))
	}))
	defer receiver.Close()

	hook, err := publish.NewWebhook(publish.WebhookConfig{
		URL:        receiver.URL + "/orders",
		Secret:     secret,
		AllowHosts: []string{strings.TrimPrefix(receiver.URL, "http://")},
	})
	if err != nil {
		panic(err)
	}
	// The Client's outbox relay sends the topic's messages to the publisher.
	client := relayTo(ctx, pool, "orders.created", hook.Handle)
	sendOutbox(ctx, client, "orders.created", `{"order": 7}`)
	fmt.Println("verified:", <-got)
	if err := client.Stop(ctx); err != nil {
		panic(err)
	}
	// Output: verified: orders.created {"order": 7} tenant=acme
}

// A receiver verifies the raw body before parsing it, and rejects what does
// not verify with a 4xx (the publisher does not retry those).
func ExampleVerifyWebhook() {
	const secret = "shared-with-the-receiver"
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "read body", http.StatusBadRequest)
			return
		}
		if err := publish.VerifyWebhook(secret, r.Header, body, 5*time.Minute, time.Now()); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		// Workq-Message-Id is the same on every retry: drop one already
		// processed (for example with an inbox).
		fmt.Fprintln(w, "accepted", r.Header.Get(publish.HeaderMessageID))
	})

	// A forged request: signed with another secret.
	req := httptest.NewRequest(http.MethodPost, "/hook", strings.NewReader(`{"order": 7}`))
	req.Header.Set(publish.HeaderTimestamp, fmt.Sprint(time.Now().Unix()))
	req.Header.Set(publish.HeaderSignature, "sha256=0000")
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, req)
	fmt.Println(rec.Code, strings.TrimSpace(rec.Body.String()))
	// Output: 401 webhook signature does not verify
}
