package pgembed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
// stopped and deleted once that process is killed, without Stop: also when
// the killed process's parent has not waited for it yet (a zombie).
func TestStopWhenGone(t *testing.T) {
	for _, tc := range []struct {
		name     string
		byOption bool
		zombie   bool // the watched process is not waited for until the end
	}{
		{"method", false, false},
		{"option", true, false},
		{"option, a zombie", true, true},
	} {
		byOption := tc.byOption
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			watched := exec.Command("sleep", "60")
			if err := watched.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = watched.Process.Kill(); _ = watched.Wait() }()
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
			if !tc.zombie {
				_ = watched.Wait()
			}
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

// privateTempDir points TMPDIR at a PrivateTempDir for the test.
func privateTempDir(t *testing.T) string {
	t.Helper()
	dir := PrivateTempDir(t)
	t.Setenv("TMPDIR", dir)
	return dir
}

// exitedProcess returns a process that ran and has exited (and been
// waited for), as an owner.
func exitedProcess(t *testing.T) owner {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	o, err := processOf(cmd.Process.Pid)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// A start reaps exactly the cluster directories whose owner has exited: the
// directory goes, and a server still running in it is stopped; a process
// that took the pid of the postmaster recorded there is left alone.
// Directories whose owner runs, and directories that are not marked as
// pgembed's (no owner file, another format, a symbolic link), are kept.
func TestReapStale(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tmp := privateTempDir(t)
	serverUID := os.Geteuid()
	if serverUID == 0 {
		cred, err := unprivileged()
		if err != nil {
			t.Fatal(err)
		}
		serverUID = int(cred.Uid)
	}
	self, err := processOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	dead := exitedProcess(t)

	// A zombie: killed, not yet waited for by its parent (this test).
	zombie := exec.Command("sleep", "60")
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	defer zombie.Wait()
	zombieOwner, err := processOf(zombie.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := zombie.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if _, state, _ := procStat(zombie.Process.Pid); state == "Z" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the killed process did not become a zombie within a minute")
		}
	}

	// Someone else's process, named by a postmaster.pid.
	bystander := exec.Command("sleep", "600")
	if err := bystander.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = bystander.Process.Kill(); _ = bystander.Wait() }()

	// A running server whose owner has exited and whose watchdog will not
	// act (it watches this process): what a SIGKILL of both leaves.
	orphan, err := Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer orphan.Stop()
	if err := writeOwner(orphan.baseDir, dead); err != nil {
		t.Fatal(err)
	}
	if len(ProcessesIn(orphan.dataDir)) == 0 {
		t.Fatal("no server runs in the orphan's directory")
	}

	mkdir := func(name string, files map[string]string) string {
		t.Helper()
		dir := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
			t.Fatal(err)
		}
		for f, text := range files {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	ownerText := func(o owner) string { return fmt.Sprintf("%s\npid %d\nstart %d\n", ownerMagic, o.pid, o.start) }
	target := mkdir("elsewhere", map[string]string{ownerFile: ownerText(dead)})
	link := filepath.Join(tmp, dirPrefix+"link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name   string
		dir    string
		reaped bool
	}{
		{"owner exited, server running", orphan.baseDir, true},
		{"owner exited, no server", mkdir(dirPrefix+"exited", map[string]string{ownerFile: ownerText(dead)}), true},
		{"owner a zombie", mkdir(dirPrefix+"zombie", map[string]string{ownerFile: ownerText(zombieOwner)}), true},
		{"owner's pid now another process's", mkdir(dirPrefix+"reused", map[string]string{ownerFile: ownerText(owner{pid: self.pid, start: self.start + 1})}), true},
		{"owner exited, postmaster.pid names another process", mkdir(dirPrefix+"bystander", map[string]string{
			ownerFile: ownerText(dead), "data/postmaster.pid": fmt.Sprintf("%d\n%s\n", bystander.Process.Pid, tmp)}), true},
		{"owner running", mkdir(dirPrefix+"running", map[string]string{ownerFile: ownerText(self)}), false},
		{"no owner file", mkdir(dirPrefix+"unmarked", nil), false},
		{"owner file in another format", mkdir(dirPrefix+"other", map[string]string{ownerFile: fmt.Sprintf("pid %d\n", dead.pid)}), false},
		{"a symbolic link", link, false},
		{"owner exited, not named workq-pg-*", target, false},
	}
	reaped, err := reapStale(serverUID)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := os.Lstat(tc.dir)
			switch {
			case tc.reaped && (err == nil || !slices.Contains(reaped, tc.dir)):
				t.Errorf("%s kept (reaped: %v)", tc.dir, reaped)
			case !tc.reaped && err != nil:
				t.Errorf("%s reaped: %v", tc.dir, err)
			}
		})
	}
	if procs := ProcessesIn(orphan.dataDir); len(procs) != 0 {
		t.Errorf("processes %v still run in the reaped %s", procs, orphan.dataDir)
	}
	if p, err := processOf(bystander.Process.Pid); err != nil || !p.alive() {
		t.Errorf("the process a stale postmaster.pid named was signalled: %v", err)
	}
}
