package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/workq/workq/internal/lease"
	"github.com/workq/workq/internal/lock"
	"github.com/workq/workq/internal/shardlimit"
)

func newShardLimitCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use: "shard-limit --shard NAME=URL... --limit TABLE/QUEUE=W...",
		Short: "Keep a global limit W of in-progress items per (table, queue) across shard databases: " +
			"a leader moves per-shard budgets, lowering before raising (docs/scale-out.md)",
		Long: "Runs the shardlimit Rebalancer until SIGTERM. Run it in one or more processes: the one holding the leader " +
			"lock on the first shard (the coordinator) leads. Each shard's budget is its own `workq limit` row; while the " +
			"coordinator is down the budgets stay as they are, and a shard the leader cannot reach keeps its budget.",
		Args: cobra.NoArgs,
	}
	cfg := bindConfig(cmd, "schema", "max-conns", "worker-id", "log-level", "log-format")
	shardArgs := cmd.Flags().StringArray("shard", nil, "a shard as NAME=DATABASE_URL, repeated; the first holds the leader lock")
	limitArgs := cmd.Flags().StringArray("limit", nil, "a global limit as TABLE/QUEUE=W (e.g. job_runs/emails=100), repeated")
	interval := cmd.Flags().Duration("interval", shardlimit.DefaultInterval, "how often the leader reads demand and moves budgets")
	shardTimeout := cmd.Flags().Duration("shard-timeout", 2*time.Second, "bound of each read or write on one shard; a shard slower than it is unreachable for the round")
	lockTTL := cmd.Flags().Duration("lock-ttl", lock.DefaultTTL, "TTL of the leader lock on the coordinator")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := cfg.Validate(); err != nil {
			return err
		}
		var limits []shardlimit.Limit
		for _, a := range *limitArgs {
			l, err := parseShardLimit(a)
			if err != nil {
				return err
			}
			limits = append(limits, l)
		}
		if len(*shardArgs) == 0 || len(limits) == 0 {
			return fmt.Errorf("at least one --shard NAME=URL and one --limit TABLE/QUEUE=W are needed")
		}
		log := newLogger(cfg, cmd.ErrOrStderr())
		ctx := cmd.Context()
		specs, err := parseShards(*shardArgs)
		if err != nil {
			return err
		}
		pools, done, err := connectShards(ctx, *cfg, log, specs, needSchema)
		if err != nil {
			return err
		}
		defer done()
		shards := make([]shardlimit.Shard, len(pools))
		for i, p := range pools {
			shards[i] = shardlimit.Shard{Name: p.Name, DB: inSchema(cfg, p.Pool)}
		}
		r, err := shardlimit.New(shards, shardlimit.Options{
			Limits: limits, Interval: *interval, ShardTimeout: *shardTimeout, LockTTL: *lockTTL,
			Owner: cfg.WorkerID, Logger: log,
		})
		if err != nil {
			return err
		}
		log.Info("shard-limit: running", "shards", len(shards), "limits", len(limits), "interval", *interval)
		return r.Run(ctx)
	}
	return cmd
}

// parseShardLimit parses TABLE/QUEUE=W.
func parseShardLimit(s string) (shardlimit.Limit, error) {
	tq, ws, ok := strings.Cut(s, "=")
	table, queue, ok2 := strings.Cut(tq, "/")
	if !ok || !ok2 {
		return shardlimit.Limit{}, fmt.Errorf("--limit %q: want TABLE/QUEUE=W", s)
	}
	t, err := lease.ParseTable(table)
	if err != nil {
		return shardlimit.Limit{}, fmt.Errorf("--limit %q: %w", s, err)
	}
	w, err := strconv.Atoi(ws)
	if err != nil || w < 0 {
		return shardlimit.Limit{}, fmt.Errorf("--limit %q: W must be a whole number from 0 to %d", s, lease.MaxLimit)
	}
	l := shardlimit.Limit{Table: t, Queue: queue, W: w}
	if err := lease.CheckLimit(t, queue, w); err != nil {
		return shardlimit.Limit{}, fmt.Errorf("--limit %q: %w", s, err)
	}
	return l, nil
}
