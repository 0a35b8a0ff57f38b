package publish_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/db/gen"
	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/worker"
	"github.com/workq/workq/publish"
)

// BenchmarkJetStreamRelay relays b.N outbox messages through the real
// runtime to a real JetStream stream (file storage, created and deleted by
// the benchmark) and reports messages/s. The messages are written before the
// clock starts; it stops when the last one is done. Choose the size with
// -benchtime, e.g.
//
//	go test -run '^$' -bench BenchmarkJetStreamRelay -benchtime 100000x ./publish/
//
// and -benchtime 2000x for a smoke run. WORKQ_BENCH_CONCURRENCY sets the
// handlers running at once (default 256): each is one publish round trip in
// flight on the shared NATS connection.
func BenchmarkJetStreamRelay(b *testing.B) {
	concurrency := 256
	if v := os.Getenv("WORKQ_BENCH_CONCURRENCY"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("WORKQ_BENCH_CONCURRENCY=%q: want a positive integer", v)
		}
		concurrency = n
	}
	js, _, prefix := testStream(b)
	ctx := context.Background()
	// testStream makes a memory stream for tests; the benchmark's is on
	// file, as a production stream would be.
	name := "WQBENCH_" + prefix[len("wqtest."):]
	subj := "wqbench." + prefix[len("wqtest."):]
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subj + ".>"},
		Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute})
	if err != nil {
		b.Fatalf("create stream: %v", err)
	}
	b.Cleanup(func() { _ = js.DeleteStream(context.Background(), name) })

	pool := testdb.PoolWith(b, 12)
	n := b.N
	const chunk = 10000
	for start := 0; start < n; start += chunk {
		var p gen.OutboxEnqueueManyParams
		for i := start; i < min(n, start+chunk); i++ {
			p.Queues = append(p.Queues, "default")
			p.Topics = append(p.Topics, "bench.event")
			p.PartitionKeys = append(p.PartitionKeys, "")
			p.Payloads = append(p.Payloads, `{"seq": `+strconv.Itoa(i)+`, "note": "benchmark payload"}`)
			p.Headers = append(p.Headers, `{"X-Source": "bench"}`)
			p.CorrelationIds = append(p.CorrelationIds, "")
			p.Priorities = append(p.Priorities, 0)
			p.DelaysMs = append(p.DelaysMs, 0)
			p.MaxAttempts = append(p.MaxAttempts, 4)
		}
		if _, err := gen.New(pool).OutboxEnqueueMany(ctx, p); err != nil {
			b.Fatalf("enqueue: %v", err)
		}
	}
	pub, err := publish.NewJetStream(js, publish.JetStreamConfig{Prefix: subj})
	if err != nil {
		b.Fatal(err)
	}
	cfg := relayConfig()
	cfg.MaxConns = 12
	cfg.Concurrency = concurrency
	cfg.Batch = 1000
	cfg.Lease = 30 * time.Second
	var done, failed atomic.Int64
	finished := make(chan struct{})
	onResult := func(r worker.Result) {
		if !r.Applied {
			return
		}
		switch r.Status {
		case lease.StatusFailed:
			failed.Add(1)
		case lease.StatusDone:
		default:
			return
		}
		if done.Add(1) == int64(n) {
			close(finished)
		}
	}
	b.ResetTimer()
	began := time.Now()
	startRelay(b, pool, cfg, map[string]publisher{"bench.event": pub.Handle}, worker.Options{OnResult: onResult})
	select {
	case <-finished:
	case <-time.After(30 * time.Minute):
		b.Fatalf("only %d of %d messages finished in 30 minutes", done.Load(), n)
	}
	elapsed := time.Since(began)
	b.StopTimer()
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d messages failed", f)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if info.State.Msgs != uint64(n) {
		b.Fatalf("stream holds %d messages, want %d", info.State.Msgs, n)
	}
	b.ReportMetric(float64(n)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(0, "ns/op") // per-op time is meaningless here: see msgs/s
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "relayed %d messages in %s, concurrency %d\n", n, elapsed.Round(time.Millisecond), concurrency)
	}
}
