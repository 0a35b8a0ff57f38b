package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"

	amqp "github.com/rabbitmq/amqp091-go"
)

// rabbitQueue is a durable queue with persistent messages. The producer
// publishes with publisher confirms, at most Window unconfirmed (RabbitMQ
// confirms a persistent message routed to a durable queue once it is
// written to disk). Each consumer has its own connection and channel with
// a prefetch of Batch and acknowledges every message on its own (manual
// ack); when all are acknowledged it cancels its subscription and closes
// its channel (anything unacknowledged goes back to the queue), and consume
// returns once the queue reports no message, ready or unacknowledged: the
// server has applied every ack (a quorum queue applies them through its
// log, after the channel has answered).
type rabbitQueue struct {
	o     Options
	conn  *amqp.Connection
	ch    *amqp.Channel // the producer's, in confirm mode
	queue string
	args  amqp.Table
}

func openRabbitClassic(ctx context.Context, o Options, id string) (backend, error) {
	return openRabbit(ctx, o, id, amqp.Table{"x-queue-type": "classic"})
}

func openRabbitQuorum(ctx context.Context, o Options, id string) (backend, error) {
	return openRabbit(ctx, o, id, amqp.Table{"x-queue-type": "quorum"})
}

func dialRabbit(o Options) (*amqp.Connection, error) {
	conn, err := amqp.Dial(o.AMQPURL)
	if err != nil {
		return nil, fmt.Errorf("RabbitMQ must run at %s: %w", redactAMQP(o.AMQPURL), err)
	}
	return conn, nil
}

func openRabbit(_ context.Context, o Options, id string, args amqp.Table) (backend, error) {
	conn, err := dialRabbit(o)
	if err != nil {
		return nil, err
	}
	q := &rabbitQueue{o: o, conn: conn, queue: "brokerbench." + id, args: args}
	if q.ch, err = conn.Channel(); err != nil {
		_ = conn.Close()
		return nil, err
	}
	if _, err := q.ch.QueueDeclare(q.queue, true, false, false, false, args); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("declare queue %s: %w", q.queue, err)
	}
	if err := q.ch.Confirm(false); err != nil {
		_ = q.close(context.Background())
		return nil, err
	}
	return q, nil
}

func (q *rabbitQueue) produce(ctx context.Context, first, n int) error {
	ring := make([]*amqp.DeferredConfirmation, q.o.Window)
	wait := func(dc *amqp.DeferredConfirmation) error {
		if dc == nil {
			return nil
		}
		ok, err := dc.WaitContext(ctx)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("message with delivery tag %d was nacked", dc.DeliveryTag)
		}
		return nil
	}
	for i := first; i < first+n; i++ {
		slot := (i - first) % len(ring)
		if err := wait(ring[slot]); err != nil {
			return err
		}
		dc, err := q.ch.PublishWithDeferredConfirmWithContext(ctx, "", q.queue, false, false, amqp.Publishing{
			DeliveryMode: amqp.Persistent, ContentType: "application/json", Body: body(i),
		})
		if err != nil {
			return err
		}
		ring[slot] = dc
	}
	for _, dc := range ring {
		if err := wait(dc); err != nil {
			return err
		}
	}
	return nil
}

func (q *rabbitQueue) consume(ctx context.Context, n int, seen func(int)) error {
	c := newAckCounter(n)
	err := runConsumers(ctx, c, q.o.Consumers, func(ctx context.Context, k int) error {
		conn, err := dialRabbit(q.o)
		if err != nil {
			return err
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err != nil {
			return err
		}
		if err := ch.Qos(q.o.Batch, 0, false); err != nil {
			return err
		}
		tag := "c" + strconv.Itoa(k)
		deliveries, err := ch.Consume(q.queue, tag, false, false, false, false, nil)
		if err != nil {
			return err
		}
		for !c.finished() {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case d, ok := <-deliveries:
				if !ok {
					return errors.New("delivery channel closed")
				}
				seen(seq(d.Body))
				if err := d.Ack(false); err != nil {
					return err
				}
				c.add(1)
			}
		}
		if err := ch.Cancel(tag, false); err != nil {
			return err
		}
		return ch.Close()
	})
	if err != nil {
		return err
	}
	return waitEmpty(ctx, q.remaining)
}

func (q *rabbitQueue) remaining(context.Context) (int64, error) {
	// Consumers have closed their channels: anything unacknowledged is back
	// among the ready messages, which the passive declare counts.
	st, err := q.ch.QueueDeclarePassive(q.queue, true, false, false, false, q.args)
	if err != nil {
		return 0, err
	}
	return int64(st.Messages), nil
}

func (q *rabbitQueue) close(context.Context) error {
	_, err := q.ch.QueueDelete(q.queue, false, false, false)
	return errors.Join(err, q.conn.Close())
}

// redactAMQP drops the password from an AMQP URL for error messages.
func redactAMQP(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable AMQP URL)"
	}
	if p.User != nil {
		p.User = url.User(p.User.Username())
	}
	return p.String()
}
