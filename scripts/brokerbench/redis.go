package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// blockFor is how long a blocking read waits before the consumer checks
// again whether all messages are acknowledged.
const blockFor = 10 * time.Millisecond

func dialRedis(ctx context.Context, o Options) (*redis.Client, error) {
	rdb := redis.NewClient(&redis.Options{Addr: o.RedisAddr, PoolSize: max(o.Consumers+4, 10)})
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("redis-server must run at %s: %w", o.RedisAddr, err)
	}
	return rdb, nil
}

// redisList is the reliable-queue pattern: a consumer moves a message from
// the queue to a processing list (LMOVE, atomically) and removes it from
// there once handled (LREM). A crashed consumer's messages stay in the
// processing list; putting them back after a timeout is the application's
// job (there is no lease), and it is not part of this measurement.
type redisList struct {
	rdb               *redis.Client
	o                 Options
	queue, processing string
}

func openRedisList(ctx context.Context, o Options, id string) (backend, error) {
	rdb, err := dialRedis(ctx, o)
	if err != nil {
		return nil, err
	}
	return &redisList{rdb: rdb, o: o, queue: "brokerbench:" + id + ":queue", processing: "brokerbench:" + id + ":processing"}, nil
}

func (q *redisList) produce(ctx context.Context, first, n int) error {
	for i := first; i < first+n; i += q.o.Window {
		vals := make([]any, 0, q.o.Window)
		for j := i; j < min(i+q.o.Window, first+n); j++ {
			vals = append(vals, body(j))
		}
		if err := q.rdb.RPush(ctx, q.queue, vals...).Err(); err != nil {
			return err
		}
	}
	return nil
}

func (q *redisList) consume(ctx context.Context, n int, seen func(int)) error {
	c := newAckCounter(n)
	return runConsumers(ctx, c, q.o.Consumers, func(ctx context.Context, _ int) error {
		for !c.finished() {
			got, err := q.take(ctx)
			if err != nil {
				return err
			}
			for _, v := range got {
				seen(seq([]byte(v))) // the no-op handler
			}
			if err := q.ack(ctx, got); err != nil {
				return err
			}
			c.add(len(got))
		}
		return nil
	})
}

// take moves up to Batch messages to the processing list: one BLMOVE when
// Batch is 1 or the queue is empty, else a pipeline of LMOVEs.
func (q *redisList) take(ctx context.Context) ([]string, error) {
	if q.o.Batch > 1 {
		cmds, err := q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for range q.o.Batch {
				p.LMove(ctx, q.queue, q.processing, "LEFT", "RIGHT")
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, err
		}
		var got []string
		for _, cmd := range cmds {
			v, err := cmd.(*redis.StringCmd).Result()
			if errors.Is(err, redis.Nil) {
				break // the queue ran empty
			}
			if err != nil {
				return nil, err
			}
			got = append(got, v)
		}
		if len(got) > 0 {
			return got, nil
		}
	}
	// BLMOVE by hand: go-redis's BLMove rounds its timeout up to a second.
	v, err := q.rdb.Do(ctx, "blmove", q.queue, q.processing, "left", "right", blockFor.Seconds()).Text()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return []string{v}, nil
}

// ack removes handled messages from the processing list, one LREM each,
// pipelined; each must remove exactly one element.
func (q *redisList) ack(ctx context.Context, got []string) error {
	if len(got) == 0 {
		return nil
	}
	cmds, err := q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, v := range got {
			p.LRem(ctx, q.processing, 1, v)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, cmd := range cmds {
		if cmd.(*redis.IntCmd).Val() != 1 {
			return fmt.Errorf("ack of %s removed %d elements of the processing list", got[i], cmd.(*redis.IntCmd).Val())
		}
	}
	return nil
}

func (q *redisList) remaining(ctx context.Context) (int64, error) {
	a, err := q.rdb.LLen(ctx, q.queue).Result()
	if err != nil {
		return 0, err
	}
	b, err := q.rdb.LLen(ctx, q.processing).Result()
	return a + b, err
}

func (q *redisList) close(ctx context.Context) error {
	return errors.Join(q.rdb.Del(ctx, q.queue, q.processing).Err(), q.rdb.Close())
}

// redisStream is a stream with one consumer group: XADD to enqueue,
// XREADGROUP to receive (entries stay pending until acknowledged, and
// XAUTOCLAIM can hand a crashed consumer's pending entries to another),
// XACK to acknowledge. Acknowledged entries stay in the stream until it is
// trimmed; trimming is not part of this measurement.
type redisStream struct {
	rdb    *redis.Client
	o      Options
	stream string
}

const streamGroup = "workers"

func openRedisStream(ctx context.Context, o Options, id string) (backend, error) {
	rdb, err := dialRedis(ctx, o)
	if err != nil {
		return nil, err
	}
	q := &redisStream{rdb: rdb, o: o, stream: "brokerbench:" + id + ":stream"}
	if err := rdb.XGroupCreateMkStream(ctx, q.stream, streamGroup, "$").Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("create stream %s: %w", q.stream, err)
	}
	return q, nil
}

func (q *redisStream) produce(ctx context.Context, first, n int) error {
	for i := first; i < first+n; i += q.o.Window {
		_, err := q.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for j := i; j < min(i+q.o.Window, first+n); j++ {
				p.XAdd(ctx, &redis.XAddArgs{Stream: q.stream, Values: []any{"b", body(j)}})
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (q *redisStream) consume(ctx context.Context, n int, seen func(int)) error {
	c := newAckCounter(n)
	return runConsumers(ctx, c, q.o.Consumers, func(ctx context.Context, k int) error {
		name := "c" + strconv.Itoa(k)
		for !c.finished() {
			streams, err := q.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
				Group: streamGroup, Consumer: name, Streams: []string{q.stream, ">"},
				Count: int64(q.o.Batch), Block: blockFor,
			}).Result()
			if errors.Is(err, redis.Nil) {
				continue
			}
			if err != nil {
				return err
			}
			var ids []string
			for _, s := range streams {
				for _, m := range s.Messages {
					b, _ := m.Values["b"].(string)
					seen(seq([]byte(b)))
					ids = append(ids, m.ID)
				}
			}
			if len(ids) == 0 {
				continue
			}
			acked, err := q.rdb.XAck(ctx, q.stream, streamGroup, ids...).Result()
			if err != nil {
				return err
			}
			if acked != int64(len(ids)) {
				return fmt.Errorf("XACK of %d entries acknowledged %d", len(ids), acked)
			}
			c.add(len(ids))
		}
		return nil
	})
}

func (q *redisStream) remaining(ctx context.Context) (int64, error) {
	groups, err := q.rdb.XInfoGroups(ctx, q.stream).Result()
	if err != nil {
		return 0, err
	}
	for _, g := range groups {
		if g.Name == streamGroup {
			if g.Lag < 0 {
				return 0, fmt.Errorf("stream %s: lag unknown", q.stream)
			}
			return g.Pending + g.Lag, nil
		}
	}
	return 0, fmt.Errorf("stream %s has no group %s", q.stream, streamGroup)
}

func (q *redisStream) close(ctx context.Context) error {
	return errors.Join(q.rdb.Del(ctx, q.stream).Err(), q.rdb.Close())
}
