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
