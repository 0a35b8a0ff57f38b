package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestBackends runs a small burn-down and a small concurrent run on every
// backend against the real servers (Redis 127.0.0.1:6379, NATS JetStream
// 127.0.0.1:4222, RabbitMQ 127.0.0.1:5672): every message is consumed, none
// twice, and nothing is left in the queue. A missing server fails the test
// with the address it needs.
func TestBackends(t *testing.T) {
	for _, name := range backendNames() {
		for _, mode := range []string{modeBurnDown, modeConcurrent} {
			t.Run(name+"/"+mode, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				var out bytes.Buffer
				args := []string{"-backend", name, "-n", "3000", "-mode", mode, "-window", "500", "-json"}
				if err := run(ctx, args, &out); err != nil {
					t.Fatalf("brokerbench %s: %v", strings.Join(args, " "), err)
				}
				var res Result
				if err := json.Unmarshal(out.Bytes(), &res); err != nil {
					t.Fatalf("output %q: %v", out.String(), err)
				}
				want := backends[name].defaults
				if res.Backend != name || res.Mode != mode || res.Messages != 3000 || res.Duplicates != 0 ||
					res.Consumers != want.Consumers || res.Batch != want.Batch || res.Window != 500 || res.ConsumePerSec <= 0 {
					t.Errorf("result %+v", res)
				}
				if (mode == modeBurnDown) != (res.EnqueuePerSec > 0) {
					t.Errorf("enqueue rate %v in mode %s", res.EnqueuePerSec, mode)
				}
			})
		}
	}
}

// TestRedisListPerMessage covers the one-BLMOVE-per-message path (-batch 1).
func TestRedisListPerMessage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := measure(ctx, "redis-list", Options{Consumers: 3, Batch: 1, Window: 7, RedisAddr: defaultOptions().RedisAddr}, 500, modeConcurrent)
	if err != nil {
		t.Fatal(err)
	}
	if res.Duplicates != 0 || res.Messages != 500 {
		t.Errorf("result %+v", res)
	}
}

func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-backend", "kafka"}, "-backend must be one of"},
		{[]string{"-backend", "redis-list", "-n", "0"}, "need -n >= 1"},
		{[]string{"-backend", "redis-list", "-mode", "fast"}, "-mode burn-down or concurrent"},
		{[]string{"-backend", "redis-list", "-window", "0"}, "-window >= 1"},
	} {
		err := run(context.Background(), tc.args, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestUnreachable: a server that does not answer is a clear error naming
// its address, not a hang.
func TestUnreachable(t *testing.T) {
	for _, tc := range []struct{ backend, flag, addr, want string }{
		{"redis-list", "-redis", "127.0.0.1:1", "redis-server must run at 127.0.0.1:1"},
		{"jetstream", "-nats", "nats://127.0.0.1:1", "NATS with JetStream must run at nats://127.0.0.1:1"},
		{"rabbitmq", "-amqp", "amqp://guest:secret@127.0.0.1:1/", "RabbitMQ must run at amqp://guest@127.0.0.1:1/"},
	} {
		err := run(context.Background(), []string{"-backend", tc.backend, tc.flag, tc.addr, "-n", "1"}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "secret") {
			t.Errorf("%s at %s: error %v, want %q", tc.backend, tc.addr, err, tc.want)
		}
	}
}

func TestBodySeq(t *testing.T) {
	for _, i := range []int{0, 7, 123456789} {
		if got := seq(body(i)); got != i {
			t.Errorf("seq(body(%d)) = %d", i, got)
		}
	}
	for _, b := range []string{"", "{}", `{"i":x}`, `{"i":1`} {
		if got := seq([]byte(b)); got != -1 {
			t.Errorf("seq(%q) = %d, want -1", b, got)
		}
	}
}
