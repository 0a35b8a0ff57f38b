package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/workq/workq"
	"github.com/workq/workq/internal/config"
	"github.com/workq/workq/internal/testdb"
	"github.com/workq/workq/internal/testutil"
)

// holdPort listens on addr until the test ends; it returns false when addr
// is already taken by someone else (it is in use either way).
func holdPort(t *testing.T, addr string) bool {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return true
}

// takenAddr returns a loopback address that the test holds.
func takenAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

var servedOnRE = regexp.MustCompile(`is in use, so the HTTP API and the dashboard are on (http://127\.0\.0\.1:\d+) instead`)

// The demo's API address is taken: when it was the default, `workq run`
// serves on a free port of the same host and prints where; when it was asked
// for, it is an error that names the address and the flag.
func TestDemoAPIWhenItsAddressIsTaken(t *testing.T) {
	isolateEnv(t)
	pool := testdb.Pool(t)
	cfg := config.Default()
	cfg.APIAddr = takenAddr(t)
	log := slog.New(slog.DiscardHandler)

	t.Run("defaulted: another port, printed", func(t *testing.T) {
		var out strings.Builder
		stop, err := startDemoAPI(context.Background(), demoClient(t, pool), cfg, log, &out, nil, true)
		if err != nil {
			t.Fatalf("startDemoAPI on a taken default address: %v", err)
		}
		defer stop()
		m := servedOnRE.FindStringSubmatch(out.String())
		if m == nil || !strings.Contains(out.String(), cfg.APIAddr+" is in use") || strings.HasSuffix(m[1], cfg.APIAddr) {
			t.Fatalf("output does not say the API moved off %s:\n%s", cfg.APIAddr, out.String())
		}
		if !strings.Contains(out.String(), "workq: dashboard at "+m[1]+"/ui/") {
			t.Errorf("the dashboard line does not show %s:\n%s", m[1], out.String())
		}
		res, err := http.Get(m[1] + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Errorf("GET %s/healthz: %d", m[1], res.StatusCode)
		}
	})
	t.Run("asked for: an error", func(t *testing.T) {
		var out strings.Builder
		_, err := startDemoAPI(context.Background(), demoClient(t, pool), cfg, log, &out, nil, false)
		if err == nil || !strings.Contains(err.Error(), "--api-addr "+cfg.APIAddr+" is already in use") || !strings.Contains(err.Error(), "--api=false") {
			t.Fatalf("startDemoAPI on a taken address that was asked for: %v; want an error naming it and the flags", err)
		}
		if out.Len() != 0 {
			t.Errorf("printed %q", out.String())
		}
	})
}

// The command decides: the default address (neither --api-addr nor
// WORKQ_API_ADDR) moves to a free port; a given one that is taken fails the
// command.
func TestRunAPIAddressInUse(t *testing.T) {
	isolateEnv(t)
	t.Setenv("DATABASE_URL", testdb.URL(t))
	addr := takenAddr(t)
	t.Run("--api-addr", func(t *testing.T) {
		_, err := runCLI(t, "run", "--for", "1s", "--demo-jobs", "0", "--api-addr", addr, "--log-level", "warn")
		if err == nil || !strings.Contains(err.Error(), "--api-addr "+addr+" is already in use") {
			t.Fatalf("workq run --api-addr %s (taken): %v; want an error naming the address and the flag", addr, err)
		}
	})
	t.Run("WORKQ_API_ADDR", func(t *testing.T) {
		t.Setenv("WORKQ_API_ADDR", addr)
		_, err := runCLI(t, "run", "--for", "1s", "--demo-jobs", "0", "--log-level", "warn")
		if err == nil || !strings.Contains(err.Error(), "--api-addr "+addr+" is already in use") {
			t.Fatalf("workq run with WORKQ_API_ADDR=%s (taken): %v; want an error naming the address", addr, err)
		}
	})
	t.Run("default", func(t *testing.T) {
		def := config.Default().APIAddr
		if holdPort(t, def) {
			t.Logf("holding %s for the test", def)
		} else {
			t.Logf("%s is already taken by another process", def)
		}
		out, err := runCLI(t, "run", "--for", "1s", "--demo-jobs", "0", "--log-level", "warn")
		if err != nil {
			t.Fatalf("workq run with %s taken: %v", def, err)
		}
		if !strings.Contains(out, def+" is in use") || servedOnRE.FindString(out) == "" {
			t.Errorf("workq run did not say where the API went instead of %s:\n%s", def, out)
		}
	})
}

