package ui

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/workq/workq/internal/shardlist"
	"github.com/workq/workq/workqtype"
)

// DefaultShard is the name an unsharded dashboard accepts for its one
// database (workq.DefaultShard, api.DefaultShard).
const DefaultShard = "default"

// sharded reports whether the dashboard serves several shards.
func (h *Handler) sharded() bool { return len(h.o.Shards) > 0 }

// shardNamed returns the shard called name: "" is the only one of an
// unsharded dashboard and refused (400) on a sharded one; an unknown name
// is a 404.
func (h *Handler) shardNamed(name string) (Shard, error) {
	if !h.sharded() {
		if name == "" || name == DefaultShard {
			return h.shards[0], nil
		}
		return Shard{}, notFound("There is no shard %q: this dashboard serves one database.", name)
	}
	if name == "" {
		return Shard{}, bad("Name the item's shard: this dashboard serves several (%s).", h.shardNames())
	}
	for _, sh := range h.shards {
		if sh.Name == name {
			return sh, nil
		}
	}
	return Shard{}, notFound("There is no shard %q (the shards are %s).", name, h.shardNames())
}

func (h *Handler) shardNames() string {
	names := make([]string, len(h.shards))
	for i, sh := range h.shards {
		names[i] = sh.Name
	}
	return strings.Join(names, ", ")
}

// shardList is the shards' names (none when unsharded), for the pages.
func (h *Handler) shardList() []string {
	if !h.sharded() {
		return nil
	}
	return strings.Split(h.shardNames(), ", ")
}

// listShards are the shards for internal/shardlist.
func (h *Handler) listShards(only string) []shardlist.Shard {
	var out []shardlist.Shard
	for _, sh := range h.shards {
		if only == "" || sh.Name == only {
			out = append(out, shardlist.Shard{Name: sh.Name, DB: sh.DB})
		}
	}
	return out
}

// shardNotice says which shards did not answer, for a page's notice.
type shardNotice struct {
	Shard string
	Error string
}

// eachShard runs f on every shard at once, each bounded by ShardTimeout,
// and returns what each returned, in the shards' order, and the shards
// that failed.
func eachShard[T any](ctx context.Context, h *Handler, f func(ctx context.Context, sh Shard) (T, error)) ([]T, []shardNotice) {
	out := make([]T, len(h.shards))
	errs := make([]error, len(h.shards))
	var wg sync.WaitGroup
	for i, sh := range h.shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sctx, cancel := context.WithTimeout(ctx, h.o.ShardTimeout)
			defer cancel()
			out[i], errs[i] = f(sctx, sh)
		}()
	}
	wg.Wait()
	var down []shardNotice
	for i, err := range errs {
		if err != nil {
			down = append(down, h.unreachable(ctx, h.shards[i].Name, err))
		}
	}
	return out, down
}

// unreachable logs a shard's error and says it in a notice (the error
// itself, which may name hosts, stays in the log).
func (h *Handler) unreachable(ctx context.Context, shard string, err error) shardNotice {
	h.log.WarnContext(ctx, "dashboard: shard unreachable", "shard", shard, "err", err)
	if errors.Is(err, context.DeadlineExceeded) {
		return shardNotice{Shard: shard, Error: fmt.Sprintf("did not answer within %s", h.o.ShardTimeout)}
	}
	return shardNotice{Shard: shard, Error: "could not be read (the server log has the error)"}
}

// scheduleShard is the shard of the schedule called name: the one named
// (a form's shard field), else the shard of its name as workq.Client
// places it (workqtype.ShardKeySchedule), the same as the API's.
func (h *Handler) scheduleShard(name, shard string) (Shard, error) {
	if shard != "" || !h.sharded() {
		return h.shardNamed(shard)
	}
	names := make([]string, len(h.shards))
	for i, sh := range h.shards {
		names[i] = sh.Name
	}
	return h.shards[workqtype.ShardIndex(names, workqtype.ShardKeySchedule(name))], nil
}
