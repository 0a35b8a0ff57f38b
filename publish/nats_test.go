package publish_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/worker"
	"github.com/workq/workq/publish"
	"github.com/workq/workq/workqtype"
)

// natsURL is the JetStream server the tests use: real, never a mock.
const natsURL = "nats://127.0.0.1:4222"

// testStream connects to the NATS server and creates a stream of its own
// (unique name, subjects "<prefix>.>"), deleted when the test ends. It fails
// the test with a clear message when the server cannot be reached.
func testStream(t testing.TB) (js jetstream.JetStream, stream jetstream.Stream, prefix string) {
	t.Helper()
	nc, err := nats.Connect(natsURL, nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("NATS with JetStream must run at %s for these tests (start nats-server -js): %v", natsURL, err)
	}
	t.Cleanup(nc.Close)
	js, err = jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	prefix = "wqtest." + id
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err = js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "WQTEST_" + strings.ToUpper(id), Subjects: []string{prefix + ".>"},
		Storage: jetstream.MemoryStorage, Duplicates: 10 * time.Minute,
	})
	if err != nil {
		t.Fatalf("create JetStream stream on %s (is JetStream enabled?): %v", natsURL, err)
	}
	name := stream.CachedInfo().Config.Name
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := js.DeleteStream(ctx, name); err != nil {
			t.Errorf("delete stream %s: %v", name, err)
		}
	})
	return js, stream, prefix
}

// streamMsgs reads every message of the stream in order.
func streamMsgs(t testing.TB, stream jetstream.Stream) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("get message %d: %v", seq, err)
		}
		out = append(out, m)
	}
	return out
}

