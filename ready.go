package workq

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/workq/workq/internal/db"
	"github.com/workq/workq/internal/shardlist"
)

// Ready checks that the Client can serve: every database of it (every
// shard's, at once) answers, and its schema is migrated to the version this
// code needs (a newer one is fine: a rolling deploy migrates first). It
// returns the schema version, on a sharded Client the lowest over the
// shards. A schema that is behind gives an error matching ErrSchemaBehind
// (and ErrNotMigrated when it never was), naming the command that
// migrates it; a database that does not answer gives another error. On a
// sharded Client the error is a *ShardsError naming the shards that are
// not ready. It runs one statement per shard (two on a schema behind): a
// readiness probe's check (the HTTP API's /readyz is it), which needs
// neither workers nor a started Client.
func (c *Client) Ready(ctx context.Context) (schemaVersion int64, err error) {
	if err := checkCtx(ctx); err != nil {
		return 0, err
	}
	shards, _ := c.shardsOf("")
	answers := shardlist.Each(ctx, shards, 0, func(ctx context.Context, sh shardlist.Shard) (int64, error) {
		sc, err := c.Shard(sh.Name)
		if err != nil {
			return 0, err
		}
		v, err := db.SchemaVersion(ctx, sc.db)
		if err != nil {
			return 0, err
		}
		if v < db.LatestVersion() {
			return v, sc.checkSchema(ctx) // its message, naming the command that migrates
		}
		return v, nil
	})
	if err := unavailable("ready", answers); err != nil {
		return 0, err
	}
	for i, a := range answers {
		if i == 0 || a.Value < schemaVersion {
			schemaVersion = a.Value
		}
	}
	return schemaVersion, nil
}

// ShardsError is the error of an operation on every shard of a sharded
// Client that failed on some of them (ListQueues, PauseQueue and
// ResumeQueue without a shard, Ready): Failed has each of those shards'
// error; the others are done (a pause or resume is safe to repeat).
// errors.Is and errors.As see the shards' errors.
type ShardsError struct {
	Op     string           // what failed: "list queues", "pause job_runs/default"...
	Failed map[string]error // by shard name: why it failed there
}

// Shards are the names of the shards that failed, sorted.
func (e *ShardsError) Shards() []string { return slices.Sorted(maps.Keys(e.Failed)) }

func (e *ShardsError) Error() string {
	names := e.Shards()
	errs := make([]string, len(names))
	for i, n := range names {
		errs[i] = fmt.Sprintf("shard %s: %v", n, e.Failed[n])
	}
	return fmt.Sprintf("workq: %s failed on shard(s) %s (the others are done; it is safe to repeat): %s",
		e.Op, strings.Join(names, ", "), strings.Join(errs, "\n"))
}

// Unwrap is the shards' errors, in the order of their names.
func (e *ShardsError) Unwrap() []error {
	names := e.Shards()
	out := make([]error, len(names))
	for i, n := range names {
		out[i] = e.Failed[n]
	}
	return out
}
