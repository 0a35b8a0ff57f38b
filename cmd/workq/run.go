package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/workq/workq"
	"github.com/workq/workq/api"
	"github.com/workq/workq/internal/config"
)

func newRunCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Migrate and run workq in one process (worker + maintenance) with a live demo of job runs, a schedule, the outbox, the inbox and timers; starts a throwaway PostgreSQL when DATABASE_URL is unset",
		Args:  cobra.NoArgs,
	}
	cfg := bindConfig(cmd, append(append(workerFlags, maintainFlags...), "api-addr")...)
	f := cmd.Flags()
	serveAPI := f.Bool("api", true, "also serve the HTTP API on --api-addr with a new admin token (printed)")
	demoJobs := f.Int("demo-jobs", 300, "sample job runs to enqueue, with as many outbox, inbox and timer items in proportion (0 = no demo)")
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
		pool, done, err := connect(ctx, cfg, log, migrates)
		if err != nil {
			return err
		}
		defer done()
		v, err := migrateUp(ctx, cfg, pool)
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		fmt.Fprintf(out, "workq: schema at version %d; worker %s on queues %v (Ctrl-C to stop)\n", v, cfg.WorkerID, cfg.Queues)

		obs, err := startObservability(ctx, *cfg, pool, log)
		if err != nil {
			return err
		}
		defer obs.close()
		ws, closePublishers, err := demoWorkers(*cfg, log, *demoJobs > 0)
		if err != nil {
			return err
		}
		defer closePublishers()
		// One Client: the worker and the maintenance.
		client, err := newClient(pool, *cfg, log, ws, obs, false)
		if err != nil {
			return err
		}
		if *serveAPI {
			_, fromEnv := os.LookupEnv("WORKQ_API_ADDR")
			stopAPI, err := startDemoAPI(ctx, client, *cfg, log, out, obs.metricsHandler(), !cmd.Flags().Changed("api-addr") && !fromEnv)
			if err != nil {
				return err
			}
			defer stopAPI()
		}
		// As Run: an interrupt during start-up stops the Client at once.
		if err := client.Start(context.WithoutCancel(ctx)); err != nil {
			return err
		}
		ctx, stop := context.WithCancel(ctx)
		defer stop()
		stopped := make(chan error, 1)
		go func() {
			<-ctx.Done()
			stopped <- client.Stop(context.Background())
		}()
		// The --for window starts now that the server is up, the schema is
		// migrated and the worker runs: a slow start (initdb of a throwaway
		// server, a migration waiting for a lock) must not eat it.
		if *runFor > 0 {
			timer := time.AfterFunc(*runFor, stop)
			defer timer.Stop()
		}
		// Progress is reported from the start of the window, while the demo
		// is still being written.
		out = &lockedWriter{w: out}
		reported := make(chan struct{})
		go func() { defer close(reported); progress(ctx, out, client) }()
		if *demoJobs > 0 {
			if err := enqueueDemo(ctx, client, cfg.Queues[0], *demoJobs); err != nil && !errors.Is(err, context.Canceled) {
				stop() // the Client must stop before the pool closes
				<-stopped
				<-reported
				return err
			}
			fmt.Fprintf(out, "workq: demo on queue %q: %d job runs (kinds demo.hello, demo.flaky, demo.fail; some delayed), "+
				"schedule demo.every-5s, %d outbox messages (ordered per order key, one fan-in join), "+
				"%d inbox messages (+ duplicates), %d timers (one cancelled)\n",
				cfg.Queues[0], *demoJobs, demoShare(*demoJobs), demoShare(*demoJobs), demoShare(*demoJobs))
		}
		<-reported
		if err := <-stopped; err != nil {
			return err
		}
		st := client.Stats()
		fmt.Fprintf(out, "workq: stopped. done=%d retried=%d failed=%d released=%d lease_lost=%d\n",
			st.Done, st.Retried, st.Failed, st.Released, st.LeaseLost)
		return nil
	}
	return cmd
}

// lockedWriter serialises writes from the progress reporter and the
// command's own lines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// startDemoAPI serves the HTTP API for the demo with a new admin token and
// prints its URL and the token. When the address is taken and was the
// default (no --api-addr, no WORKQ_API_ADDR), it serves on a free port of
// the same host instead and says so; a taken address that was asked for is
// an error naming it and the flag. The returned func stops the server
// (before the pool closes). The API serves client, the run's own (one
// Client per process): its enqueues are that Client's.
func startDemoAPI(ctx context.Context, client *workq.Client, cfg config.Config, log *slog.Logger, out io.Writer, metrics http.Handler,
	defaulted bool) (func(), error) {
	secret, entry, err := api.NewToken("demo", api.ScopeAdmin)
	if err != nil {
		return nil, fmt.Errorf("HTTP API for the demo: %w", err)
	}
	opts, err := apiOptions(cfg)
	if err == nil {
		opts.Tokens, err = api.ParseTokens([]string{entry})
	}
	if err != nil {
		return nil, fmt.Errorf("HTTP API for the demo: %w", err)
	}
	opts.Logger, opts.Metrics, opts.RunsDir = log, metrics, cfg.RunsDir
	start := func() (*api.Server, error) {
		srv, err := api.New(client, opts)
		if err == nil {
			err = srv.Start(ctx)
		}
		return srv, err
	}
	srv, err := start()
	moved := ""
	if errors.Is(err, syscall.EADDRINUSE) && defaulted {
		moved = opts.Addr
		host, _, _ := net.SplitHostPort(opts.Addr)
		opts.Addr = net.JoinHostPort(host, "0")
		srv, err = start()
	}
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return nil, fmt.Errorf("--api-addr %s is already in use: give a free HOST:PORT with --api-addr (or WORKQ_API_ADDR), "+
			"or run without the HTTP API and dashboard with --api=false", opts.Addr)
	case err != nil:
		return nil, fmt.Errorf("HTTP API for the demo on %s: %w (--api-addr sets the address, --api=false turns it off)", opts.Addr, err)
	}
	base := "http://" + srv.Addr().String()
	if moved != "" {
		fmt.Fprintf(out, "workq: %s is in use, so the HTTP API and the dashboard are on %s instead (--api-addr chooses)\n", moved, base)
	}
	fmt.Fprintf(out, "workq: HTTP API on %s (admin token %s, valid while this runs): curl -H 'Authorization: Bearer %s' %s/v1/queues\n",
		base, secret, secret, base)
	fmt.Fprintf(out, "workq: dashboard at %s/ui/ (log in with the token above)\n", base)
	return func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.APIShutdownTimeout)
		defer cancel()
		if err := srv.Stop(stopCtx); err != nil {
			log.Warn("stopping the HTTP API", "err", err)
		}
	}, nil
}
