package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/jobq"
	"github.com/workq/workq/internal/worker/builtin"
	"github.com/workq/workq/workqtype"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/workq/workq/internal/config"
)

const benchQueue = "workq-bench"

// The bulk insert paths of the bench (--enqueue-mode): EnqueueManyFast
// (COPY, the product's fastest bulk path) or EnqueueMany (one INSERT of
// unnest()ed arrays).
const (
	enqueueCopy   = "copy"
	enqueueUnnest = "unnest"
)

// benchResult is what `workq bench` reports.
type benchResult struct {
	Mode        string  `json:"mode"` // burn-down, continuous, rate
	Jobs        int64   `json:"jobs"` // completions committed in the measured window
	Seconds     float64 `json:"seconds"`
	JobsPerSec  float64 `json:"jobs_per_sec"`
	InsertPerS  float64 `json:"insert_per_sec,omitempty"`
	LatencyP50  float64 `json:"latency_p50_ms"`
	LatencyP95  float64 `json:"latency_p95_ms"`
	LatencyP99  float64 `json:"latency_p99_ms"`
	Batch       int     `json:"batch"`
	Concurrency int     `json:"concurrency"`
	FlushMs     float64 `json:"flush_interval_ms"`
	MaxConns    int32   `json:"max_conns"`
	LeaseLost   int64   `json:"lease_lost"`
	// CPUPerJob is the bench process's CPU time (user and system) over the
	// measured window per job: the worker, the handlers and, in continuous
	// mode, the producer; the database's is not in it.
	CPUPerJob  float64 `json:"process_cpu_us_per_job,omitempty"`
	RSSStartMB float64 `json:"heap_start_mb,omitempty"`
	RSSEndMB   float64 `json:"heap_end_mb,omitempty"`
	// Continuous mode with --report-every: jobs/s of each interval, and
	// whether the Client ran its maintenance (--maintenance).
	Intervals   []float64 `json:"interval_jobs_per_sec,omitempty"`
	Maintenance bool      `json:"maintenance,omitempty"`
	// Rate mode: rows per EnqueueMany (0: one Enqueue per job), the handler's
	// sleep, and the ready backlog (due, unclaimed rows) sampled every 50 ms.
	EnqueueBatch  int     `json:"enqueue_batch,omitempty"`
	HandlerMs     float64 `json:"handler_ms,omitempty"`
	BacklogP50    int64   `json:"ready_backlog_p50,omitempty"`
	BacklogMax    int64   `json:"ready_backlog_max,omitempty"`
	BacklogSample int     `json:"ready_backlog_samples,omitempty"`
	// Rate mode, one Enqueue per job and no handler time: the same pickup
	// measured on the bare statements (latencyFloor), just before.
	FloorP50 float64 `json:"floor_p50_ms,omitempty"`
	FloorP95 float64 `json:"floor_p95_ms,omitempty"`
	FloorP99 float64 `json:"floor_p99_ms,omitempty"`
	// Config is every setting the run used, and NonDefault names those that
	// differ from the defaults (the figures of a benchmark are only as good
	// as the knowledge of what it ran with).
	Config     map[string]string `json:"config"`
	NonDefault []string          `json:"non_default"`
}

// maxBenchClients bounds --clients: each Client has a pool of --max-conns.
const maxBenchClients = 16

