package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/workq/workq"
	"github.com/workq/workq/db"
	"github.com/workq/workq/db/gen"
	"github.com/workq/workq/lease"
	"github.com/workq/workq/reaper"
	"github.com/workq/workq/worker"
)

func newRunCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Migrate and run workq in one process (worker + reaper) with a live demo; starts a throwaway PostgreSQL when DATABASE_URL is unset",
		Args:  cobra.NoArgs,
	}
	cfg := bindConfig(cmd, append(workerFlags, "reap-interval", "reap-batch")...)
	f := cmd.Flags()
	demoJobs := f.Int("demo-jobs", 300, "sample jobs to enqueue (0 = no demo)")
	runFor := f.Duration("for", 0, "stop this long after the worker started (0 = until Ctrl-C)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := cfg.Validate(); err != nil {
			return err
		}
		if *demoJobs < 0 {
			return fmt.Errorf("--demo-jobs must not be negative, got %d", *demoJobs)
		}
		if *runFor < 0 {
			return fmt.Errorf("--for must not be negative (0 runs until Ctrl-C), got %s", *runFor)
		}
		ctx := cmd.Context()
		log := newLogger(cfg, cmd.ErrOrStderr())
		pool, done, err := connect(ctx, cfg, log, true)
		if err != nil {
			return err
		}
		defer done()
		v, err := db.MigrateUp(ctx, cfg.DatabaseURL)
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		fmt.Fprintf(out, "workq: schema at version %d; worker %s on queues %v (Ctrl-C to stop)\n", v, cfg.WorkerID, cfg.Queues)

		w, err := newBuiltinWorker(pool, *cfg, log)
		if err != nil {
			return err
		}
		if err := registerDemo(w); err != nil {
			return err
		}
		r, err := reaper.New(pool, cfg.ReapInterval, cfg.ReapBatch, log)
		if err != nil {
			return err
		}
		ctx, stop := context.WithCancel(ctx)
		defer stop()
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); _ = r.Run(ctx) }()
		errc := make(chan error, 1)
		go func() { defer wg.Done(); errc <- w.Run(ctx) }()
		// The --for window starts now that the server is up, the schema is
		// migrated and the worker runs: a slow start (initdb of a throwaway
		// server, a migration waiting for a lock) must not eat it.
		if *runFor > 0 {
			timer := time.AfterFunc(*runFor, stop)
			defer timer.Stop()
		}
		if *demoJobs > 0 {
			if err := enqueueDemo(ctx, pool, cfg.Queues[0], *demoJobs); err != nil && !errors.Is(err, context.Canceled) {
				stop() // the worker and reaper must end before the pool closes
				wg.Wait()
				return err
			}
			fmt.Fprintf(out, "workq: enqueued %d demo jobs on queue %q (kinds demo.hello, demo.flaky, demo.fail; some delayed)\n", *demoJobs, cfg.Queues[0])
		}
		progress(ctx, out, pool, w)
		wg.Wait()
		if err := <-errc; err != nil {
			return err
		}
		st := w.Stats()
		fmt.Fprintf(out, "workq: stopped. done=%d retried=%d failed=%d released=%d lease_lost=%d\n",
			st.Done, st.Retried, st.Failed, st.Released, st.LeaseLost)
		return nil
	}
	return cmd
}

func registerDemo(w *worker.Worker) error {
	hello := func(ctx context.Context, j *worker.Job) error {
		select {
		case <-time.After(time.Duration(5+rand.IntN(45)) * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	}
	flaky := func(ctx context.Context, j *worker.Job) error {
		if j.Attempt == 1 {
			return fmt.Errorf("demo.flaky fails its first attempt on purpose")
		}
		return nil
	}
	fail := func(ctx context.Context, j *worker.Job) error {
		return worker.Permanent(fmt.Errorf("demo.fail always fails, permanently"))
	}
	for kind, h := range map[string]worker.HandlerFunc{"demo.hello": hello, "demo.flaky": flaky, "demo.fail": fail} {
		if err := w.Register(kind, h); err != nil {
			return err
		}
	}
	return nil
}

func enqueueDemo(ctx context.Context, pool workq.DB, queue string, n int) error {
	c := workq.NewClient(workq.ClientOptions{})
	jobs := make([]workq.Job, 0, n)
	for i := range n {
		j := workq.Job{Queue: queue, Kind: "demo.hello", Payload: map[string]int{"n": i}, Priority: int16(i % 3)}
		switch {
		case i%50 == 49:
			j.Kind = "demo.fail"
			j.MaxAttempts = 1
		case i%10 == 9:
			j.Kind = "demo.flaky"
		case i%7 == 6:
			j.Delay = time.Duration(1+i%5) * time.Second
		}
		jobs = append(jobs, j)
	}
	_, err := c.EnqueueMany(ctx, pool, jobs)
	return err
}

// progress prints one line a second until ctx ends.
func progress(ctx context.Context, out io.Writer, db gen.DBTX, w *worker.Worker) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	start := time.Now()
	var last int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		st, err := collectStats(ctx, db)
		if err != nil {
			continue
		}
		var ready, inProgress, done, failed int64
		for _, s := range st {
			if s.Table == lease.JobRuns {
				ready, inProgress, done, failed = ready+s.Ready, inProgress+s.InProgress, done+s.Done, failed+s.Failed
			}
		}
		ws := w.Stats()
		fmt.Fprintf(out, "[%4.0fs] job_runs ready=%d in_progress=%d done=%d failed=%d | this worker: done %d (+%d/s) retried %d failed %d\n",
			time.Since(start).Seconds(), ready, inProgress, done, failed, ws.Done, ws.Done-last, ws.Retried, ws.Failed)
		last = ws.Done
	}
}
