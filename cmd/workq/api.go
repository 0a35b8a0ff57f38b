package main

import (
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/workq/workq"
	"github.com/workq/workq/api"
	"github.com/workq/workq/internal/config"
	"github.com/workq/workq/internal/db"
)

// apiFlags are the settings of the HTTP API server.
var apiFlags = []string{
	"api-addr", "api-tokens", "api-max-body", "api-read-header-timeout", "api-read-timeout", "api-write-timeout",
	"api-idle-timeout", "api-max-header-bytes", "api-shutdown-timeout",
}

func newAPICmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "api [--api-addr HOST:PORT] [--api-tokens NAME:SCOPE:SHA256,...] [--insecure]",
		Short: "Serve the HTTP API (JSON; bearer tokens; OpenAPI at /openapi.json; docs/api.md)",
		Long: "Serve the HTTP API until SIGTERM or Ctrl-C, then finish the requests in flight within --api-shutdown-timeout.\n" +
			"Every request but /healthz, /readyz and /openapi.json needs a token of --api-tokens (make one with `workq api token`).\n" +
			"Without tokens it refuses to start, unless --insecure is given and --api-addr is a loopback address.\n" +
			"Bad tokens are limited per client address (10, then 1 per 6 s; then 429 with Retry-After); docs/api.md.\n" +
			"The web dashboard is at /ui/ (docs/dashboard.md); with --runs-dir (the workers' directory, shared) it shows attempt logs.",
		Args: cobra.NoArgs,
	}
	cfg := bindConfig(cmd, slices.Concat([]string{"database-url", "max-conns", "log-level", "log-format", "max-payload",
		"max-attempts", "notify-debounce", "runs-dir"}, apiFlags, config.ObservabilityFlags)...)
	insecure := cmd.Flags().Bool("insecure", false, "serve without tokens (every request is admin): only on a loopback --api-addr, "+
		"and only to requests addressed to localhost, 127.0.0.0/8 or [::1]")
	dashboard := cmd.Flags().Bool("ui", true, "serve the web dashboard at /ui/ (log in with a token of --api-tokens)")
	sample := cmd.Flags().Duration("ui-sample-interval", 10*time.Second, "how often the dashboard samples queue depth and ended attempts (an hour of history at most, in memory)")
	shardFlags := cmd.Flags().StringArray("shard", nil, "a shard of a sharded workq, NAME=URL (repeat for each; instead of --database-url): "+
		"item lists merge every shard's items, each tagged with its shard; item endpoints take ?shard=NAME (docs/scale-out.md)")
	cmd.AddCommand(newAPITokenCmd())
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := cfg.Validate(); err != nil {
			return err
		}
		opts, err := apiOptions(*cfg)
		if err != nil {
			return err
		}
		if len(opts.Tokens) == 0 && !*insecure {
			return fmt.Errorf("%w: set --api-tokens or WORKQ_API_TOKENS (workq api token NAME makes one), "+
				"or pass --insecure with a loopback --api-addr", api.ErrNoTokens)
		}
		opts.Insecure = *insecure
		if *sample <= 0 || *sample > time.Hour {
			return fmt.Errorf("--ui-sample-interval must be between 1ns and 1h, got %s", *sample)
		}
		opts.DisableUI, opts.SampleInterval, opts.RunsDir = !*dashboard, *sample, cfg.RunsDir
		log := newLogger(cfg, cmd.ErrOrStderr())
		opts.Logger = log
		ctx := cmd.Context()
		var shards []workq.Shard
		if len(*shardFlags) > 0 {
			specs, err := parseShards(*shardFlags)
			if err != nil {
				return err
			}
			var done func()
			shards, done, err = connectShards(ctx, *cfg, log, specs, checksLater)
			if err != nil {
				return err
			}
			defer done()
			for _, sh := range shards {
				if err := db.CheckSchemaOf(ctx, inSchema(cfg, sh.Pool), cfg.Schema); err != nil {
					log.Warn("shard schema is not current", "shard", sh.Name, "err", err)
				}
			}
			cfg.DatabaseURL = specs[0].url // the first shard serves the metrics; the Client has every shard
		}
		pool, done, err := connect(ctx, cfg, log, checksLater)
		if err != nil {
			return err
		}
		defer done()
		if err := db.CheckSchemaOf(ctx, inSchema(cfg, pool), cfg.Schema); err != nil {
			log.Warn("the API serves, but /readyz answers 503 until the schema is current", "err", err)
		}
		// With --metrics-addr the API serves the metrics at its /metrics
		// too (read scope); tracing records the enqueue spans of requests.
		obs, err := startObservability(ctx, *cfg, pool, log)
		if err != nil {
			return err
		}
		defer obs.close()
		client, err := apiClient(*cfg, log, obs, pool, shards)
		if err != nil {
			return err
		}
		opts.Metrics = obs.metricsHandler()
		srv, err := api.New(client, opts)
		if err != nil {
			return err
		}
		return srv.Run(ctx)
	}
	return cmd
}