// benchSettings lists the settings that shape a benchmark run, as
// (name, value, default value).
func benchSettings(cfg config.Config, enqueueMode string, clients int) [][3]string {
	d := config.Default()
	gogc := strconv.Itoa(defaultGCPercent)
	if v, ok := os.LookupEnv("GOGC"); ok {
		gogc = v
	}
	return [][3]string{
		{"concurrency", strconv.Itoa(cfg.Concurrency), strconv.Itoa(d.Concurrency)},
		{"batch", strconv.Itoa(cfg.Batch), strconv.Itoa(d.Batch)},
		{"lease", cfg.Lease.String(), d.Lease.String()},
		{"flush-interval", cfg.FlushInterval.String(), d.FlushInterval.String()},
		{"flush-batch", strconv.Itoa(cfg.FlushBatch), strconv.Itoa(d.FlushBatch)},
		{"poll", cfg.Poll.String(), d.Poll.String()},
		{"poll-only", strconv.FormatBool(cfg.PollOnly), strconv.FormatBool(d.PollOnly)},
		{"max-conns", strconv.Itoa(int(cfg.MaxConns)), strconv.Itoa(int(d.MaxConns))},
		{"GOGC", gogc, strconv.Itoa(defaultGCPercent)},
		{"enqueue-mode", enqueueMode, enqueueCopy},
		{"clients", strconv.Itoa(clients), "1"},
	}
}

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench [-n N | --duration D [--rate R]]",
		Short: "Benchmark the job-run worker with a no-op handler (counts only committed completions)",
		Long: `Modes:
  burn-down   -n N: insert N jobs, then work them all (default, N=200000)
  continuous  --duration D: a producer keeps a backlog topped up while the worker runs, with
              EnqueueManyFast (COPY) of 1000 jobs, or EnqueueMany with --enqueue-mode unnest
  rate        --duration D --rate R: enqueue R jobs/s one by one (with NOTIFY) and report pickup latency
              and the ready backlog; with --enqueue-batch N, one EnqueueMany of N jobs every N/R
              seconds instead (a paced, batched producer in the same process)
Latency is handler start minus the job's eligibility time (run_at). --handler-time makes
the handler sleep, so slots stay busy as with real work.`,
		Args: cobra.NoArgs,
	}
	cfg := bindConfig(cmd, "database-url", "max-conns", "concurrency", "batch", "lease", "poll", "poll-only",
		"flush-interval", "flush-batch", "vacuum-interval", "log-level", "log-format")
	f := cmd.Flags()
	n := f.IntP("jobs", "n", 200000, "burn-down: jobs to insert and work")
	duration := f.Duration("duration", 0, "continuous or rate mode: how long to measure")
	rate := f.Int("rate", 0, "rate mode: jobs per second enqueued one at a time")
	enqueueBatch := f.Int("enqueue-batch", 0, "rate mode: enqueue with one EnqueueMany of this many jobs every batch/rate seconds (0: one Enqueue per job)")
	handlerTime := f.Duration("handler-time", 0, "how long the bench handler sleeps per job (0: returns at once)")
	produceOnly := f.Bool("produce-only", false, "only enqueue noop jobs, for a separate 'workq worker --queues "+benchQueue+"': at --rate R, or keeping a backlog")
	asJSON := f.Bool("json", false, "print JSON")
	cpuProfile := f.String("cpuprofile", "", "write a Go CPU profile of the run to this file")
	memProfile := f.String("memprofile", "", "write a Go allocation profile of the run to this file when it ends (go tool pprof -sample_index=alloc_space)")
	enqueueMode := f.String("enqueue-mode", enqueueCopy, "bulk inserts (burn-down's, the continuous producer's, --produce-only's backlog): "+
		enqueueCopy+" (EnqueueManyFast) or "+enqueueUnnest+" (EnqueueMany); rate mode's --enqueue-batch always uses EnqueueMany")
	inboxBench := addInboxBenchFlags(f)
	reportEvery := f.Duration("report-every", 0, "continuous mode: print the jobs/s of every interval this long (0: only the total)")
	maintenance := f.Bool("maintenance", false, "run the Client's maintenance (reaper, retention, ...) beside the worker, as a production Client does")
	table := f.String("table", "job_runs", "work table: job_runs, or outbox (burn-down only; see bench_outbox.go)")
	orderedKeys := f.Int("ordered-keys", 0, "--table outbox: spread the messages over this many partition keys (0: unkeyed)")
	clients := f.Int("clients", 1, "burn-down or continuous: run this many worker Clients on the queue in this process, each with its own claim loop, "+
		"--concurrency handlers, completion flushes and pool of --max-conns, as that many worker processes would (1 to 16; "+
		"the server must accept clients x --max-conns connections)")
	shardURLs := f.StringSlice("shards", nil, "job runs over a sharded Client: the shards' database URLs (comma-separated or repeated; NAME=URL names one), "+
		"burn-down or continuous; reports each shard's and the total jobs/s (--concurrency is shared by the shards)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg.Queues = []string{benchQueue}
		if *cpuProfile != "" {
			pf, err := os.Create(*cpuProfile)
			if err != nil {
				return err
			}
			if err := pprof.StartCPUProfile(pf); err != nil {
				return err
			}
			defer pprof.StopCPUProfile()
		}
		if *memProfile != "" {
			// Created now, so a path that cannot be written fails before the run.
			mf, err := os.Create(*memProfile)
			if err != nil {
				return err
			}
			defer func() {
				runtime.GC() // the profile holds what the last collection saw
				if err := pprof.Lookup("allocs").WriteTo(mf, 0); err != nil {
					fmt.Fprintln(cmd.ErrOrStderr(), "memprofile:", err)
				}
				if err := mf.Close(); err != nil {
					fmt.Fprintln(cmd.ErrOrStderr(), "memprofile:", err)
				}
			}()
		}
		if err := cfg.Validate(); err != nil {
			return err
		}
		if *n < 1 || *duration < 0 || *rate < 0 || (*rate > 0 && *duration == 0) {
			return fmt.Errorf("use -n N (N >= 1), or --duration D, optionally with --rate R (R >= 1)")
		}
		if *enqueueMode != enqueueCopy && *enqueueMode != enqueueUnnest {
			return fmt.Errorf("--enqueue-mode must be %s or %s, got %q", enqueueCopy, enqueueUnnest, *enqueueMode)
		}
		if *reportEvery < 0 || (*reportEvery > 0 && (*duration == 0 || *rate > 0)) {
			return fmt.Errorf("--report-every needs continuous mode (--duration D without --rate) and must not be negative")
		}
		if *enqueueBatch < 0 || (*enqueueBatch > 0 && *rate == 0) || *handlerTime < 0 {
			return fmt.Errorf("--enqueue-batch needs --rate and must not be negative; --handler-time must not be negative")
		}
		if *clients < 1 || *clients > maxBenchClients ||
			(*clients > 1 && (*rate > 0 || *produceOnly || *table != "job_runs" || *orderedKeys != 0 || inboxBench.on || len(*shardURLs) > 0)) {
			return fmt.Errorf("--clients is 1 to %d, and above 1 runs the job-run burn-down (-n N) or continuous mode (--duration D) only", maxBenchClients)
		}
		ctx := cmd.Context()
		log := newLogger(cfg, cmd.ErrOrStderr())
		if len(*shardURLs) > 0 {
			if *rate > 0 || *produceOnly || *table != "job_runs" || *orderedKeys != 0 || inboxBench.on || *enqueueMode != enqueueCopy || *reportEvery > 0 {
				return fmt.Errorf("--shards runs the job-run burn-down (-n N) or continuous mode (--duration D) only")
			}
			specs, err := parseShards(*shardURLs)
			if err != nil {
				return err
			}
			return benchShards(ctx, *cfg, log, specs, *n, *duration, *maintenance, cmd.OutOrStdout(), *asJSON)
		}
		pool, done, err := connect(ctx, cfg, log, migrates)
		if err != nil {
			return err
		}
		defer done()
		if err := benchFitsConnections(ctx, pool, *clients, cfg.MaxConns); err != nil {
			return err
		}
		if _, err := migrateUp(ctx, cfg, pool); err != nil {
			return err
		}
		db := inSchema(cfg, pool).(jobq.CopyDB) // a pool, or the schema's wrapper of one: both COPY
		if inboxBench.on {
			return inboxBench.run(ctx, db, pool.Config().MaxConns, *n, cmd.OutOrStdout(), *asJSON)
		}
		if err := benchReset(ctx, db); err != nil {
			return err
		}
		// The producer's Client only enqueues; the worker's (b.run) is another,
		// as a producer and a worker are in production.
		producer, err := workq.NewClient(pool, workq.Config{Schema: cfg.Schema, Maintenance: workq.MaintenanceConfig{Disabled: true}})
		if err != nil {
			return err
		}
		b := &bench{pool: pool, db: db, schema: cfg.Schema, client: producer, copier: jobq.New(jobq.Options{}), out: cmd.ErrOrStderr(),
			enqueueBatch: *enqueueBatch, handlerTime: *handlerTime, enqueueMode: *enqueueMode,
			reportEvery: *reportEvery, maintenance: *maintenance, clients: *clients}
		var res benchResult
		if *table != "job_runs" || *orderedKeys != 0 {
			if *table != "outbox" || *duration != 0 || *produceOnly || *orderedKeys < 0 {
				return fmt.Errorf("--table outbox runs the burn-down only (-n N), --ordered-keys K >= 0; --table is job_runs or outbox, got %q", *table)
			}
			res, err = b.burnDownOutbox(ctx, *cfg, *n, *orderedKeys)
		}
		switch {
		case res.Mode != "":
		case *produceOnly && *rate > 0:
			return b.produce(ctx, *duration, *rate)
		case *produceOnly:
			return b.keepBacklog(ctx, *duration, int64(max(4*cfg.Batch, 5000)))
		case *duration == 0:
			res, err = b.burnDown(ctx, *cfg, *n)
		case *rate == 0:
			res, err = b.continuous(ctx, *cfg, *duration)
		default:
			res, err = b.rateMode(ctx, *cfg, *duration, *rate)
		}
		if err != nil {
			return err
		}
		res.Batch, res.Concurrency, res.MaxConns = cfg.Batch, cfg.Concurrency, cfg.MaxConns
		res.FlushMs = float64(cfg.FlushInterval) / float64(time.Millisecond)
		res.Config = map[string]string{}
		var parts []string
		for _, st := range benchSettings(*cfg, *enqueueMode, *clients) {
			res.Config[st[0]] = st[1]
			mark := ""
			if st[1] != st[2] {
				res.NonDefault = append(res.NonDefault, st[0])
				mark = "*"
			}
			parts = append(parts, st[0]+"="+st[1]+mark)
		}
		if *asJSON {
			return printJSON(cmd.OutOrStdout(), res)
		}
		ran := "defaults"
		if len(res.NonDefault) > 0 {
			ran = "* = not the default: " + strings.Join(res.NonDefault, ", ")
		}
		fmt.Fprintf(cmd.OutOrStdout(), "config: %s (%s)\n", strings.Join(parts, " "), ran)
		fmt.Fprintf(cmd.OutOrStdout(), "%s: %d jobs in %.2fs = %.0f jobs/s; pickup latency p50 %.2f ms, p95 %.2f ms, p99 %.2f ms (batch %d, concurrency %d, flush %s, conns %d, lease lost %d)\n",
			res.Mode, res.Jobs, res.Seconds, res.JobsPerSec, res.LatencyP50, res.LatencyP95, res.LatencyP99,
			cfg.Batch, cfg.Concurrency, cfg.FlushInterval, cfg.MaxConns, res.LeaseLost)
		if res.CPUPerJob > 0 {
			fmt.Fprintf(cmd.OutOrStdout(), "  this process's CPU (user and system) over the measured window: %.2f µs per job\n", res.CPUPerJob)
		}
		if res.FloorP50 > 0 {
			fmt.Fprintf(cmd.OutOrStdout(), "  SQL floor (enqueue, NOTIFY, one claim; no runtime), just before: pickup p50 %.2f ms, p95 %.2f ms, p99 %.2f ms; workq p50 = %.2fx, p99 = %.2fx the floor\n",
				res.FloorP50, res.FloorP95, res.FloorP99, res.LatencyP50/res.FloorP50, res.LatencyP99/res.FloorP99)
		}
		if res.BacklogSample > 0 {
			fmt.Fprintf(cmd.OutOrStdout(), "  enqueue batch %d, handler %s, poll %s; ready backlog p50 %d, max %d rows (%d samples)\n",
				res.EnqueueBatch, *handlerTime, cfg.Poll, res.BacklogP50, res.BacklogMax, res.BacklogSample)
		}
		return nil
	}
	return cmd
}

