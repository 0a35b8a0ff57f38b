package workq

import (
	"context"
	"fmt"
	"time"

	"github.com/workq/workq/internal/kinds"
	"github.com/workq/workq/internal/lease"
)

// WaitsFor says what flow control holds the item ref names back now, as
// FlowStatus.WaitsFor words it: a paused kind, a throttle, a rate window
// used up, a queue or a kind at its concurrency (its items in progress
// counted now), and for a job with a limit key its key's rule, read
// exactly (the key's items in progress and its starts in the rule's
// window). It reads the item and its shard's flow control; an item that
// is not ready (in progress, finished) waits for nothing and gets nil, as
// does one that no flow control holds. Its queue's pause and limit W are not here:
// QueueInfo has them. A missing item is an error wrapping ErrNotFound.
func (c *Client) WaitsFor(ctx context.Context, ref ItemRef) (_ []string, err error) {
	defer c.notMigrated(&err)
	it, err := c.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	if it.Status != "ready" {
		return nil, nil
	}
	sc, err := c.Shard(it.Shard)
	if err != nil {
		return nil, err
	}
	ls, err := lease.ReadFlow(ctx, sc.db)
	if err != nil {
		return nil, fmt.Errorf("workq: waits for %s: %w", ref, err)
	}
	var s FlowStatus
	s.add(it.Shard, ls)
	kind := it.Kind
	if k, ok := kinds.Of(it.Table); ok && k.ClaimedKind == kinds.WordSource {
		kind, _ = it.Details["source"].(string)
	}
	key := ""
	if it.Table == TableJobRuns {
		if key, err = lease.JobLimitKey(ctx, sc.db, it.ID); err != nil {
			return nil, fmt.Errorf("workq: waits for %s: %w", ref, err)
		}
	}
	for _, l := range s.Limits {
		if l.PerKey || l.Concurrency == 0 || l.Table != it.Table || l.Queue != it.Queue || (l.Kind != "" && l.Kind != kind) {
			continue
		}
		n, err := lease.ReadFlowScopeInProgress(ctx, sc.db, l.Table, l.Queue, l.Kind)
		if err != nil {
			return nil, fmt.Errorf("workq: waits for %s: %w", ref, err)
		}
		if s.inProgress == nil {
			s.inProgress = map[flowScopeRef]int64{}
		}
		s.inProgress[flowScopeRef{l.Table, l.Queue, l.Shard, l.Kind}] = n
	}
	if key != "" {
		for _, l := range s.Limits {
			if !l.PerKey || l.Table != it.Table || l.Queue != it.Queue {
				continue
			}
			period := l.Period
			if period == 0 {
				period = time.Second
			}
			u, err := lease.ReadFlowKey(ctx, sc.db, it.Queue, key, period)
			if err != nil {
				return nil, fmt.Errorf("workq: waits for %s: %w", ref, err)
			}
			if s.keys == nil {
				s.keys = map[flowKeyRef]lease.FlowKeyUse{}
			}
			s.keys[flowKeyRef{queue: l.Queue, shard: l.Shard, key: key, period: period}] = u
		}
	}
	return s.WaitsFor(it.Table, it.Queue, it.Shard, kind, key), nil
}
