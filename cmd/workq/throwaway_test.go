package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/workq/workq/internal/pgembed"
	"github.com/workq/workq/internal/testutil"
)

// The throwaway PostgreSQL of `workq run` (DATABASE_URL unset) does not
// outlive it (docs/design.md 7.1): the terminal of `make run` closed
// (SIGHUP), SIGTERM and Ctrl-C stop workq cleanly, which stops the cluster
// and deletes its directory; SIGKILL leaves that to the cluster's watchdog.
// Either way no process of the cluster is left and its directory is gone.
func TestRunThrowawayClusterEndsWithIt(t *testing.T) {
	bin := testutil.BuildWorkq(t, "../..")
	for _, tc := range []struct {
		name  string
		sig   syscall.Signal
		clean bool // workq itself stops the cluster and exits 0
	}{
		{"SIGHUP (the terminal closed)", syscall.SIGHUP, true},
		{"SIGTERM", syscall.SIGTERM, true},
		{"SIGINT", syscall.SIGINT, true},
		{"SIGKILL (the watchdog)", syscall.SIGKILL, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := pgembed.PrivateTempDir(t)
			r := startThrowawayRun(t, bin, tmp)
			if err := r.cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			err := r.wait(t, 2*time.Minute)
			var exit *exec.ExitError
			switch {
			case tc.clean && err != nil:
				t.Errorf("workq run after %v: %v, want exit status 0:\n%s", tc.sig, err, r.out.String())
			case tc.clean && !strings.Contains(r.out.String(), "workq: stopped."):
				t.Errorf("workq run after %v did not say it stopped:\n%s", tc.sig, r.out.String())
			case !tc.clean && !errors.As(err, &exit):
				t.Errorf("workq run after %v: %v, want it killed", tc.sig, err)
			}
			awaitClusterGone(t, r.dir, 2*time.Minute)
		})
	}
}

// A workq started with SIGHUP ignored (nohup workq worker &) keeps it
// ignored: the terminal closing does not stop it. SIGTERM still does.
func TestNohupKeepsSIGHUPIgnored(t *testing.T) {
	bin := testutil.BuildWorkq(t, "../..")
	tmp := pgembed.PrivateTempDir(t)
	// sh's trap "" HUP ignores it, and exec keeps it ignored, as nohup does.
	r := startThrowawayRun(t, bin, tmp, "sh", "-c", `trap "" HUP; exec "$@"`, "sh")
	if err := r.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-r.done:
		t.Fatalf("workq run started under nohup ended on SIGHUP (%v):\n%s", err, r.out.String())
	case <-time.After(3 * time.Second):
	}
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := r.wait(t, 2*time.Minute); err != nil {
		t.Errorf("workq run after SIGTERM: %v:\n%s", err, r.out.String())
	}
	awaitClusterGone(t, r.dir, 2*time.Minute)
}

// A throwaway cluster whose owner and watchdog were both killed (SIGKILL to
// every process but the server's, as an OOM killer or a container runtime
// may do) runs on, until the next start of a throwaway cluster on the
// machine stops it and deletes its directory.
func TestRunReapsAnOrphanedThrowawayCluster(t *testing.T) {
	bin := testutil.BuildWorkq(t, "../..")
	tmp := pgembed.PrivateTempDir(t)
	first := startThrowawayRun(t, bin, tmp)
	watchdogs := watchdogsOf(first.dir)
	if len(watchdogs) == 0 {
		t.Fatalf("no watchdog of %s found among the processes", first.dir)
	}
	for _, pid := range watchdogs {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			t.Fatal(err)
		}
	}
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = first.wait(t, 2*time.Minute)
	// The premise: the cluster is orphaned.
	if len(pgembed.ProcessesIn(first.dir)) == 0 {
		t.Fatalf("the server of %s stopped without its owner and watchdog", first.dir)
	}

	second := exec.Command(bin, "run", "--for", "1s", "--api=false", "--demo-jobs", "0")
	second.Env = throwawayEnv(tmp)
	if out, err := second.CombinedOutput(); err != nil {
		t.Fatalf("the next workq run: %v\n%s", err, out)
	}
	awaitClusterGone(t, first.dir, time.Minute)
	if left, _ := filepath.Glob(filepath.Join(tmp, "workq-pg-*")); len(left) != 0 {
		t.Errorf("cluster directories left after the next run ended: %v", left)
	}
}

// throwawayEnv is the environment of a workq run on a throwaway cluster in
// tmp: no DATABASE_URL and no WORKQ_* setting of the developer's.
func throwawayEnv(tmp string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k != "DATABASE_URL" && k != "TMPDIR" && !strings.HasPrefix(k, "WORKQ_") {
			env = append(env, kv)
		}
	}
	return append(env, "TMPDIR="+tmp, "WORKQ_LOG_LEVEL=warn")
}

type throwawayRun struct {
	cmd  *exec.Cmd
	out  *testutil.Buffer
	done chan error
	dir  string // the cluster's directory
}

// startThrowawayRun starts `workq run` on a throwaway cluster in tmp and
// returns once it has migrated the cluster's database.
func startThrowawayRun(t *testing.T, bin, tmp string, wrap ...string) *throwawayRun {
	t.Helper()
	r := &throwawayRun{out: &testutil.Buffer{}, done: make(chan error, 1)}
	args := append(slices.Clone(wrap), bin, "run", "--api=false", "--demo-jobs", "0")
	r.cmd = exec.Command(args[0], args[1:]...)
	r.cmd.Env = throwawayEnv(tmp)
	r.cmd.Stdout, r.cmd.Stderr = r.out, r.out
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.done <- r.cmd.Wait() }()
	t.Cleanup(func() {
		if r.cmd.ProcessState == nil {
			_ = r.cmd.Process.Kill()
			<-r.done
		}
	})
	deadline := time.Now().Add(3 * time.Minute) // initdb at load 16
	for !strings.Contains(r.out.String(), "workq: schema at version") {
		select {
		case err := <-r.done:
			t.Fatalf("workq run ended (%v) before it was ready:\n%s", err, r.out.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("workq run not ready within 3 minutes:\n%s", r.out.String())
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(tmp, "workq-pg-*"))
	if len(dirs) != 1 {
		t.Fatalf("cluster directories in %s: %v, want one", tmp, dirs)
	}
	r.dir = dirs[0]
	if len(pgembed.ProcessesIn(r.dir)) == 0 {
		t.Fatalf("workq run is ready but no server runs in %s", r.dir)
	}
	return r
}

// wait waits for the run to end and returns its exit.
func (r *throwawayRun) wait(t *testing.T, bound time.Duration) error {
	t.Helper()
	select {
	case err := <-r.done:
		return err
	case <-time.After(bound):
		t.Fatalf("workq run did not end within %s:\n%s", bound, r.out.String())
		return nil
	}
}

// awaitClusterGone waits until no process works in dir and dir is gone.
func awaitClusterGone(t *testing.T, dir string, bound time.Duration) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		procs := pgembed.ProcessesIn(dir)
		_, err := os.Lstat(dir)
		if len(procs) == 0 && errors.Is(err, os.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s after the owner ended: processes %v still work in it, directory exists: %v", bound, procs, err == nil)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// watchdogsOf returns the watchdogs of the cluster in dir: the processes
// whose arguments are pgembed-watchdog and, last, dir.
func watchdogsOf(dir string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		if slices.Contains(args, "pgembed-watchdog") && args[len(args)-1] == dir {
			pids = append(pids, pid)
		}
	}
	return pids
}