// `make run` stopped with Ctrl-C: the terminal sends SIGINT to the whole
// foreground process group, make included. make used to run `go run`,
// which exits 1 whenever it is interrupted, whatever its child did, so make
// printed "make: *** [Makefile:26: run] Error 1" after workq had stopped
// cleanly. Now make runs the built binary itself.
//
// GNU make, when SIGINT reaches it, waits for its recipe and then ends by
// the same signal (a shell shows status 130 and prints nothing; make
// prints "Error" only for a recipe that failed). When make ignores SIGINT
// (started from a script or CI, where only the program is meant to act on
// it), its exit status is the binary's: 0.
func TestMakeRunStopsCleanlyOnCtrlC(t *testing.T) {
	isolateEnv(t)
	makeBin, err := exec.LookPath("make")
	if err != nil {
		t.Fatalf("this test runs `make run`: make is not on PATH (apt-get install make): %v", err)
	}
	dbURL := testdb.URL(t)
	for _, tc := range []struct {
		name        string
		makeIgnores bool // make starts with SIGINT ignored
	}{{"from a terminal", false}, {"make ignoring SIGINT", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var out testutil.Buffer
			cmd := exec.Command(makeBin, "--no-print-directory", "run")
			cmd.Dir = "../.."
			cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "WORKQ_LOG_LEVEL=warn")
			cmd.Stdout, cmd.Stderr = &out, &out
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its own group, as a terminal job has
			// A child starts with SIGINT ignored if this process ignores it,
			// and at its default if this process handles it.
			if tc.makeIgnores {
				signal.Ignore(syscall.SIGINT)
			} else {
				signal.Notify(make(chan os.Signal, 1), syscall.SIGINT)
			}
			err := cmd.Start()
			signal.Reset(syscall.SIGINT)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			t.Cleanup(func() {
				if cmd.ProcessState == nil {
					_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
					<-done
				}
			})
			ready := time.Now().Add(5 * time.Minute) // make builds the binary first
			for !strings.Contains(out.String(), "workq: dashboard at") {
				select {
				case err := <-done:
					t.Fatalf("make run ended (%v) before it was ready:\n%s", err, out.String())
				case <-time.After(100 * time.Millisecond):
				}
				if time.Now().After(ready) {
					t.Fatalf("make run not ready within 5 minutes:\n%s", out.String())
				}
			}
			time.Sleep(time.Second) // working the demo
			if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			select {
			case err = <-done:
			case <-time.After(time.Minute):
				t.Fatalf("make run did not end within a minute of SIGINT:\n%s", out.String())
			}
			text := out.String()
			if strings.Contains(text, "Error") || !strings.Contains(text, "workq: stopped.") {
				t.Errorf("make run's output after SIGINT has an error or lacks workq's 'stopped' line:\n%s", text)
			}
			var exit *exec.ExitError
			switch {
			case tc.makeIgnores && err != nil:
				t.Errorf("make run (ignoring SIGINT) exited %v, want 0 (the binary's status):\n%s", err, text)
			case !tc.makeIgnores && !errors.As(err, &exit):
				t.Errorf("make run exited %v, want it ended by SIGINT (GNU make re-raises it after its recipe)", err)
			case !tc.makeIgnores:
				if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGINT {
					t.Errorf("make run ended %v, want ended by SIGINT after its recipe exited 0:\n%s", err, text)
				}
			}
		})
	}
}

// demoClient is a producer Client on pool for startDemoAPI (the demo
// passes its own worker's).
func demoClient(t *testing.T, pool *pgxpool.Pool) *workq.Client {
	t.Helper()
	c, err := workq.NewClient(pool, workq.Config{Maintenance: workq.MaintenanceConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
