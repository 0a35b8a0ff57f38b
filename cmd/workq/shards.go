package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/workq/workq"
	"github.com/workq/workq/config"
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
		if !strings.HasPrefix(v, "postgres://") && !strings.HasPrefix(v, "postgresql://") {
			n, u, ok := strings.Cut(v, "=")
			if !ok || n == "" || u == "" {
				return nil, fmt.Errorf("--shard %d: %q is not NAME=URL or a postgres:// URL", i+1, v)
			}
			name, url = n, u
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
// database URL replaced by the shard's); done closes them all.
func connectShards(ctx context.Context, cfg config.Config, log *slog.Logger, specs []shardSpec, use schemaUse) ([]workq.Shard, func(), error) {
	var shards []workq.Shard
	var dones []func()
	done := func() {
		for _, d := range dones {
			d()
		}
	}
	for _, s := range specs {
		c := cfg
		c.DatabaseURL = s.url
		pool, d, err := connect(ctx, &c, log, use)
		if err != nil {
			done()
			return nil, nil, fmt.Errorf("shard %s: %w", s.name, err)
		}
		dones = append(dones, d)
		shards = append(shards, workq.Shard{Name: s.name, Pool: pool})
	}
	return shards, done, nil
}
