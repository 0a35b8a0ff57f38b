package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/config"
	"github.com/workq/workq/internal/db"
	"github.com/workq/workq/internal/dbschema"
	"github.com/workq/workq/internal/pgembed"
	"github.com/workq/workq/migrate"
	"github.com/workq/workq/workqtype"
)

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "workq",
		Short:         "PostgreSQL work queue: outbox, inbox, timers and job runs on one lease engine",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newKindCmds()...)
	root.AddCommand(
		newMigrateCmd(), newEnqueueCmd(), newWorkerCmd(), newReaperCmd(),
		newRunCmd(), newBenchCmd(), newStatsCmd(), newLimitCmd(), newConfigCmd(), newLockCmd(), newMaintainCmd(),
		newSchedulesCmd(),
		newShardLimitCmd(),
		newQueueCmd(),
		newFlowCmd(),
		newWorkflowsCmd(),
		newAPICmd(),
		newDoctorCmd(),
		newVersionCmd(),
	)
	root.Version = buildVersion().String()
	root.SetVersionTemplate("{{.Version}}\n")
	finishTree(root)
	return root
}

// bindConfig registers the named settings on cmd and returns the config
// they fill; the caller validates after flags are parsed (Validate: the
// CLI's own settings, and the workq.Config settings by the library). A
// command that connects (database-url) also gets --schema.
func bindConfig(cmd *cobra.Command, names ...string) *config.Config {
	if slices.Contains(names, "database-url") && !slices.Contains(names, "schema") {
		names = append(slices.Clip(names), "schema")
	}
	cfg := cliConfig()
	if err := cfg.Bind(cmd.Flags(), clientBindings(&cfg), names...); err != nil {
		// Bad environment: fail when the command runs, naming the variable.
		cmd.PreRunE = func(*cobra.Command, []string) error { return err }
	}
	return &cfg
}

// cliConfig returns the CLI's defaults: the workq.Config settings'
// are the library's (withLibraryDefaults), and Validate checks them with
// the library (checkClientSettings).
func cliConfig() config.Config {
	cfg := config.Default()
	withLibraryDefaults(&cfg)
	cfg.SetCheck(checkClientSettings)
	return cfg
}

func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// schemaUse says what a command needs of the database's schema when it
// connects.
type schemaUse int

const (
	// needSchema: the command reads or writes workq's tables, so the schema
	// must be current; otherwise it exits before doing anything, saying to
	// run `workq migrate up` (db.CheckSchema), instead of failing on a
	// missing table or function, or looping on one.
	needSchema schemaUse = iota
	// migrates: the command migrates the database itself (run, bench), and
	// starts a throwaway PostgreSQL when DATABASE_URL is unset.
	migrates
	// checksLater: the command starts without a current schema and reports
	// it its own way (api: /readyz answers 503 until it is current).
	checksLater
)

// connect opens a pool on cfg.DatabaseURL and, for a command that needs it
// (needSchema), checks the schema is current: the one place every command
// does so. For a command that migrates, with no URL it starts a throwaway
// PostgreSQL first; the returned cleanup stops it.
func connect(ctx context.Context, cfg *config.Config, log *slog.Logger, use schemaUse) (*pgxpool.Pool, func(), error) {
	rw, err := dbschema.NewRewriter(cfg.Schema)
	if err != nil {
		return nil, nil, fmt.Errorf("--schema: %w", err)
	}
	cleanup := func() {}
	if cfg.DatabaseURL == "" {
		if use != migrates {
			return nil, nil, fmt.Errorf("DATABASE_URL is not set (or pass --database-url)")
		}
		log.Info("DATABASE_URL is unset: starting a private throwaway PostgreSQL from the local binaries")
		srv, err := pgembed.Start(ctx)
		if err != nil {
			return nil, nil, err
		}
		cfg.DatabaseURL = srv.URL("postgres")
		log.Info("throwaway PostgreSQL ready (deleted on exit)", "url", cfg.DatabaseURL)
		cleanup = func() {
			if err := srv.Stop(); err != nil {
				log.Warn("stopping throwaway PostgreSQL", "err", err)
			}
		}
	}
	if err := checkDatabaseURL("DATABASE_URL", cfg.DatabaseURL); err != nil {
		cleanup()
		return nil, nil, err
	}
	pcfg, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	pcfg.MaxConns = cfg.MaxConns
	// Synchronous commits, and no connection left on a demoted primary
	// (docs/operations.md, High availability).
	workq.ConfigurePool(pcfg)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("connect to database: %w", err)
	}
	if use == needSchema {
		if err := db.CheckSchemaOf(ctx, rw.Wrap(pool), rw.Schema()); err != nil {
			pool.Close()
			cleanup()
			return nil, nil, err
		}
	}
	return pool, func() { pool.Close(); cleanup() }, nil
}

// connectDB is connect for the commands that only run statements: the
// pool comes back with every statement put into --schema.
func connectDB(ctx context.Context, cfg *config.Config, log *slog.Logger) (workqtype.TxDB, func(), error) {
	pool, done, err := connect(ctx, cfg, log, needSchema)
	if err != nil {
		return nil, nil, err
	}
	return inSchema(cfg, pool), done, nil
}

// migrateUp migrates --schema on pool to the latest version and returns it.
func migrateUp(ctx context.Context, cfg *config.Config, pool *pgxpool.Pool) (int64, error) {
	m, err := migrate.New(pool, migrate.Options{Schema: cfg.Schema})
	if err != nil {
		return 0, err
	}
	return m.Up(ctx)
}

// inSchema returns pool with every statement put into cfg.Schema (which
// connect validated).
func inSchema(cfg *config.Config, pool *pgxpool.Pool) workqtype.TxDB {
	rw, _ := dbschema.NewRewriter(cfg.Schema)
	return rw.WrapTx(pool)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
