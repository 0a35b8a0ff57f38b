package ui

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/workq/workq"
)

// DefaultShard is the name an unsharded dashboard accepts for its one
// database (workq.DefaultShard, api.DefaultShard).
const DefaultShard = "default"

// sharded reports whether the dashboard serves several shards (the
// Client's: every view of several comes from the Client's own fan-out).
func (h *Handler) sharded() bool { return len(h.shards) > 1 }

// shardNamed returns the name of the shard called name: "" is the only
// one of an unsharded dashboard and refused (400) on a sharded one; an
// unknown name is a 404.
func (h *Handler) shardNamed(name string) (string, error) {
	if !h.sharded() {
		if name == "" || name == DefaultShard || name == h.shards[0] {
			return h.shards[0], nil
		}
		return "", notFound("There is no shard %q: this dashboard serves one database.", name)
	}
	if name == "" {
		return "", bad("Name the item's shard: this dashboard serves several (%s).", h.shardNames())
	}
	if slices.Contains(h.shards, name) {
		return name, nil
	}
	return "", notFound("There is no shard %q (the shards are %s).", name, h.shardNames())
}

func (h *Handler) shardNames() string { return strings.Join(h.shards, ", ") }

// shardList is the shards' names (none when unsharded), for the pages.
func (h *Handler) shardList() []string {
	if !h.sharded() {
		return nil
	}
	return slices.Clone(h.shards)
}

// shardNotice says which shards did not answer, for a page's notice.
type shardNotice struct {
	Shard string
	Error string
}

// notices are the notices of the shards that failed (Client.EachShard's
// or ListResult.Unavailable's), in the shards' order.
func (h *Handler) notices(ctx context.Context, failed map[string]error) []shardNotice {
	var out []shardNotice
	for _, name := range h.shards {
		if err, ok := failed[name]; ok {
			out = append(out, h.unreachable(ctx, name, err))
		}
	}
	return out
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
// (a form's shard field), else the shard of its name as the Client places
// it (workq.ScheduleKey), the same as the API's.
func (h *Handler) scheduleShard(name, shard string) (string, error) {
	if shard != "" || !h.sharded() {
		return h.shardNamed(shard)
	}
	return h.client.ShardFor(workq.ScheduleKey(name)), nil
}

// shardClient is the Client of the shard called name (a name of
// shardNamed).
func (h *Handler) shardClient(name string) (*workq.Client, error) { return h.client.Shard(name) }

// refName is how a message names an item: SHARD:ID when sharded.
func (h *Handler) refName(r workq.ItemRef) string {
	if h.sharded() {
		return fmt.Sprintf("%s:%d", r.Shard, r.ID)
	}
	return fmt.Sprint(r.ID)
}
