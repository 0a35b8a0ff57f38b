package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/config"
	"github.com/workq/workq/internal/redact"
)

// shardSpec is one --shard: a name and a database URL.
type shardSpec struct{ name, url string }

// parseShards reads --shard values: NAME=URL, or a bare postgres:// URL
// (named s1, s2... by position). A keyword/value connection string needs
// its name (eu=host=db1 dbname=app). Names are checked by
// workq.NewShardedClient (and api.New), repeats here.
func parseShards(values []string) ([]shardSpec, error) {
	var out []shardSpec
	seen := map[string]bool{}
	for i, v := range values {
		v = strings.TrimSpace(v)
		name, url := fmt.Sprintf("s%d", i+1), v
		if s, _, ok := strings.Cut(v, "://"); ok && !strings.ContainsAny(s, " =") { // a bare URL, not NAME=URL
			if err := checkDatabaseURL(fmt.Sprintf("--shard %d", i+1), v); err != nil {
				return nil, err
			}
		} else {
			n, u, ok := strings.Cut(v, "=")
			if !ok || n == "" || u == "" {
				return nil, fmt.Errorf("--shard %d: %q is not NAME=URL or a postgres:// URL", i+1, redact.URL(v))
			}
			name, url = n, u
			if err := checkDatabaseURL(fmt.Sprintf("--shard %s", n), u); err != nil {
				return nil, err
			}
		}
		if seen[name] {
			return nil, fmt.Errorf("--shard: name %q is given twice", name)
		}
		seen[name] = true
		out = append(out, shardSpec{name: name, url: url})
	}
	return out, nil
}

// connectShards opens a pool on each shard with cfg's settings (its
// database URL replaced by the shard's); done closes them all. The first
// shard that fails fails it, naming the shard.
func connectShards(ctx context.Context, cfg config.Config, log *slog.Logger, specs []shardSpec, use schemaUse) ([]workq.Shard, func(), error) {
	dialed, done := dialShards(ctx, cfg, log, specs, use, 0)
	shards := make([]workq.Shard, len(dialed))
	for i, d := range dialed {
		if d.err != nil {
			done()
			return nil, nil, fmt.Errorf("shard %s: %w", d.name, d.err)
		}
		shards[i] = workq.Shard{Name: d.name, Pool: d.pool}
	}
	return shards, done, nil
}

// dialedShard is one shard's pool, or why it could not be opened.
type dialedShard struct {
	name string
	pool *pgxpool.Pool // nil when err is set
	err  error
}

// dialShards opens a pool on every shard at once with cfg's settings (its
// database URL replaced by the shard's), each bounded by timeout (0: by ctx
// only). A shard that fails keeps its error, the others are open: the
// caller decides whether one shard down fails it. done closes them all.
func dialShards(ctx context.Context, cfg config.Config, log *slog.Logger, specs []shardSpec, use schemaUse, timeout time.Duration) ([]dialedShard, func()) {
	out := make([]dialedShard, len(specs))
	dones := make([]func(), len(specs))
	var wg sync.WaitGroup
	for i, s := range specs {
		out[i].name = s.name
		wg.Add(1)
		go func() {
			defer wg.Done()
			dctx, cancel := ctx, context.CancelFunc(func() {})
			if timeout > 0 {
				dctx, cancel = context.WithTimeout(ctx, timeout)
			}
			defer cancel()
			c := cfg
			c.DatabaseURL = s.url
			pool, d, err := connect(dctx, &c, log, use)
			if err != nil {
				out[i].err = err
				return
			}
			out[i].pool, dones[i] = pool, d
		}()
	}
	wg.Wait()
	return out, func() {
		for _, d := range dones {
			if d != nil {
				d()
			}
		}
	}
}
