package main

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/workq/workq/config"
	"github.com/workq/workq/outbox"
	"github.com/workq/workq/publish"
	"github.com/workq/workq/worker"
	"github.com/workq/workq/worker/builtin"
)

// workerFlags are the settings `workq worker` and `workq run` accept.
var workerFlags = slices.Concat([]string{
	"database-url", "max-conns", "worker-id", "queues", "concurrency", "batch", "lease", "exec-timeout",
	"poll", "poll-only", "reclaim", "flush-interval", "flush-batch", "drain-timeout", "runs-dir", "retain-runs", "retention-interval",
	"backoff-base", "backoff-cap", "webhook-allow", "webhook-secret", "webhook-timeout", "exec-allow",
	"log-level", "log-format",
}, config.PublisherFlags, config.ObservabilityFlags)

// workKinds says which work tables a worker serves.
type workKinds struct{ jobs, outbox, inbox, timers bool }

func (k workKinds) any() bool { return k.jobs || k.outbox || k.inbox || k.timers }

func newWorkerCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run a standalone worker process: job runs (built-in kinds webhook, exec, noop) and the outbox relay (built-in publishers)",
		Long: `Run a standalone worker process.

--jobs works job runs of the built-in kinds (webhook, exec, noop) on --queues.
--outbox relays outbox messages of --queues to the publishers configured per
topic (--outbox-webhook, --outbox-nats). Without any of these flags the worker
works job runs, and relays the outbox when a publisher is configured.

Inbox messages and timers run handlers written in Go: embed package worker
with inbox.Processor / timers.Processor in your service (see docs/inbox.md and
docs/timers.md); --inbox and --timers are refused here for that reason.`,
		Args: cobra.NoArgs,
	}
	cfg := bindConfig(cmd, workerFlags...)
	var k workKinds
	f := cmd.Flags()
	f.BoolVar(&k.jobs, "jobs", false, "work job runs (built-in kinds)")
	f.BoolVar(&k.outbox, "outbox", false, "relay outbox messages to the configured publishers")
	f.BoolVar(&k.inbox, "inbox", false, "refused: inbox handlers are Go code (embed inbox.Processor)")
	f.BoolVar(&k.timers, "timers", false, "refused: timer handlers are Go code (embed timers.Processor)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := cfg.Validate(); err != nil {
			return err
		}
		if k.inbox || k.timers {
			return errors.New("--inbox and --timers need handlers, and the CLI worker has none built in: " +
				"embed inbox.Processor or timers.Processor in your Go service (docs/inbox.md, docs/timers.md)")
		}
		log := newLogger(cfg, cmd.ErrOrStderr())
		pubs, err := cfg.OutboxPublishers()
		if err != nil {
			return err
		}
		if !k.any() {
			k = workKinds{jobs: true, outbox: len(pubs) > 0}
		}
		if k.outbox && len(pubs) == 0 {
			return errors.New("--outbox: no outbox publisher is configured (--outbox-webhook TOPIC=URL or --outbox-nats TOPIC)")
		}
		ctx := cmd.Context()
		pool, done, err := connect(ctx, cfg, log, needSchema)
		if err != nil {
			return err
		}
		defer done()
		obs, err := startObservability(ctx, *cfg, pool, log)
		if err != nil {
			return err
		}
		defer obs.close()
		w, closePublishers, err := newCLIWorker(pool, *cfg, log, k, obs)
		if err != nil {
			return err
		}
		defer closePublishers()
		return w.Run(ctx)
	}
	return cmd
}

// newCLIWorker returns a worker serving kinds with the built-in handlers:
// the built-in job kinds, and the configured outbox publishers. The
// returned function closes the publishers' connections; call it after the
// worker stopped. obs (may be nil) observes it.
func newCLIWorker(pool *pgxpool.Pool, cfg config.Config, log *slog.Logger, k workKinds, obs *observability) (*worker.Worker, func(), error) {
	w, err := worker.New(pool, cfg.Worker(), worker.Options{Logger: log, Observer: obs.workerObserver()})
	if err != nil {
		return nil, nil, err
	}
	obs.watch(w)
	if k.jobs {
		if err := registerBuiltins(w, cfg); err != nil {
			return nil, nil, err
		}
	}
	if !k.outbox {
		return w, func() {}, nil
	}
	set, err := publish.FromConfig(cfg, log)
	if err != nil {
		return nil, nil, err
	}
	relay := outbox.NewRelay(outbox.RelayOptions{})
	for topic, h := range set.Handlers {
		if err := relay.Handle(topic, h); err != nil {
			set.Close()
			return nil, nil, err
		}
	}
	if err := w.AddSource(relay.Source(cfg.Queues...)); err != nil {
		set.Close()
		return nil, nil, fmt.Errorf("outbox relay: %w", err)
	}
	log.Info("outbox relay", "topics", set.Topics(), "queues", cfg.Queues)
	return w, set.Close, nil
}

func registerBuiltins(w *worker.Worker, cfg config.Config) error {
	ex, err := builtin.NewExec(cfg.ExecAllow)
	if err != nil {
		return err
	}
	wh := builtin.NewWebhook(cfg.WebhookAllow, cfg.WebhookSecret, cfg.WebhookTimeout)
	if err := w.Register(builtin.WebhookKind, wh.Handle); err != nil {
		return err
	}
	if err := w.Register(builtin.ExecKind, ex.Handle); err != nil {
		return err
	}
	return w.Register(builtin.NoopKind, builtin.Noop)
}
