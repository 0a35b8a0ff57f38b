package pgembed

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// StandbyOptions change how StartStandby makes a standby.
type StandbyOptions struct {
	// Sync makes the standby synchronous: the primary's
	// synchronous_standby_names names it, and StartStandby returns once the
	// primary reports it as a synchronous standby. A commit then waits for
	// the standby in every session whose synchronous_commit is on (the
	// throwaway cluster's default is off: set it per session, as
	// workq.ConfigurePool does, or in Options.Settings).
	Sync bool
}

// StartStandby makes a streaming standby of s on a port of its own: a base
// backup (pg_basebackup -R, so the standby follows s with primary_conninfo
// naming it by its application_name, "standby_<port>"), started with s's
// options and hot_standby on. Stop it like any Server; Promote turns it
// into a primary on a new timeline.
func (s *Server) StartStandby(ctx context.Context, o StandbyOptions) (*Server, error) {
	base, err := os.MkdirTemp("", "workq-pg-standby-")
	if err != nil {
		return nil, fmt.Errorf("pgembed: temp dir: %w", err)
	}
	sb := &Server{binDir: s.binDir, baseDir: base, dataDir: filepath.Join(base, "data"), cred: s.cred, opts: s.opts}
	fail := func(err error) (*Server, error) {
		_ = sb.Stop()
		return nil, err
	}
	if sb.cred != nil {
		if err := os.Chown(base, int(sb.cred.Uid), int(sb.cred.Gid)); err != nil {
			return fail(fmt.Errorf("pgembed: chown %s: %w", base, err))
		}
	}
	if sb.opts.StopWhenGone != 0 {
		if err := sb.StopWhenGone(sb.opts.StopWhenGone); err != nil {
			return fail(err)
		}
	}
	if sb.port, err = freePort(); err != nil {
		return fail(err)
	}
	name := sb.ApplicationName()
	conn := fmt.Sprintf("host=127.0.0.1 port=%d user=postgres application_name=%s", s.port, name)
	if err := sb.run(ctx, "pg_basebackup", "-d", conn, "-D", sb.dataDir, "-R", "-X", "stream", "--no-sync", "-c", "fast"); err != nil {
		return fail(err)
	}
	if sb.opts.Settings == nil || sb.opts.Settings["hot_standby"] == "" {
		settings := map[string]string{"hot_standby": "on"}
		for k, v := range s.opts.Settings {
			settings[k] = v
		}
		sb.opts.Settings = settings
	}
	if err := sb.startServer(ctx); err != nil {
		return fail(err)
	}
	if o.Sync {
		if err := s.psql(ctx, "alter system set synchronous_standby_names = '"+name+"'"); err != nil {
			return fail(err)
		}
		if err := s.psql(ctx, "select pg_reload_conf()"); err != nil {
			return fail(err)
		}
	}
	// Wait until the primary sees the standby streaming (and, for Sync, as
	// synchronous).
	want := "streaming"
	query := "select state from pg_stat_replication where application_name = '" + name + "'"
	if o.Sync {
		want = "sync"
		query = "select sync_state from pg_stat_replication where application_name = '" + name + "' and state = 'streaming'"
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := s.psqlOutput(ctx, query)
		if err == nil && out == want {
			return sb, nil
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("pgembed: standby %s: the primary does not report it %s (got %q, %v)", name, want, out, err))
		}
		select {
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ApplicationName is the name a standby made by StartStandby connects to
// its primary with (standby_<port>), the name synchronous_standby_names
// and pg_stat_replication use.
func (s *Server) ApplicationName() string { return "standby_" + strconv.Itoa(s.port) }

// Promote ends a standby's recovery (pg_ctl promote, waiting until it
// accepts writes): it becomes a primary on a new timeline.
func (s *Server) Promote(ctx context.Context) error {
	return s.run(ctx, "pg_ctl", "-D", s.dataDir, "-w", "-t", "60", "promote")
}

// psql runs one SQL command on the server's postgres database.
func (s *Server) psql(ctx context.Context, sql string) error {
	_, err := s.psqlOutput(ctx, sql)
	return err
}

// psqlOutput runs one SQL command and returns its unaligned output.
func (s *Server) psqlOutput(ctx context.Context, sql string) (string, error) {
	var out strings.Builder
	err := s.runOut(ctx, &out, "psql", "-X", "-q", "-A", "-t", "-h", "127.0.0.1", "-p", strconv.Itoa(s.port), "-U", "postgres", "-d", "postgres", "-c", sql)
	return strings.TrimSpace(out.String()), err
}