// benchReset removes earlier bench rows and vacuums, so every run starts
// from a table in the same shape.
func benchReset(ctx context.Context, db workqtype.DB) error {
	for _, sql := range []string{
		"delete from workq.job_runs where queue in ('" + benchQueue + "', '" + benchFloorQueue + "')",
		"delete from workq.job_runs_done where queue in ('" + benchQueue + "', '" + benchFloorQueue + "')",
		"delete from workq.runs where work_table = 'job_runs' and queue in ('" + benchQueue + "', '" + benchFloorQueue + "')",
		"vacuum analyze workq.job_runs",
		"vacuum analyze workq.job_runs_done",
		"vacuum analyze workq.runs",
	} {
		if _, err := db.Exec(ctx, sql); err != nil {
			return fmt.Errorf("bench reset: %w", err)
		}
	}
	return nil
}

type bench struct {
	pool   *pgxpool.Pool
	db     jobq.CopyDB // pool in --schema
	schema string
	client *workq.Client // enqueues, as an application does
	copier *jobq.Client  // EnqueueManyFast (COPY): the bulk path the Client does not offer
	// processCPU when the measured window began and ended (cpuStart 0:
	// not measured); read where the window's time is, so the worker's
	// shutdown is not in it.
	cpuStart, cpuEnd time.Duration
	out              io.Writer
	enqueueBatch     int           // rate mode: jobs per EnqueueMany (0: Enqueue one by one)
	handlerTime      time.Duration // the handler sleeps this long
	enqueueMode      string        // bulk inserts: enqueueCopy or enqueueUnnest
	reportEvery      time.Duration // continuous: per-interval report (0: none)
	maintenance      bool          // the worker's Client runs maintenance too
	clients          int           // worker Clients (run); 0 is 1

	lat     latencies       // run_at to handler start, per job
	workers []*workq.Client // the worker's Clients (run)
}

