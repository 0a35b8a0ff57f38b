package main

import (
	"errors"
	"slices"

	"github.com/spf13/cobra"

	"github.com/workq/workq/internal/config"
)

// workerFlags are the settings `workq worker` and `workq run` accept.
var workerFlags = slices.Concat([]string{
	"database-url", "max-conns", "worker-id", "queues", "concurrency", "batch", "lease", "exec-timeout",
	"poll", "poll-only", "reclaim", "flush-interval", "flush-batch", "drain-timeout", "runs-dir", "retain-runs", "retention-interval",
	"backoff-base", "backoff-cap", "webhook-allow", "webhook-secret", "webhook-timeout", "exec-allow",
	"log-level", "log-format",
}, config.PublisherFlags, config.ObservabilityFlags)

func newWorkerCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run a standalone worker process: job runs (built-in kinds webhook, exec, noop) and the outbox relay (built-in publishers)",
		Long: `Run a standalone worker process.

--jobs works job runs of the built-in kinds (webhook, exec, noop) on --queues.
--outbox relays outbox messages of --queues to the publishers configured per
topic (--outbox-webhook, --outbox-nats). Without any of these flags the worker
works job runs, and relays the outbox when a publisher is configured.

Inbox messages and timers run handlers written in Go: embed a workq.Client
with workq.HandleInbox / workq.HandleTimer handlers in your service (see
docs/inbox.md and docs/timers.md); --inbox and --timers are refused here for
that reason.

The maintenance (reaper, schedules, retention...) is not part of this process:
run workq maintain beside it, or workq run for both.`,
		Args: cobra.NoArgs,
	}
	cfg := bindConfig(cmd, workerFlags...)
	var k workKinds
	f := cmd.Flags()
	f.BoolVar(&k.jobs, "jobs", false, "work job runs (built-in kinds)")
	f.BoolVar(&k.outbox, "outbox", false, "relay outbox messages to the configured publishers")
	f.BoolVar(&k.inbox, "inbox", false, "refused: inbox handlers are Go code (embed a workq.Client)")
	f.BoolVar(&k.timers, "timers", false, "refused: timer handlers are Go code (embed a workq.Client)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := cfg.Validate(); err != nil {
			return err
		}
		if k.inbox || k.timers {
			return errors.New("--inbox and --timers need handlers, and the CLI worker has none built in: " +
				"embed a workq.Client with workq.HandleInbox or workq.HandleTimer handlers in your Go service (docs/inbox.md, docs/timers.md)")
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
		ws, closePublishers, err := cliWorkers(*cfg, log, k)
		if err != nil {
			return err
		}
		defer closePublishers()
		// The maintenance runs in its own process (workq maintain), or in
		// workq run.
		client, err := newClient(pool, *cfg, log, ws, obs, true)
		if err != nil {
			return err
		}
		return client.Run(ctx)
	}
	return cmd
}
