package pgembed

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// StandbyOptions say how a standby follows its primary.
type StandbyOptions struct {
	// Sync makes the standby the primary's synchronous standby: the
	// primary's synchronous_standby_names names it (ALTER SYSTEM and a
	// reload on the primary), so a commit is acknowledged only once the
	// standby has flushed it. The primary must run with synchronous_commit
	// on (pgembed's default is off): Options.Settings.
	Sync bool
	// Via is an optional host:port the standby reaches the primary through
	// for its WAL stream (the base backup is taken directly), e.g. a
	// testutil.Proxy the test cuts to pause replication.
	Via string
	// Settings are applied over the primary's Options.Settings, which the
	// standby inherits (with its Env and StopWhenGone).
	Settings map[string]string
}

// StartStandby starts a hot standby of s in a new temporary directory on a
// free port: a base backup of s (pg_basebackup -X stream -R) streaming from
// s as application_name Name(), and returns once s's pg_stat_replication
// shows it streaming (and, with Sync, sync). The primary needs nothing set
// for it: PostgreSQL's defaults (wal_level replica, 10 WAL senders and
// slots) and initdb's trust entries for replication from 127.0.0.1 do.
//
// The standby runs with synchronous_standby_names empty, whatever the
// primary had: promoted, it acknowledges commits alone until a new standby
// follows it with Sync, which is what pg_auto_failover does while the other
// node is gone.
func (s *Server) StartStandby(ctx context.Context, o StandbyOptions) (*Server, error) {
	sb, err := newServer(s.binDir, Options{Settings: maps.Clone(s.opts.Settings), Env: s.opts.Env, StopWhenGone: s.opts.StopWhenGone})
	if err != nil {
		return nil, err
	}
	sb.stopped = true
	err = sb.prepare()
	if err == nil {
		sb.port, err = freePort()
	}
	if err == nil {
		err = sb.follow(ctx, s, o)
	}
	if err != nil {
		_ = sb.Stop()
		return nil, err
	}
	return sb, nil
}

// Follow makes s, stopped by StopMode, a standby of primary on its own port
// again: its data is replaced by a base backup of primary's (a failed
// primary rebuilt as the new primary's standby), as StartStandby does.
func (s *Server) Follow(ctx context.Context, primary *Server, o StandbyOptions) error {
	if !s.stopped {
		return errors.New("pgembed: follow: the server is running; stop it first (StopMode)")
	}
	if err := os.RemoveAll(s.dataDir); err != nil {
		return fmt.Errorf("pgembed: follow: remove the old data: %w", err)
	}
	return s.follow(ctx, primary, o)
}

func (s *Server) follow(ctx context.Context, primary *Server, o StandbyOptions) error {
	if o.Sync {
		switch primary.opts.Settings["synchronous_commit"] {
		case "on", "remote_write", "remote_apply":
		default:
			return errors.New("pgembed: a synchronous standby needs a primary started with synchronous_commit on (Options.Settings): pgembed's default is off")
		}
	}
	if err := s.run(ctx, "pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(primary.port), "-U", "postgres",
		"-D", s.dataDir, "-X", "stream", "-R", "-c", "fast", "--no-sync"); err != nil {
		return err
	}
	host, port := "127.0.0.1", strconv.Itoa(primary.port)
	if o.Via != "" {
		var err error
		if host, port, err = net.SplitHostPort(o.Via); err != nil {
			return fmt.Errorf("pgembed: standby via %q: %w", o.Via, err)
		}
	}
	// Later lines of postgresql.auto.conf win over what -R wrote and what
	// the primary's ALTER SYSTEM left there.
	extra := fmt.Sprintf("primary_conninfo = 'host=%s port=%s user=postgres application_name=%s'\nsynchronous_standby_names = ''\n",
		host, port, s.Name())
	f, err := os.OpenFile(filepath.Join(s.dataDir, "postgresql.auto.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("pgembed: standby settings: %w", err)
	}
	_, err = f.WriteString(extra)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("pgembed: standby settings: %w", err)
	}
	s.opts.Settings = mergeSettings(s.opts.Settings, o.Settings)
	s.opts.Settings["hot_standby"] = "on"
	if err := s.startServer(ctx); err != nil {
		return err
	}
	s.stopped = false
	if o.Sync {
		if err := primary.exec(ctx, fmt.Sprintf(`alter system set synchronous_standby_names = '"%s"'`, s.Name()), "select pg_reload_conf()"); err != nil {
			return err
		}
	}
	return primary.awaitStandby(ctx, s.Name(), o.Sync)
}

func mergeSettings(base, over map[string]string) map[string]string {
	out := maps.Clone(base)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, over)
	return out
}

// Name is the application_name a standby streams under: what
// synchronous_standby_names and pg_stat_replication call it.
func (s *Server) Name() string { return "pgembed_" + strconv.Itoa(s.port) }

// Promote ends recovery on a standby (pg_ctl promote) and returns once it
// accepts writes.
func (s *Server) Promote(ctx context.Context) error {
	return s.run(ctx, "pg_ctl", "-D", s.dataDir, "-w", "-t", "60", "promote")
}

// awaitStandby waits until standby name streams from s (and is its
// synchronous standby when sync).
func (s *Server) awaitStandby(ctx context.Context, name string, sync bool) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var last string
	for {
		var state, syncState string
		conn, err := pgx.Connect(ctx, s.URL("postgres"))
		if err == nil {
			err = conn.QueryRow(ctx, `select state, sync_state from pg_stat_replication where application_name = $1`, name).Scan(&state, &syncState)
			conn.Close(ctx)
		}
		if err == nil && state == "streaming" && (!sync || syncState == "sync") {
			return nil
		}
		last = fmt.Sprintf("state %q, sync_state %q, %v", state, syncState, err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgembed: standby %s not streaming%s from port %d: %s",
				name, map[bool]string{true: " synchronously"}[sync], s.port, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// exec runs statements on database postgres of s.
func (s *Server) exec(ctx context.Context, sqls ...string) error {
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return fmt.Errorf("pgembed: connect to port %d: %w", s.port, err)
	}
	defer conn.Close(ctx)
	for _, sql := range sqls {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("pgembed: %s: %w", sql, err)
		}
	}
	return nil
}
