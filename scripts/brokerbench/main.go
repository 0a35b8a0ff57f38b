// Command brokerbench runs the no-op workload of `workq bench` (enqueue N
// small jobs, then consume them with an acknowledgement each) on the queues
// that docs/decision.md compares workq with: Redis (a reliable list queue and
// a stream with a consumer group), NATS JetStream (a work-queue stream with a
// durable pull consumer) and RabbitMQ (a durable queue, persistent messages,
// publisher confirms, manual acks with a prefetch). scripts/bench-decision.sh
// interleaves it with `workq bench` and the raw SQL ceiling.
//
//	go run ./scripts/brokerbench -backend redis-list -n 200000
//	go run ./scripts/brokerbench -backend rabbitmq -mode concurrent
//
// A job is counted once the server has applied its acknowledgement (a reply
// to the ack command, a synchronous round trip after the acks on the same
// channel, or the work-queue stream found empty), as `workq bench` counts a
// job once its completion has committed. Every run uses a queue of its own
// and deletes it at the end.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "brokerbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("brokerbench", flag.ContinueOnError)
	o := defaultOptions()
	name := fs.String("backend", "", "one of: "+strings.Join(backendNames(), ", "))
	n := fs.Int("n", 200000, "messages to enqueue and consume")
	mode := fs.String("mode", modeBurnDown, modeBurnDown+" (enqueue all, then consume) or "+modeConcurrent+" (produce and consume at once)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	fs.IntVar(&o.Consumers, "consumers", 0, "consumer goroutines (0: the backend's default, see -help)")
	fs.IntVar(&o.Batch, "batch", 0, "messages per fetch: Redis pipeline or COUNT, JetStream pull batch, RabbitMQ prefetch (0: the backend's default; 1 with redis-list is one BLMOVE per message)")
	fs.IntVar(&o.Window, "window", o.Window, "producer: messages per command (Redis) or unconfirmed messages in flight (JetStream, RabbitMQ)")
	fs.StringVar(&o.RedisAddr, "redis", o.RedisAddr, "Redis address")
	fs.StringVar(&o.NATSURL, "nats", o.NATSURL, "NATS URL (JetStream enabled)")
	fs.StringVar(&o.AMQPURL, "amqp", o.AMQPURL, "RabbitMQ URL")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: brokerbench -backend NAME [flags]\n\nbackends (default consumers / batch):\n")
		for _, b := range backendNames() {
			d := backends[b].defaults
			fmt.Fprintf(fs.Output(), "  %-15s %d / %d  %s\n", b, d.Consumers, d.Batch, backends[b].about)
		}
		fmt.Fprintln(fs.Output())
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	spec, ok := backends[*name]
	if !ok {
		return fmt.Errorf("-backend must be one of %s, got %q", strings.Join(backendNames(), ", "), *name)
	}
	if *n < 1 || o.Consumers < 0 || o.Batch < 0 || o.Window < 1 || (*mode != modeBurnDown && *mode != modeConcurrent) {
		return fmt.Errorf("need -n >= 1, -consumers >= 0, -batch >= 0, -window >= 1, -mode %s or %s", modeBurnDown, modeConcurrent)
	}
	if o.Consumers == 0 {
		o.Consumers = spec.defaults.Consumers
	}
	if o.Batch == 0 {
		o.Batch = spec.defaults.Batch
	}
	res, err := measure(ctx, *name, o, *n, *mode)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(out).Encode(res)
	}
	fmt.Fprintln(out, res)
	return nil
}

const (
	modeBurnDown   = "burn-down"
	modeConcurrent = "concurrent"
)

// Options are the connection settings and the knobs of one run.
type Options struct {
	Consumers int // consumer goroutines
	Batch     int // messages per fetch (pipeline, COUNT, pull batch, prefetch)
	Window    int // producer: messages per command or unconfirmed in flight
	RedisAddr string
	NATSURL   string
	AMQPURL   string
}

func defaultOptions() Options {
	return Options{
		Window:    1000,
		RedisAddr: "127.0.0.1:6379",
		NATSURL:   "nats://127.0.0.1:4222",
		AMQPURL:   "amqp://guest:guest@127.0.0.1:5672/",
	}
}

// A backend is one queue of one broker, made fresh for a run.
type backend interface {
	// produce enqueues the messages first .. first+n-1 and returns once the
	// server has acknowledged every one (reply, PubAck, confirm).
	produce(ctx context.Context, first, n int) error
	// consume receives messages and acknowledges each one until n have been
	// acknowledged, calling seen with each message's sequence number, and
	// returns once the server has applied every acknowledgement.
	consume(ctx context.Context, n int, seen func(int)) error
	// remaining counts the messages still in the queue, ready or unacknowledged.
	remaining(ctx context.Context) (int64, error)
	// close deletes the queue and closes the connections.
	close(ctx context.Context) error
}

type backendSpec struct {
	about    string
	defaults Options // Consumers and Batch only
	open     func(ctx context.Context, o Options, id string) (backend, error)
}