// done returns the jobs the worker's Clients completed (committed).
func (b *bench) done() int64 { return b.stats().Done }

// stats adds up the worker's Clients' counters.
func (b *bench) stats() workq.Stats {
	var t workq.Stats
	for _, c := range b.workers {
		t = t.Add(c.Stats())
	}
	return t
}

// benchArgs are the bench's jobs: of the built-in kind noop, so that a
// separate 'workq worker --queues workq-bench' works them too.
type benchArgs struct{}

func (benchArgs) Kind() string { return builtin.NoopKind }

// record is the bench handlers' work: it records the pickup latency (since
// the item became due) and sleeps for handlerTime.
func (b *bench) record(runAt time.Time) {
	b.lat.record(time.Since(runAt))
	if b.handlerTime > 0 {
		time.Sleep(b.handlerTime)
	}
}

// benchFitsConnections refuses --clients whose pools of maxConns each could
// ask the server for more connections than it accepts from ordinary roles
// (max_connections less superuser_reserved_connections): a Client short of
// connections never finishes a burn-down.
func benchFitsConnections(ctx context.Context, pool *pgxpool.Pool, clients int, maxConns int32) error {
	if clients <= 1 {
		return nil
	}
	var limit int
	err := pool.QueryRow(ctx, `select current_setting('max_connections')::int - current_setting('superuser_reserved_connections')::int`).Scan(&limit)
	if err != nil {
		return fmt.Errorf("read the server's connection limit: %w", err)
	}
	if need := clients * int(maxConns); need > limit {
		return fmt.Errorf("--clients %d with --max-conns %d may open %d connections; the server accepts %d: use fewer Clients or a lower --max-conns", clients, maxConns, need, limit)
	}
	return nil
}

