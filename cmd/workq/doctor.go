package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/workq/workq/internal/config"
	"github.com/workq/workq/internal/db"
	"github.com/workq/workq/internal/dbschema"
	"github.com/workq/workq/internal/ha"
)

// Statuses of a doctor check.
const (
	checkOK   = "ok"
	checkWarn = "warn"
	checkFail = "fail"
	checkSkip = "skip"
)

// doctorCheck is one line of `workq doctor`.
type doctorCheck struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
}

// doctorReport is what `workq doctor --json` prints.
type doctorReport struct {
	OK     bool          `json:"ok"`
	Checks []doctorCheck `json:"checks"`
	// Replication is what the server said of its standbys (absent when it
	// could not be read).
	Replication *ha.Replication `json:"replication,omitempty"`
}

func newDoctorCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the database for workq: connection, schema version, synchronous commit and synchronous standbys",
		Long: `Check what workq needs of its database, each check ok, warn, fail or skip:

  connect             the database answers, on a pool configured as every workq
                      command's is (workq.ConfigurePool)
  schema              the schema (--schema) is migrated to this binary's version
  synchronous_commit  workq's sessions commit synchronously (on or remote_apply),
                      and what a pool not configured by workq.ConfigurePool gets
                      (the server's, role's or database's default)
  primary             the server accepts writes (not a standby in recovery)
  replication         standbys stream from the server and at least one is
                      synchronous (sync_state sync or quorum in pg_stat_replication):
                      warn when none is, or when this role may not see it
                      (grant pg_monitor); ok without standbys
  timeline            the server's timeline, which workq's fencing numbers carry

It exits non-zero when a check fails (with --strict, also when one warns).
docs/operations.md ("High availability: failover without loss") explains each.`,
		Args: cobra.NoArgs,
	}
	cfg := bindConfig(cmd, "database-url", "schema")
	asJSON := cmd.Flags().Bool("json", false, "print JSON")
	strict := cmd.Flags().Bool("strict", false, "exit non-zero on a warning too")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
		defer cancel()
		rep := runDoctor(ctx, cfg)
		out := cmd.OutOrStdout()
		if *asJSON {
			if err := printJSON(out, rep); err != nil {
				return err
			}
		} else if err := printDoctor(out, rep); err != nil {
			return err
		}
		var fails, warns int
		for _, c := range rep.Checks {
			switch c.Status {
			case checkFail:
				fails++
			case checkWarn:
				warns++
			}
		}
		if fails > 0 || *strict && warns > 0 {
			return fmt.Errorf("%d check(s) failed, %d warned", fails, warns)
		}
		return nil
	}
	return cmd
}

// runDoctor runs every check; a check that cannot run for want of an
// earlier one is skipped. The report is OK when no check failed.
func runDoctor(ctx context.Context, cfg *config.Config) doctorReport {
	rep := runChecks(ctx, cfg)
	rep.OK = true
	for _, c := range rep.Checks {
		rep.OK = rep.OK && c.Status != checkFail
	}
	return rep
}