// apiOptions returns the HTTP options the api-* settings of cfg describe,
// with the tokens parsed; the caller sets Logger, Insecure, Metrics and
// the dashboard's. (The Client's settings, max-payload, max-attempts and
// notify-debounce among them, are apiClient's.)
func apiOptions(cfg config.Config) (api.Options, error) {
	tokens, err := api.ParseTokens(cfg.APITokens)
	if err != nil {
		return api.Options{}, err
	}
	return api.Options{
		Tokens: tokens, MaxBodyBytes: int64(cfg.APIMaxBody), Addr: cfg.APIAddr,
		ReadHeaderTimeout: cfg.APIReadHeaderTimeout, ReadTimeout: cfg.APIReadTimeout, WriteTimeout: cfg.APIWriteTimeout,
		IdleTimeout: cfg.APIIdleTimeout, MaxHeaderBytes: cfg.APIMaxHeaderBytes, ShutdownTimeout: cfg.APIShutdownTimeout,
	}, nil
}

// apiClient is the Client `workq api` serves: a producer (no workers, so
// it enqueues any kind) without maintenance (the workers' processes and
// `workq maintain` run it; an API process is neither) and never started:
// it only enqueues and reads. On pool, or on shards when given. Its
// schema, payload limit, max attempts and NOTIFY debounce are cfg's; it
// traces enqueues as the workers do, and adds no metrics of its own (it
// has no worker to observe: the process's are obs's).
func apiClient(cfg config.Config, log *slog.Logger, obs *observability, pool *pgxpool.Pool, shards []workq.Shard) (*workq.Client, error) {
	c := clientConfig(cfg, log, nil, obs)
	c.MetricsRegisterer = nil
	c.Maintenance.Disabled = true
	if len(shards) > 0 {
		return workq.NewShardedClient(shards, c)
	}
	return workq.NewClient(pool, c)
}

func newAPITokenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token NAME [--scope read|admin] [--json]",
		Short: "Make an API token: prints the token once and the api-tokens entry (its SHA-256) to configure",
		Args:  cobra.ExactArgs(1),
	}
	scope := cmd.Flags().String("scope", "read", "read (GET endpoints) or admin (every endpoint)")
	asJSON := cmd.Flags().Bool("json", false, "print JSON")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		sc, err := api.ParseScope(*scope)
		if err != nil {
			return fmt.Errorf("--scope: %w", err)
		}
		secret, entry, err := api.NewToken(args[0], sc)
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		if *asJSON {
			return printJSON(out, map[string]string{"name": args[0], "scope": string(sc), "token": secret, "entry": entry})
		}
		fmt.Fprintf(out, "token:  %s\n", secret)
		fmt.Fprintf(out, "entry:  %s\n", entry)
		fmt.Fprintln(out, "The token is shown only now: give it to the client (Authorization: Bearer TOKEN).")
		fmt.Fprintln(out, "Add the entry to api-tokens (--api-tokens or WORKQ_API_TOKENS, comma-separated); it holds the hash, not the token.")
		return nil
	}
	return cmd
}