// run starts the worker: a workq.Client (without maintenance, as the bench
// always ran, unless --maintenance) working ws and counting committed
// completions, or --clients of them, the first on the bench's pool and each
// other on a pool of its own with the same settings, as another worker
// process would have. They stop when ctx ends or one of them fails; errc
// then says how the first that failed ended, once all have (nil: none
// failed).
func (b *bench) run(ctx context.Context, cfg config.Config, ws *workq.Workers) (errc chan error, err error) {
	c := clientConfig(cfg, nil, ws, nil)
	c.Maintenance.Disabled = !b.maintenance
	pools := []*pgxpool.Pool{b.pool}
	closeOwn := func() {
		for _, p := range pools[1:] {
			p.Close()
		}
	}
	for i := 1; i < max(b.clients, 1); i++ {
		p, err := pgxpool.NewWithConfig(ctx, b.pool.Config()) // a copy of its settings
		if err != nil {
			closeOwn()
			return nil, fmt.Errorf("pool of worker client %d: %w", i+1, err)
		}
		pools = append(pools, p)
	}
	b.workers = nil
	for _, p := range pools {
		client, err := workq.NewClient(p, c)
		if err != nil {
			closeOwn()
			return nil, err
		}
		b.workers = append(b.workers, client)
	}
	rctx, cancel := context.WithCancel(ctx)
	ended := make(chan error, len(b.workers))
	for _, client := range b.workers {
		go func() { ended <- client.Run(rctx) }()
	}
	errc = make(chan error, 1)
	go func() {
		var first error
		for range b.workers {
			if err := <-ended; err != nil && first == nil {
				first = err
				cancel() // the others stop too
			}
		}
		cancel()
		closeOwn()
		errc <- first
	}()
	return errc, nil
}