// runChecks runs the checks of runDoctor.
func runChecks(ctx context.Context, cfg *config.Config) doctorReport {
	var rep doctorReport
	add := func(name, status, format string, args ...any) {
		rep.Checks = append(rep.Checks, doctorCheck{Name: name, Status: status, Detail: fmt.Sprintf(format, args...)})
	}
	skip := func(names ...string) {
		for _, n := range names {
			add(n, checkSkip, "no connection")
		}
	}
	rw, err := dbschema.NewRewriter(cfg.Schema)
	if err != nil {
		add("connect", checkFail, "--schema: %v", err)
		skip("schema", "synchronous_commit", "primary", "replication", "timeline")
		return rep
	}
	log := slog.New(slog.DiscardHandler)
	pool, done, err := connect(ctx, cfg, log, checksLater)
	if err != nil {
		add("connect", checkFail, "%v", err)
		skip("schema", "synchronous_commit", "primary", "replication", "timeline")
		return rep
	}
	defer done()
	var version string
	if err := pool.QueryRow(ctx, "select current_setting('server_version')").Scan(&version); err != nil {
		add("connect", checkFail, "%v", err)
		skip("schema", "synchronous_commit", "primary", "replication", "timeline")
		return rep
	}
	cc := pool.Config().ConnConfig
	add("connect", checkOK, "PostgreSQL %s at %s:%d", version, cc.Host, cc.Port)

	q := rw.Wrap(pool)
	schemaCurrent := false
	switch v, err := db.SchemaVersion(ctx, q); {
	case err != nil:
		add("schema", checkFail, "%v", err)
	case v == 0:
		add("schema", checkFail, "schema %s is not migrated: run `workq migrate up`", rw.Schema())
	case v < db.LatestVersion():
		add("schema", checkFail, "schema %s at version %d, this workq needs %d: run `workq migrate up`", rw.Schema(), v, db.LatestVersion())
	case v > db.LatestVersion():
		schemaCurrent = true
		add("schema", checkWarn, "schema %s at version %d, newer than this workq's %d: upgrade the binary", rw.Schema(), v, db.LatestVersion())
	default:
		schemaCurrent = true
		add("schema", checkOK, "schema %s at version %d", rw.Schema(), v)
	}

	switch v, err := ha.SessionSyncCommit(ctx, pool); {
	case err != nil:
		add("synchronous_commit", checkFail, "%v", err)
	case !ha.SyncCommitSafe(v):
		add("synchronous_commit", checkFail, "workq's sessions run with %s: an acknowledged commit may be lost by a failover", v)
	default:
		def, err := defaultSyncCommit(ctx, cfg.DatabaseURL)
		switch {
		case err != nil:
			add("synchronous_commit", checkOK, "%s in workq's sessions (the default without workq.ConfigurePool could not be read: %v)", v, err)
		case !ha.SyncCommitSafe(def):
			add("synchronous_commit", checkWarn, "%s in workq's sessions, but %s by default: a Client on a pool not configured with workq.ConfigurePool commits asynchronously", v, def)
		default:
			add("synchronous_commit", checkOK, "%s in workq's sessions (%s by default)", v, def)
		}
	}

	r, err := ha.CheckReplication(ctx, pool)
	if err != nil {
		add("primary", checkFail, "%v", err)
		add("replication", checkSkip, "the server could not be read")
	} else {
		rep.Replication = &r
		if r.InRecovery {
			add("primary", checkFail, "the server is a standby (in recovery): workq writes on the primary only; list every node in the URL with target_session_attrs=read-write")
		} else {
			add("primary", checkOK, "the server accepts writes")
		}
		switch r.State() {
		case ha.NoStandbys:
			add("replication", checkOK, "no standby streams from this server: no failover target (synchronous_standby_names %q)", r.SynchronousStandbyNames)
		case ha.Synchronous:
			add("replication", checkOK, "%d of %d standbys synchronous (synchronous_standby_names %q)", r.Synchronous, r.Standbys, r.SynchronousStandbyNames)
		case ha.Unknown:
			add("replication", checkWarn, "%d standbys; whether any is synchronous is unknown: this role may not see sync_state (grant pg_monitor) (synchronous_standby_names %q)",
				r.Standbys, r.SynchronousStandbyNames)
		default:
			add("replication", checkWarn, "%d standbys and none synchronous (synchronous_standby_names %q): a failover may lose acknowledged enqueues and completions",
				r.Standbys, r.SynchronousStandbyNames)
		}
	}

	if !schemaCurrent || r.InRecovery {
		add("timeline", checkSkip, "needs a current schema on the primary")
		return rep
	}
	var epoch int64
	if err := q.QueryRow(ctx, "select workq.workq_epoch()").Scan(&epoch); err != nil {
		add("timeline", checkFail, "%v", err)
		return rep
	}
	add("timeline", checkOK, "timeline %d: lease versions and lock tokens handed out now are at least %d", ha.Timeline(epoch), epoch)
	return rep
}

// defaultSyncCommit reads synchronous_commit on a connection opened from
// url as is, without workq.ConfigurePool: what the server, role and
// database give a session that does not ask.
func defaultSyncCommit(ctx context.Context, url string) (string, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	return ha.SessionSyncCommit(ctx, conn)
}

func printDoctor(w io.Writer, rep doctorReport) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range rep.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Status, c.Name, c.Detail)
	}
	return tw.Flush()
}