var backends = map[string]backendSpec{
	"redis-list": {
		about:    "reliable list queue: RPUSH; LMOVE to a processing list (pipelined, BLMOVE when empty); LREM to ack",
		defaults: Options{Consumers: 4, Batch: 100},
		open:     openRedisList,
	},
	"redis-stream": {
		about:    "stream and consumer group: XADD; XREADGROUP COUNT batch; one XACK per batch",
		defaults: Options{Consumers: 4, Batch: 100},
		open:     openRedisStream,
	},
	"jetstream": {
		about:    "work-queue stream (file storage, 1 replica); PublishAsync; durable pull consumer, explicit Ack per message",
		defaults: Options{Consumers: 2, Batch: 500},
		open:     openJetStream,
	},
	"rabbitmq": {
		about:    "durable classic queue, persistent messages, publisher confirms; manual Ack per message with a prefetch",
		defaults: Options{Consumers: 2, Batch: 250},
		open:     openRabbitClassic,
	},
	"rabbitmq-quorum": {
		about:    "as rabbitmq, on a quorum queue (single node; one consumer: see docs/decision.md)",
		defaults: Options{Consumers: 1, Batch: 250},
		open:     openRabbitQuorum,
	},
}

func backendNames() []string {
	names := make([]string, 0, len(backends))
	for n := range backends {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Result is one run's measurement.
type Result struct {
	Backend       string  `json:"backend"`
	Mode          string  `json:"mode"`
	Messages      int     `json:"messages"`
	Consumers     int     `json:"consumers"`
	Batch         int     `json:"batch"`
	Window        int     `json:"window"`
	EnqueueSec    float64 `json:"enqueue_seconds,omitempty"` // burn-down only
	EnqueuePerSec float64 `json:"enqueue_per_second,omitempty"`
	ConsumeSec    float64 `json:"consume_seconds"` // concurrent: from the first publish to the last ack
	ConsumePerSec float64 `json:"consume_per_second"`
	Duplicates    int     `json:"duplicates"` // messages delivered more than once
}

func (r Result) String() string {
	s := fmt.Sprintf("%s %s: ", r.Backend, r.Mode)
	if r.Mode == modeBurnDown {
		s += fmt.Sprintf("enqueue %d in %.2fs = %.0f msgs/s; ", r.Messages, r.EnqueueSec, r.EnqueuePerSec)
	}
	return s + fmt.Sprintf("consume %d in %.2fs = %.0f msgs/s (consumers %d, batch %d, window %d, duplicates %d)",
		r.Messages, r.ConsumeSec, r.ConsumePerSec, r.Consumers, r.Batch, r.Window, r.Duplicates)
}

// measure runs one burn-down or concurrent run on a fresh queue and checks
// that every message was consumed and nothing is left.
func measure(ctx context.Context, name string, o Options, n int, mode string) (Result, error) {
	id := fmt.Sprintf("%d", time.Now().UnixNano())
	b, err := backends[name].open(ctx, o, id)
	if err != nil {
		return Result{}, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := b.close(cctx); err != nil {
			fmt.Fprintf(os.Stderr, "brokerbench: %s: close: %v\n", name, err)
		}
	}()
	res := Result{Backend: name, Mode: mode, Messages: n, Consumers: o.Consumers, Batch: o.Batch, Window: o.Window}
	seen := newSeenSet(n)
	start := time.Now()
	switch mode {
	case modeBurnDown:
		if err := b.produce(ctx, 0, n); err != nil {
			return res, fmt.Errorf("%s: produce: %w", name, err)
		}
		res.EnqueueSec = time.Since(start).Seconds()
		res.EnqueuePerSec = float64(n) / res.EnqueueSec
		start = time.Now()
		if err := b.consume(ctx, n, seen.mark); err != nil {
			missing, dups := seen.check()
			return res, fmt.Errorf("%s: consume (%d missing, %d duplicates): %w", name, missing, dups, err)
		}
	default:
		perr := make(chan error, 1)
		pctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() { perr <- b.produce(pctx, 0, n) }()
		cerr := b.consume(ctx, n, seen.mark)
		if cerr != nil {
			cancel()
		}
		if err := errors.Join(cerr, <-perr); err != nil {
			return res, fmt.Errorf("%s: %w", name, err)
		}
	}
	res.ConsumeSec = time.Since(start).Seconds()
	res.ConsumePerSec = float64(n) / res.ConsumeSec
	missing, dups := seen.check()
	res.Duplicates = dups
	if missing > 0 {
		return res, fmt.Errorf("%s: %d of %d messages never consumed", name, missing, n)
	}
	left, err := b.remaining(ctx)
	if err != nil {
		return res, fmt.Errorf("%s: count remaining: %w", name, err)
	}
	if left != 0 {
		return res, fmt.Errorf("%s: %d messages left in the queue after all were acknowledged", name, left)
	}
	return res, nil
}
