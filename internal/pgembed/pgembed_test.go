package pgembed

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A cluster started with a setting keeps it and its data across restarts in
// every mode, on the same port; an unknown mode is refused and changes
// nothing.
func TestRestartKeepsSettingsAndData(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := StartWith(ctx, Options{Settings: map[string]string{"synchronous_commit": "on"}})
	if errors.Is(err, ErrNoBinaries) {
		t.Fatalf("%v (the fault-injection tests need them too)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	}()
	query := func(sql string) string {
		t.Helper()
		conn, err := pgx.Connect(ctx, s.URL("postgres"))
		if err != nil {
			t.Fatalf("connect after restart: %v", err)
		}
		defer conn.Close(ctx)
		var out string
		if err := conn.QueryRow(ctx, sql).Scan(&out); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return out
	}
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "create table kept as select 1 as n"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	port := s.Port()
	for _, mode := range []string{ShutdownImmediate, ShutdownFast, ShutdownSmart} {
		if err := s.Restart(ctx, mode); err != nil {
			t.Fatalf("restart %s: %v", mode, err)
		}
		if s.Port() != port {
			t.Errorf("restart %s moved the server from port %d to %d", mode, port, s.Port())
		}
		if got := query("select current_setting('synchronous_commit') || ' ' || count(*) from kept"); got != "on 1" {
			t.Errorf("after a %s restart: synchronous_commit and rows %q, want %q", mode, got, "on 1")
		}
	}
	if err := s.Restart(ctx, "sudden"); err == nil {
		t.Error("restart in mode \"sudden\" succeeded; want an error")
	}
	if got := query("select 'still up'"); got != "still up" {
		t.Errorf("after a refused restart: %q", got)
	}
}

// A server watched with StopWhenGone (the method, or the option, which
// watches from before initdb) runs while the watched process does, and is
// stopped and deleted once that process is killed, without Stop.
func TestStopWhenGone(t *testing.T) {
	for _, byOption := range []bool{false, true} {
		t.Run(map[bool]string{false: "method", true: "option"}[byOption], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			watched := exec.Command("sleep", "60")
			if err := watched.Start(); err != nil {
				t.Fatal(err)
			}
			defer watched.Process.Kill()
			var o Options
			if byOption {
				o.StopWhenGone = watched.Process.Pid
			}
			s, err := StartWith(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Stop()
			if !byOption {
				if err := s.StopWhenGone(watched.Process.Pid); err != nil {
					t.Fatal(err)
				}
			}
			answers := func() bool {
				c, err := pgx.Connect(ctx, s.URL("postgres"))
				if err != nil {
					return false
				}
				c.Close(ctx)
				return true
			}
			time.Sleep(1500 * time.Millisecond) // three of the watchdog's checks
			if !answers() {
				t.Fatal("the server stopped while the watched process runs")
			}
			if err := watched.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = watched.Wait()
			deadline := time.Now().Add(30 * time.Second)
			for answers() || dirExists(s.baseDir) {
				if time.Now().After(deadline) {
					t.Fatalf("30s after the watched process died: server answers %v, directory %s exists %v", answers(), s.baseDir, dirExists(s.baseDir))
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}

func dirExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// A synchronous standby has every acknowledged commit when its primary
// crashes; promoted, it takes writes alone; the old primary, rebuilt by
// Follow on its own port, becomes its synchronous standby.
func TestStandbyPromoteFollow(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a, err := StartWith(ctx, Options{Settings: map[string]string{"synchronous_commit": "on"}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	if async, err := a.StartStandby(ctx, StandbyOptions{}); err != nil {
		t.Fatalf("asynchronous standby: %v", err)
	} else if err := async.Stop(); err != nil {
		t.Error(err)
	}
	if _, err := (&Server{opts: Options{}}).StartStandby(ctx, StandbyOptions{Sync: true}); err == nil {
		t.Error("a synchronous standby of a primary with synchronous_commit off: no error")
	}
	b, err := a.StartStandby(ctx, StandbyOptions{Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	exec := func(s *Server, sql string) string {
		t.Helper()
		conn, err := pgx.Connect(ctx, s.URL("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var out string
		if err := conn.QueryRow(ctx, sql).Scan(&out); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return out
	}
	do := func(s *Server, sql string) {
		t.Helper()
		conn, err := pgx.Connect(ctx, s.URL("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	do(a, "create table kept as select 1 as n")
	if got := exec(b, "select pg_is_in_recovery()::text"); got != "true" {
		t.Fatalf("standby in recovery: %s", got)
	}
	if err := a.StopMode(ctx, ShutdownImmediate); err != nil {
		t.Fatal(err)
	}
	if err := b.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	if got := exec(b, "select count(*)::text from kept"); got != "1" {
		t.Errorf("rows after promotion: %s, want 1", got)
	}
	do(b, "insert into kept values (2)")
	port := a.Port()
	if err := a.Follow(ctx, b, StandbyOptions{Sync: true}); err != nil {
		t.Fatal(err)
	}
	if a.Port() != port {
		t.Errorf("follow moved the server from port %d to %d", port, a.Port())
	}
	do(b, "insert into kept values (3)")
	if got := exec(a, "select count(*)::text from kept"); got != "3" {
		t.Errorf("rows on the rebuilt standby: %s, want 3", got)
	}
}