// TestJetStreamRelay relays messages through the real runtime to a real
// stream: each arrives once, on its topic's subject, with its payload, its
// headers and Nats-Msg-Id set to the outbox message id.
func TestJetStreamRelay(t *testing.T) {
	js, stream, prefix := testStream(t)
	pool := testdb.PoolWith(t, 8)
	pub, err := publish.NewJetStream(js, publish.JetStreamConfig{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	topics := []string{"orders.created", "orders cancelled"}
	startRelay(t, pool, relayConfig(), map[string]publisher{topics[0]: pub.Handle, topics[1]: pub.Handle}, worker.Options{})
	var msgs []message
	for i := range 20 {
		msgs = append(msgs, message{Topic: topics[i%2], Payload: map[string]any{"n": i},
			Headers:       map[string]any{"X-Tenant": "acme", "Nats-Expected-Stream": "nope", "Workq-Topic": "forged"},
			CorrelationID: fmt.Sprintf("corr-%d", i)})
	}
	ids := enqueue(t, pool, msgs...)
	want := map[string]int{} // message id -> index
	for i, s := range ids {
		if row := waitFinal(t, pool, s.ID); row.Status != lease.StatusDone || row.Attempts != 1 {
			t.Fatalf("message %d ended %s after %d attempts: %s", i, row.Status, row.Attempts, row.LastError)
		}
		want[s.MessageID] = i
	}
	got := streamMsgs(t, stream)
	if len(got) != len(ids) {
		t.Fatalf("stream holds %d messages, want %d", len(got), len(ids))
	}
	seen := map[string]bool{}
	for _, m := range got {
		id := m.Header.Get(jetstream.MsgIDHeader)
		i, ok := want[id]
		if !ok || seen[id] {
			t.Fatalf("stream message %d has Nats-Msg-Id %q: unknown or repeated", m.Sequence, id)
		}
		seen[id] = true
		wantSubj := prefix + ".orders.created"
		if msgs[i].Topic == "orders cancelled" {
			wantSubj = prefix + ".orders_cancelled"
		}
		if m.Subject != wantSubj {
			t.Errorf("message %d on %q, want %q", i, m.Subject, wantSubj)
		}
		if string(m.Data) != fmt.Sprintf(`{"n": %d}`, i) {
			t.Errorf("message %d data %q", i, m.Data)
		}
		for k, v := range map[string]string{"X-Tenant": "acme", "Workq-Topic": msgs[i].Topic, "Workq-Correlation-Id": fmt.Sprintf("corr-%d", i)} {
			if g := m.Header.Get(k); g != v {
				t.Errorf("message %d header %s = %q, want %q", i, k, g, v)
			}
		}
		if g := m.Header.Get("Nats-Expected-Stream"); g != "" {
			t.Errorf("message %d: reserved header Nats-Expected-Stream passed through (%q)", i, g)
		}
	}
}

// TestJetStreamDedup: the same outbox message delivered again yields one
// stream message, whether it is published twice in a row, retried after a
// publish whose outcome was lost, or revived after it was done (its
// completion as good as lost).
func TestJetStreamDedup(t *testing.T) {
	js, stream, prefix := testStream(t)
	pub, err := publish.NewJetStream(js, publish.JetStreamConfig{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("the same message published twice", func(t *testing.T) {
		job := &workq.Message[json.RawMessage]{ID: 1, Topic: "twice", MessageID: uuid.NewString(), Payload: json.RawMessage(`{"a":1}`), Attempt: 1}
		for i := range 2 {
			job.Attempt = i + 1
			if err := pub.Handle(context.Background(), job); err != nil {
				t.Fatalf("publish %d: %v", i+1, err)
			}
		}
		assertOnce(t, stream, prefix+".twice", job.MessageID)
	})

	pool := testdb.PoolWith(t, 8)
	var lost atomic.Int32
	startRelay(t, pool, relayConfig(), map[string]publisher{
		// Attempt 1 publishes and then loses its result, so the runtime
		// retries: the second publish must be a duplicate.
		"retried": func(ctx context.Context, job *workq.Message[json.RawMessage]) error {
			if err := pub.Handle(ctx, job); err != nil {
				return err
			}
			if job.Attempt == 1 {
				lost.Add(1)
				return errors.New("the outcome of attempt 1 was lost")
			}
			return nil
		},
		"revived": pub.Handle,
	}, worker.Options{})

	t.Run("retried after a publish whose outcome was lost", func(t *testing.T) {
		s := enqueue(t, pool, message{Topic: "retried", Payload: map[string]any{"b": 2}})[0]
		row := waitFinal(t, pool, s.ID)
		if row.Status != lease.StatusDone || row.Attempts != 2 || lost.Load() != 1 {
			t.Fatalf("ended %s after %d attempts (%d lost): %s", row.Status, row.Attempts, lost.Load(), row.LastError)
		}
		assertOnce(t, stream, prefix+".retried", s.MessageID)
	})

	t.Run("revived after it was done", func(t *testing.T) {
		s := enqueue(t, pool, message{Topic: "revived", Payload: map[string]any{"c": 3}})[0]
		if row := waitFinal(t, pool, s.ID); row.Status != lease.StatusDone {
			t.Fatalf("first delivery ended %s: %s", row.Status, row.LastError)
		}
		assertOnce(t, stream, prefix+".revived", s.MessageID)
		// Back to ready as if its completion had never been recorded.
		if _, err := pool.Exec(context.Background(),
			"update workq.outbox set status = 0, run_at = now(), owner_token = null, locked_until = null where id = $1", s.ID); err != nil {
			t.Fatal(err)
		}
		if row := waitFinal(t, pool, s.ID); row.Status != lease.StatusDone || row.Attempts != 2 {
			t.Fatalf("second delivery ended %s after %d attempts: %s", row.Status, row.Attempts, row.LastError)
		}
		assertOnce(t, stream, prefix+".revived", s.MessageID)
	})
}

// assertOnce checks that subject holds exactly one message, with msgID.
func assertOnce(t *testing.T, stream jetstream.Stream, subject, msgID string) {
	t.Helper()
	var n int
	for _, m := range streamMsgs(t, stream) {
		if m.Subject == subject {
			n++
			if got := m.Header.Get(jetstream.MsgIDHeader); got != msgID {
				t.Errorf("message on %s has Nats-Msg-Id %q, want %q", subject, got, msgID)
			}
		}
	}
	if n != 1 {
		t.Fatalf("%s holds %d messages, want exactly 1", subject, n)
	}
}

// TestJetStreamNoStream: a subject no stream captures is retried, then the
// message fails with an error that says so.
func TestJetStreamNoStream(t *testing.T) {
	js, _, prefix := testStream(t)
	pool := testdb.PoolWith(t, 8)
	pub, err := publish.NewJetStream(js, publish.JetStreamConfig{
		Subject: func(topic string) string { return "wqtest-nostream." + prefix + "." + topic },
		Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	bad, err := publish.NewJetStream(js, publish.JetStreamConfig{Subject: func(string) string { return "a.*.b" }})
	if err != nil {
		t.Fatal(err)
	}
	startRelay(t, pool, relayConfig(), map[string]publisher{"lost": pub.Handle, "wild": bad.Handle}, worker.Options{})
	ids := enqueue(t, pool, message{Topic: "lost", Payload: map[string]any{}, MaxAttempts: 2},
		message{Topic: "wild", Payload: map[string]any{}, MaxAttempts: 3})
	row := waitFinal(t, pool, ids[0].ID)
	if row.Status != lease.StatusFailed || row.Attempts != 2 || !strings.Contains(row.LastError, "no stream") {
		t.Errorf("no stream: ended %s after %d attempts (%q), want failed after 2 saying no stream", row.Status, row.Attempts, row.LastError)
	}
	row = waitFinal(t, pool, ids[1].ID)
	if row.Status != lease.StatusFailed || row.Attempts != 1 || !strings.Contains(row.LastError, `"a.*.b"`) {
		t.Errorf("wildcard subject: ended %s after %d attempts (%q), want failed at once", row.Status, row.Attempts, row.LastError)
	}
}

func TestSubjectFor(t *testing.T) {
	cases := []struct{ prefix, topic, want string }{
		{"", "orders.created", "orders.created"},
		{"workq", "orders.created", "workq.orders.created"},
		{"a.b", "x y\tz", "a.b.x_y_z"},
		{"", "a.*.>", "a._._"},
		{"", ".lead..trail.", "_.lead._.trail._"},
		{"p", "größe", "p.größe"},
	}
	for _, c := range cases {
		if got := publish.SubjectFor(c.prefix, c.topic); got != c.want {
			t.Errorf("SubjectFor(%q, %q) = %q, want %q", c.prefix, c.topic, got, c.want)
		}
	}
}

func TestNewJetStreamInvalid(t *testing.T) {
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatalf("NATS must run at %s: %v", natsURL, err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	for _, c := range []publish.JetStreamConfig{{Prefix: "a b"}, {Prefix: "a.>"}, {Prefix: "a..b"}, {Prefix: "$JS.API"}, {Prefix: "_INBOX"}, {Timeout: -1}} {
		if _, err := publish.NewJetStream(js, c); !errors.Is(err, workqtype.ErrInvalid) {
			t.Errorf("NewJetStream(%+v) = %v, want ErrInvalid", c, err)
		}
	}
	if _, err := publish.NewJetStream(nil, publish.JetStreamConfig{}); !errors.Is(err, workqtype.ErrInvalid) {
		t.Errorf("nil JetStream: %v, want ErrInvalid", err)
	}
}
