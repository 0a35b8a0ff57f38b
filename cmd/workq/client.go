package main

import (
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/clienthook"
	"github.com/workq/workq/internal/config"
	"github.com/workq/workq/internal/worker/builtin"
)

// The CLI's processes (worker, maintain, run, bench) are workq.Clients: the
// flat config (flags and environment) is adapted into the Client's, and
// the CLI adds only its built-in handlers.

// clientConfig returns the workq.Config of cfg with workers ws (nil:
// none), observed by obs (may be nil): every setting of clientSettings
// onto its workq.Config fields (the outbox, inbox and timer queues are
// --queues, as the job-run queues). NewClient validates it (and
// config.Config.Validate before, through checkClientSettings).
func clientConfig(cfg config.Config, log *slog.Logger, ws *workq.Workers, obs *observability) workq.Config {
	c := workq.Config{Logger: log, Workers: ws}
	for _, s := range clientSettings {
		s.toLib(&c, cfg)
	}
	if obs != nil {
		if obs.metrics != nil { // a nil *Metrics in the interface would not be nil
			c.MetricsRegisterer = obs.metrics // the process's one set, used as is
		}
		if obs.tp != nil { // a nil *TracerProvider in the interface would not be nil
			c.TracerProvider = obs.tp
		}
	}
	return c
}

// queueConfigs returns the job-run queues of --queues, each with the
// default concurrency (--concurrency).
func queueConfigs(queues []string) map[string]workq.QueueConfig {
	m := make(map[string]workq.QueueConfig, len(queues))
	for _, q := range queues {
		m[q] = workq.QueueConfig{}
	}
	return m
}

// workKinds says which work tables a worker serves.
type workKinds struct{ jobs, outbox, inbox, timers bool }

func (k workKinds) any() bool { return k.jobs || k.outbox || k.inbox || k.timers }

// cliWorkers returns the handlers of a CLI worker for kinds: the built-in
// job kinds (webhook, exec, noop), and the configured outbox publishers.
// The returned function closes the publishers' connections; call it after
// the Client stopped.
func cliWorkers(cfg config.Config, log *slog.Logger, k workKinds) (*workq.Workers, func(), error) {
	ws := workq.NewWorkers()
	if k.jobs {
		if err := addBuiltins(ws, cfg); err != nil {
			return nil, nil, err
		}
	}
	if !k.outbox {
		return ws, func() {}, nil
	}
	set, err := publishersFromConfig(cfg, log)
	if err != nil {
		return nil, nil, err
	}
	for topic, h := range set.Handlers {
		if err := workq.HandleOutbox(ws, topic, h); err != nil {
			set.Close()
			return nil, nil, fmt.Errorf("outbox relay: %w", err)
		}
	}
	log.Info("outbox relay", "topics", set.Topics(), "queues", cfg.Queues)
	return ws, set.Close, nil
}

func addBuiltins(ws *workq.Workers, cfg config.Config) error {
	ex, err := builtin.NewExec(cfg.ExecAllow)
	if err != nil {
		return err
	}
	wh := builtin.NewWebhook(cfg.WebhookAllow, cfg.WebhookSecret, cfg.WebhookTimeout)
	if err := clienthook.HandleJob(ws, builtin.WebhookKind, wh.Handle); err != nil {
		return err
	}
	if err := clienthook.HandleJob(ws, builtin.ExecKind, ex.Handle); err != nil {
		return err
	}
	return clienthook.HandleJob(ws, builtin.NoopKind, builtin.Noop)
}

// newClient is workq.NewClient of the adapted cfg; maintenance runs in it
// unless noMaintenance.
func newClient(pool *pgxpool.Pool, cfg config.Config, log *slog.Logger, ws *workq.Workers, obs *observability, noMaintenance bool) (*workq.Client, error) {
	c := clientConfig(cfg, log, ws, obs)
	c.Maintenance.Disabled = noMaintenance
	return workq.NewClient(pool, c)
}
