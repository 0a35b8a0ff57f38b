package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// jsQueue is a JetStream work-queue stream (a message is deleted once a
// consumer acknowledges it) on file storage with one replica, and one
// durable pull consumer with explicit acks (AckWait 30 s, the lease's
// default length in workq, after which an unacknowledged message is
// redelivered). Publishing is asynchronous with at most Window PubAcks
// outstanding; each message is acknowledged with Ack (no reply awaited),
// and consume returns once the stream is empty, that is once the server has
// applied every ack.
type jsQueue struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	o       Options
	stream  string
	subject string
	cons    jetstream.Consumer
	pubErr  atomic.Pointer[error]
}

func openJetStream(ctx context.Context, o Options, id string) (backend, error) {
	nc, err := nats.Connect(o.NATSURL, nats.Timeout(5*time.Second))
	if err != nil {
		return nil, fmt.Errorf("NATS with JetStream must run at %s (nats-server -js): %w", o.NATSURL, err)
	}
	q := &jsQueue{nc: nc, o: o, stream: "BROKERBENCH_" + strings.ToUpper(id), subject: "brokerbench." + id}
	q.js, err = jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(o.Window),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, _ *nats.Msg, err error) {
			q.pubErr.CompareAndSwap(nil, &err)
		}))
	if err != nil {
		nc.Close()
		return nil, err
	}
	s, err := q.js.CreateStream(ctx, jetstream.StreamConfig{
		Name: q.stream, Subjects: []string{q.subject},
		Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage, Replicas: 1,
	})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("create JetStream stream on %s (is JetStream enabled?): %w", o.NATSURL, err)
	}
	q.cons, err = s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: "workers", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second,
	})
	if err != nil {
		_ = q.close(ctx)
		return nil, err
	}
	return q, nil
}

func (q *jsQueue) produce(ctx context.Context, first, n int) error {
	for i := first; i < first+n; i++ {
		// The window is full for as long as PubAcks are slow (a loaded
		// machine): wait up to 30 s for room, as a producer would.
		if _, err := q.js.PublishAsync(q.subject, body(i), jetstream.WithStallWait(30*time.Second)); err != nil {
			return err
		}
		if p := q.pubErr.Load(); p != nil {
			return *p
		}
	}
	select {
	case <-q.js.PublishAsyncComplete():
	case <-ctx.Done():
		return ctx.Err()
	}
	if p := q.pubErr.Load(); p != nil {
		return *p
	}
	return nil
}

func (q *jsQueue) consume(ctx context.Context, n int, seen func(int)) error {
	c := newAckCounter(n)
	err := runConsumers(ctx, c, q.o.Consumers, func(ctx context.Context, _ int) error {
		it, err := q.cons.Messages(jetstream.PullMaxMessages(q.o.Batch))
		if err != nil {
			return err
		}
		stopped := make(chan struct{})
		defer close(stopped)
		go func() {
			select {
			case <-ctx.Done():
			case <-stopped:
			}
			it.Stop()
		}()
		for !c.finished() {
			msg, err := it.Next()
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return ctx.Err()
			}
			if err != nil {
				return err
			}
			seen(seq(msg.Data()))
			if err := msg.Ack(); err != nil {
				return err
			}
			c.add(1)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return waitEmpty(ctx, q.remaining)
}

func (q *jsQueue) remaining(ctx context.Context) (int64, error) {
	s, err := q.js.Stream(ctx, q.stream)
	if err != nil {
		return 0, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, err
	}
	return int64(info.State.Msgs), nil
}

func (q *jsQueue) close(ctx context.Context) error {
	err := q.js.DeleteStream(ctx, q.stream)
	q.nc.Close()
	return err
}