// waitDone waits until the worker's Clients have completed n jobs. It
// fails when ctx ends, when the Clients stop first (errc), and without
// maintenance when a completion was given up on: no reaper would ever
// retry its job, so n could never be reached.
func (b *bench) waitDone(ctx context.Context, n int64, errc chan error) error {
	for {
		// One read of the Clients' counters per poll: this loop runs in the
		// measured window.
		st := b.stats()
		if st.Done >= n {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if st.Unflushed > 0 && !b.maintenance {
			return fmt.Errorf("the worker gave up on %d completions after %d of %d jobs, and without --maintenance nothing retries them", st.Unflushed, st.Done, n)
		}
		select {
		case err := <-errc:
			if err == nil {
				err = ctx.Err()
			}
			if err == nil {
				err = errors.New("every worker Client ended")
			}
			return fmt.Errorf("the worker stopped after %d of %d jobs: %w", b.done(), n, err)
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// runJobs is run with the typed no-op worker of benchArgs.
func (b *bench) runJobs(ctx context.Context, cfg config.Config) (chan error, error) {
	ws := workq.NewWorkers()
	workq.AddWorker(ws, workq.WorkFunc(func(_ context.Context, j *workq.Job[benchArgs]) error {
		b.record(j.RunAt)
		return nil
	}))
	return b.run(ctx, cfg, ws)
}

// insert adds n noop jobs in one bulk enqueue of the chosen mode.
func (b *bench) insert(ctx context.Context, n int) error {
	if b.enqueueMode == enqueueUnnest {
		params := make([]workq.EnqueueParams, n)
		for i := range params {
			params[i] = workq.EnqueueParams{Args: benchArgs{}, Opts: &workq.EnqueueOpts{Queue: benchQueue}}
		}
		_, err := b.client.EnqueueMany(ctx, params)
		return err
	}
	jobs := make([]jobq.Job, n)
	for i := range jobs {
		jobs[i] = jobq.Job{Queue: benchQueue, Kind: builtin.NoopKind}
	}
	_, err := b.copier.EnqueueManyFast(ctx, b.db, jobs)
	return err
}

func (b *bench) burnDown(ctx context.Context, cfg config.Config, n int) (benchResult, error) {
	start := time.Now()
	for i := 0; i < n; i += 5000 {
		if err := b.insert(ctx, min(5000, n-i)); err != nil {
			return benchResult{}, err
		}
	}
	insertRate := float64(n) / time.Since(start).Seconds()
	fmt.Fprintf(b.out, "inserted %d jobs (%.0f/s); working them\n", n, insertRate)
	if _, err := b.db.Exec(ctx, "vacuum analyze workq.job_runs"); err != nil {
		return benchResult{}, err
	}
	b.lat.reset()
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	start = time.Now()
	b.cpuStart = processCPU()
	errc, err := b.runJobs(wctx, cfg)
	if err != nil {
		return benchResult{}, err
	}
	if err := b.waitDone(ctx, int64(n), errc); err != nil {
		return benchResult{}, err
	}
	elapsed := time.Since(start)
	b.cpuEnd = processCPU()
	stop()
	if err := <-errc; err != nil {
		return benchResult{}, err
	}
	res := b.result("burn-down", b.done(), elapsed)
	res.InsertPerS = insertRate
	return res, nil
}

func (b *bench) continuous(ctx context.Context, cfg config.Config, d time.Duration) (benchResult, error) {
	// The producer keeps the ready backlog (inserted, not yet claimed) at
	// about this many rows. Rows claimed but not yet completed are not
	// backlog: counting them starved the claimer once claims could be as
	// large as a batch and completions wait for their flush.
	backlog := int64(max(4*cfg.Batch*max(b.clients, 1), 5000))
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	errc, err := b.runJobs(wctx, cfg)
	if err != nil {
		return benchResult{}, err
	}
	var inserted atomic.Int64
	pctx, stopProducer := context.WithCancel(ctx)
	var pwg sync.WaitGroup
	pwg.Add(1)
	go func() {
		defer pwg.Done()
		for pctx.Err() == nil {
			if inserted.Load()-b.stats().Claimed >= backlog {
				time.Sleep(time.Millisecond)
				continue
			}
			if err := b.insert(pctx, 1000); err == nil {
				inserted.Add(1000)
			}
		}
	}()
	// Measure after a one-second warm-up.
	time.Sleep(time.Second)
	base := b.done()
	b.lat.reset()
	heapStart := heapMB()
	start := time.Now()
	b.cpuStart = processCPU()
	intervals := b.reportIntervals(ctx, start, base, d)
	jobs := b.done() - base
	elapsed := time.Since(start)
	b.cpuEnd = processCPU()
	heapEnd := heapMB()
	stopProducer()
	pwg.Wait()
	stop()
	if err := <-errc; err != nil {
		return benchResult{}, err
	}
	res := b.result("continuous", jobs, elapsed)
	res.RSSStartMB, res.RSSEndMB = heapStart, heapEnd
	res.Intervals, res.Maintenance = intervals, b.maintenance
	return res, nil
}

// reportIntervals waits until d has passed since start (or ctx ends); with
// --report-every it prints, and returns, the jobs/s of every interval on
// the way (the last one may be shorter).
func (b *bench) reportIntervals(ctx context.Context, start time.Time, base int64, d time.Duration) []float64 {
	if b.reportEvery <= 0 {
		sleepOrDone(ctx, d)
		return nil
	}
	var rates []float64
	prev, prevAt := base, start
	for i := 1; ctx.Err() == nil; i++ {
		until := min(time.Duration(i)*b.reportEvery, d)
		sleepOrDone(ctx, time.Until(start.Add(until)))
		now, at := b.done(), time.Now()
		rate := float64(now-prev) / at.Sub(prevAt).Seconds()
		rates = append(rates, rate)
		fmt.Fprintf(b.out, "interval %d (to %s): %.0f jobs/s\n", i, until, rate)
		prev, prevAt = now, at
		if until >= d {
			break
		}
	}
	return rates
}

func (b *bench) rateMode(ctx context.Context, cfg config.Config, d time.Duration, rate int) (benchResult, error) {
	// One job (or one batch) at a time with nothing else to wait for:
	// pickup latency is the SQL's plus the runtime's, so measure the SQL's
	// alone first. Only up to one enqueue per NOTIFY debounce (5 ms): at a
	// higher rate some of the worker's jobs come without a notification,
	// and the floor, which notifies every enqueue, would not be the same
	// path.
	var floor []time.Duration
	batch := max(b.enqueueBatch, 1)
	if b.handlerTime == 0 && rate/batch <= 200 {
		n, interval := floorSamples(rate / batch)
		fmt.Fprintf(b.out, "measuring the SQL floor of pickup latency: %d pickups of %d, one every %s\n", n, batch, interval)
		var err error
		if floor, err = b.latencyFloor(ctx, n, batch, interval, cfg.Lease); err != nil {
			return benchResult{}, err
		}
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	errc, err := b.runJobs(wctx, cfg)
	if err != nil {
		return benchResult{}, err
	}
	time.Sleep(500 * time.Millisecond) // let the listener connect
	sctx, stopSampling := context.WithCancel(ctx)
	samples := make(chan []int64, 1)
	go func() { samples <- b.sampleBacklog(sctx, 50*time.Millisecond) }()
	start := time.Now()
	if err := b.produce(ctx, d, rate); err != nil {
		stopSampling()
		return benchResult{}, err
	}
	stopSampling()
	backlog := <-samples
	time.Sleep(200 * time.Millisecond) // let the last jobs finish
	elapsed := time.Since(start)
	stop()
	if err := <-errc; err != nil {
		return benchResult{}, err
	}
	mode := "rate"
	if b.enqueueBatch > 0 {
		mode = "rate-batched"
	}
	res := b.result(mode, b.done(), elapsed)
	res.EnqueueBatch, res.HandlerMs = b.enqueueBatch, float64(b.handlerTime)/float64(time.Millisecond)
	if len(floor) > 0 {
		res.FloorP50, res.FloorP95, res.FloorP99 = millis(floor[len(floor)/2]), millis(floor[len(floor)*95/100]), millis(floor[len(floor)*99/100])
	}
	if len(backlog) > 0 {
		slices.Sort(backlog)
		res.BacklogP50, res.BacklogMax, res.BacklogSample = backlog[len(backlog)/2], backlog[len(backlog)-1], len(backlog)
	}
	return res, nil
}

// sampleBacklog counts the bench queue's ready rows that are due (waiting
// for a claim) every interval until ctx ends.
func (b *bench) sampleBacklog(ctx context.Context, interval time.Duration) []int64 {
	var out []int64
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return out
		case <-t.C:
		}
		var n int64
		err := b.db.QueryRow(ctx, `select count(*) from workq.job_runs where queue = $1 and status = 0 and run_at <= now()`, benchQueue).Scan(&n)
		if err == nil {
			out = append(out, n)
		}
	}
}

// produce enqueues rate jobs per second for d: one Enqueue statement per
// job, or with enqueueBatch set one EnqueueMany of that many jobs every
// enqueueBatch/rate seconds.
func (b *bench) produce(ctx context.Context, d time.Duration, rate int) error {
	if rate == 0 {
		rate = 1000
	}
	if d == 0 {
		d = time.Minute
	}
	per := max(1, b.enqueueBatch)
	interval := time.Duration(per) * time.Second / time.Duration(rate)
	opts := &workq.EnqueueOpts{Queue: benchQueue}
	batch := make([]workq.EnqueueParams, per)
	for i := range batch {
		batch[i] = workq.EnqueueParams{Args: benchArgs{}, Opts: opts}
	}
	end := time.Now().Add(d)
	next := time.Now()
	for time.Now().Before(end) && ctx.Err() == nil {
		var err error
		if b.enqueueBatch > 0 {
			_, err = b.client.EnqueueMany(ctx, batch)
		} else {
			_, err = b.client.Enqueue(ctx, benchArgs{}, opts)
		}
		if err != nil {
			return err
		}
		next = next.Add(interval)
		if wait := time.Until(next); wait > 0 {
			time.Sleep(wait)
		}
	}
	return nil
}

// keepBacklog tops the bench queue up to backlog ready jobs for d, for a
// worker running in another process, and reports the completion rate every
// 10 s from the database.
func (b *bench) keepBacklog(ctx context.Context, d time.Duration, backlog int64) error {
	end := time.Now().Add(d)
	var ready, done int64
	lastDone, lastReport := int64(0), time.Now()
	for time.Now().Before(end) && ctx.Err() == nil {
		// Ready rows only: the partial claim index answers this; counting done
		// rows scans the whole history, so that waits for the report.
		err := b.db.QueryRow(ctx, `select count(*) from workq.job_runs where queue = $1 and status = 0`, benchQueue).Scan(&ready)
		if err != nil {
			return err
		}
		if ready < backlog {
			if err := b.insert(ctx, 2000); err != nil {
				return err
			}
			continue
		}
		if since := time.Since(lastReport); since >= 10*time.Second {
			err := b.db.QueryRow(ctx, `select (select count(*) from workq.job_runs where queue = $1 and status = 2) + (select count(*) from workq.job_runs_done where queue = $1)`, benchQueue).Scan(&done)
			if err != nil {
				return err
			}
			fmt.Fprintf(b.out, "produce-only: %d done, %.0f jobs/s over the last %s\n", done, float64(done-lastDone)/since.Seconds(), since.Round(time.Second))
			lastDone, lastReport = done, time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

func (b *bench) result(mode string, jobs int64, elapsed time.Duration) benchResult {
	q, _ := b.lat.quantiles(0.50, 0.95, 0.99)
	r := benchResult{
		Mode: mode, Jobs: jobs, Seconds: elapsed.Seconds(), JobsPerSec: float64(jobs) / elapsed.Seconds(),
		LatencyP50: millis(q[0]), LatencyP95: millis(q[1]), LatencyP99: millis(q[2]), LeaseLost: b.stats().LeaseLost,
	}
	if b.cpuStart > 0 && b.cpuEnd > b.cpuStart && jobs > 0 {
		r.CPUPerJob = float64((b.cpuEnd-b.cpuStart)/time.Microsecond) / float64(jobs)
	}
	return r
}

// processCPU is the CPU time, user and system, this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func heapMB() float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc) / (1 << 20)
}

func sleepOrDone(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
