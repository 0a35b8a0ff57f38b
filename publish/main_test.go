package publish_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/clienthook"
	"github.com/workq/workq/internal/config"
	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/testutil"
	"github.com/workq/workq/internal/worker"
)

func TestMain(m *testing.M) { testdb.MainOwnCluster(m) }

// relayConfig is config.Default with retries fast enough for a test.
func relayConfig() config.Config {
	cfg := config.Default()
	cfg.WorkerID = "publish-test"
	cfg.Lease = 5 * time.Second
	cfg.BackoffBase = 5 * time.Millisecond
	cfg.BackoffCap = 50 * time.Millisecond
	cfg.Poll = 50 * time.Millisecond
	cfg.Concurrency = 32
	cfg.Batch = 32
	cfg.DrainTimeout = 2 * time.Second
	return cfg
}

// startRelay runs a real worker on pool whose only source is the outbox's
// default queue, routed by topic to handlers: what the outbox relay does. It
// stops when the test ends.
func startRelay(t testing.TB, pool *pgxpool.Pool, cfg config.Config, handlers map[string]publisher, o worker.Options) {
	t.Helper()
	var logs testutil.Buffer
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	w, err := worker.New(pool, cfg.Worker(), o)
	if err != nil {
		t.Fatal(err)
	}
	router := worker.NewTopicRouter()
	for topic, h := range handlers {
		if err := router.Handle(topic, asHandler(h)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.AddSource(worker.Source{Table: lease.Outbox, Queues: []string{"default"}, Route: router.Route}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("worker.Run: %v", err)
		}
		if t.Failed() && logs.String() != "" {
			t.Logf("worker log:\n%s", logs.String())
		}
	})
}

// publisher is a publisher's Handle: what workq.HandleOutbox registers.
type publisher = func(ctx context.Context, m *workq.Message[json.RawMessage]) error

// asHandler runs p as a relay's handler, as workq.HandleOutbox does.
func asHandler(p publisher) worker.HandlerFunc {
	workq.NewWorkers() // registers the root's clienthook functions (Fill)
	return func(ctx context.Context, job *worker.Job) error {
		m := new(workq.Message[json.RawMessage])
		if err := clienthook.Fill(m, job); err != nil {
			return err
		}
		return p(ctx, m)
	}
}

// message is one outbox row to write.
type message struct {
	Topic         string
	Payload       any
	Headers       map[string]any
	CorrelationID string
	PartitionKey  string
	MaxAttempts   int32
}

// sent is a written outbox row.
type sent struct {
	ID        int64
	MessageID string
}

// enqueue writes msgs with the generated bulk insert (one statement).
func enqueue(t testing.TB, pool *pgxpool.Pool, msgs ...message) []sent {
	t.Helper()
	var p gen.OutboxEnqueueManyParams
	for _, m := range msgs {
		payload, err := json.Marshal(m.Payload)
		if err != nil {
			t.Fatal(err)
		}
		if m.Headers == nil {
			m.Headers = map[string]any{}
		}
		headers, err := json.Marshal(m.Headers)
		if err != nil {
			t.Fatal(err)
		}
		if m.MaxAttempts == 0 {
			m.MaxAttempts = 4
		}
		p.Queues = append(p.Queues, "default")
		p.Topics = append(p.Topics, m.Topic)
		p.PartitionKeys = append(p.PartitionKeys, m.PartitionKey)
		p.Payloads = append(p.Payloads, string(payload))
		p.Headers = append(p.Headers, string(headers))
		p.CorrelationIds = append(p.CorrelationIds, m.CorrelationID)
		p.Priorities = append(p.Priorities, 0)
		p.DelaysMs = append(p.DelaysMs, 0)
		p.MaxAttempts = append(p.MaxAttempts, m.MaxAttempts)
	}
	rows, err := gen.New(pool).OutboxEnqueueMany(context.Background(), p)
	if err != nil {
		t.Fatalf("enqueue outbox: %v", err)
	}
	out := make([]sent, len(rows))
	for i, r := range rows {
		out[i] = sent{ID: r.ID, MessageID: r.MessageID.String()}
	}
	return out
}

// finalRow is an outbox row that reached done or failed.
type finalRow struct {
	Status    lease.Status
	Attempts  int32
	LastError string
	Payload   string // as the database returns it: what the relay sends
}

// waitFinal polls the outbox row until it is done or failed.
func waitFinal(t testing.TB, pool *pgxpool.Pool, id int64) finalRow {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var r finalRow
		var status int16
		err := pool.QueryRow(context.Background(),
			"select status, attempts, coalesce(last_error, ''), payload::text from workq.outbox where id = $1", id).
			Scan(&status, &r.Attempts, &r.LastError, &r.Payload)
		if err != nil {
			t.Fatalf("read outbox %d: %v", id, err)
		}
		r.Status = lease.Status(status)
		if r.Status == lease.StatusDone || r.Status == lease.StatusFailed {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("outbox %d still %s after 60s (attempts %d, last error %q)", id, r.Status, r.Attempts, r.LastError)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
