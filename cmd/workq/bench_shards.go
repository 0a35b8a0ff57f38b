package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/clienthook"
	"github.com/workq/workq/internal/config"
	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/worker/builtin"
)

// shardBenchResult is what `workq bench --shards` reports: the total and
// each shard's jobs/s over one window.
type shardBenchResult struct {
	Mode       string            `json:"mode"` // burn-down, continuous
	Shards     int               `json:"shards"`
	Jobs       int64             `json:"jobs"`
	Seconds    float64           `json:"seconds"`
	JobsPerSec float64           `json:"jobs_per_sec"`
	PerShard   []shardBenchShard `json:"per_shard"`
	Config     map[string]string `json:"config"`
}

type shardBenchShard struct {
	Name       string  `json:"name"`
	Jobs       int64   `json:"jobs"`
	JobsPerSec float64 `json:"jobs_per_sec"`
}

// benchShards runs the job-run bench on a sharded Client: the jobs are
// spread over the shards (EnqueueManyFast of each shard, evenly), one
// Client works them all from one set of handler slots, and each shard's
// committed completions are counted apart (its worker's Stats().Done).
// Burn-down (n) or continuous (d > 0: each shard's backlog kept topped
// up).
func benchShards(ctx context.Context, cfg config.Config, log *slog.Logger, specs []shardSpec, n int, d time.Duration, maintenance bool, out io.Writer, asJSON bool) error {
	shards, done, err := connectShards(ctx, cfg, log, specs, migrates)
	if err != nil {
		return err
	}
	defer done()
	copier := jobq.New(jobq.Options{})
	for _, s := range shards {
		c := cfg
		if _, err := migrateUp(ctx, &c, s.Pool); err != nil {
			return fmt.Errorf("shard %s: %w", s.Name, err)
		}
		if err := benchReset(ctx, inSchema(&cfg, s.Pool)); err != nil {
			return fmt.Errorf("shard %s: %w", s.Name, err)
		}
	}
	insert := func(ctx context.Context, s workq.Shard, k int) error {
		jobs := make([]jobq.Job, k)
		for i := range jobs {
			jobs[i] = jobq.Job{Queue: benchQueue, Kind: builtin.NoopKind}
		}
		_, err := copier.EnqueueManyFast(ctx, inSchema(&cfg, s.Pool).(jobq.CopyDB), jobs)
		return err
	}
	if d == 0 {
		start := time.Now()
		for i, s := range shards {
			per := n / len(shards)
			if i < n%len(shards) {
				per++
			}
			for j := 0; j < per; j += 5000 {
				if err := insert(ctx, s, min(5000, per-j)); err != nil {
					return fmt.Errorf("shard %s: %w", s.Name, err)
				}
			}
			if _, err := inSchema(&cfg, s.Pool).Exec(ctx, "vacuum analyze workq.job_runs"); err != nil {
				return err
			}
		}
		fmt.Fprintf(out, "inserted %d jobs over %d shards (%.0f/s); working them\n", n, len(shards), float64(n)/time.Since(start).Seconds())
	}

	ws := workq.NewWorkers()
	if err := clienthook.HandleJob(ws, builtin.NoopKind, builtin.Noop); err != nil {
		return err
	}
	c := clientConfig(cfg, nil, ws, nil)
	c.Maintenance.Disabled = !maintenance
	client, err := workq.NewShardedClient(shards, c)
	if err != nil {
		return err
	}
	doneOf := func() []int64 {
		out := make([]int64, len(shards))
		for i, s := range shards {
			sc, _ := client.Shard(s.Name)
			out[i] = sc.Stats().Done
		}
		return out
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- client.Run(wctx) }()

	res := shardBenchResult{Shards: len(shards), Config: map[string]string{}}
	for _, st := range benchSettings(cfg, enqueueCopy, 1) {
		res.Config[st[0]] = st[1]
	}
	var base []int64
	var start time.Time
	var producers sync.WaitGroup
	pctx, stopProducers := context.WithCancel(ctx)
	defer stopProducers()
	if d == 0 {
		res.Mode = "burn-down"
		base, start = make([]int64, len(shards)), time.Now()
		for {
			if client.Stats().Done >= int64(n) {
				break
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			time.Sleep(2 * time.Millisecond)
		}
	} else {
		res.Mode = "continuous"
		backlog := int64(max(4*cfg.Batch, 5000))
		for _, s := range shards {
			sc, _ := client.Shard(s.Name)
			producers.Add(1)
			go func() {
				defer producers.Done()
				var inserted int64
				for pctx.Err() == nil {
					if inserted-sc.Stats().Claimed >= backlog {
						time.Sleep(time.Millisecond)
						continue
					}
					if err := insert(pctx, s, 1000); err == nil {
						inserted += 1000
					}
				}
			}()
		}
		time.Sleep(time.Second) // warm-up
		base, start = doneOf(), time.Now()
		sleepOrDone(ctx, d)
	}
	end := doneOf()
	elapsed := time.Since(start)
	stopProducers()
	producers.Wait()
	stop()
	if err := <-errc; err != nil {
		return err
	}
	res.Seconds = elapsed.Seconds()
	for i, s := range shards {
		jobs := end[i] - base[i]
		res.Jobs += jobs
		res.PerShard = append(res.PerShard, shardBenchShard{Name: s.Name, Jobs: jobs, JobsPerSec: float64(jobs) / elapsed.Seconds()})
	}
	res.JobsPerSec = float64(res.Jobs) / elapsed.Seconds()
	if asJSON {
		return printJSON(out, res)
	}
	var parts []string
	for _, p := range res.PerShard {
		parts = append(parts, fmt.Sprintf("%s %d jobs = %.0f/s", p.Name, p.Jobs, p.JobsPerSec))
	}
	fmt.Fprintf(out, "%s over %d shards: %d jobs in %.2fs = %.0f jobs/s (%s; concurrency %d per queue shared by the shards, batch %d, conns %d per shard)\n",
		res.Mode, res.Shards, res.Jobs, res.Seconds, res.JobsPerSec, strings.Join(parts, ", "), cfg.Concurrency, cfg.Batch, cfg.MaxConns)
	return nil
}
