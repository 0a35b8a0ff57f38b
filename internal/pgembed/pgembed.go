// Package pgembed starts a private, throwaway PostgreSQL cluster from the
// server binaries installed on this machine (initdb, pg_ctl). workq uses it as
// the embedded default of `workq run` when DATABASE_URL is unset, and the test
// harness uses it when neither TEST_DATABASE_URL nor Docker is available,
// and for the fault scenarios that restart, crash or fail over their own
// server (StartStandby, Promote, Follow: a primary and a standby).
//
// The cluster trades durability for speed (fsync off): it is for demos and
// tests, never for data anyone wants to keep.
package pgembed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrNoBinaries means no PostgreSQL server binaries were found.
var ErrNoBinaries = errors.New("no PostgreSQL server binaries (initdb, pg_ctl) found: install the postgresql server package or set WORKQ_PG_BINDIR")

// Server is a running throwaway cluster.
type Server struct {
	binDir  string
	baseDir string
	dataDir string
	port    int
	cred    *syscall.Credential
	owner   owner // the process the cluster does not outlive
	opts    Options
	stopped bool // by StopMode: Stop has no server to stop

	mu        sync.Mutex
	watchdogs []chan struct{} // closed when each watchdog has exited and been reaped
}

// Options change how the cluster runs; the zero value is what Start uses.
type Options struct {
	// Settings are server settings (-c name=value) applied over the
	// defaults, e.g. {"synchronous_commit": "on"} for a test that crashes
	// the server and needs every acknowledged commit to survive (the
	// default is off: a crash may lose the last commits).
	Settings map[string]string
	// Env is added to the environment of the server's processes, e.g.
	// LD_PRELOAD and FAKETIME to run it under libfaketime with a clock
	// other than the machine's.
	Env []string
	// StopWhenGone is the pid of the cluster's owner, the process whose
	// exit stops the cluster and deletes its directory (see
	// Server.StopWhenGone), watched from before initdb: a process killed
	// while the cluster starts leaves nothing behind either. 0 (the
	// default) is the process that starts the cluster.
	StopWhenGone int
}

// Start creates a cluster in a new temporary directory and starts it on a
// free loopback port. Stop it to remove every trace. The cluster does not
// outlive the process that started it: once that process has exited,
// however (SIGKILL included), a watchdog stops the server and deletes the
// directory, and should the watchdog have been killed too, the next Start
// on the machine does (docs/design.md 7.1).
func Start(ctx context.Context) (*Server, error) { return StartWith(ctx, Options{}) }

// StartWith is Start with options.
func StartWith(ctx context.Context, o Options) (*Server, error) {
	binDir, err := FindBinDir()
	if err != nil {
		return nil, err
	}
	s, err := newServer(binDir, o)
	if err != nil {
		return nil, err
	}
	if err := s.start(ctx); err != nil {
		// pg_ctl may have started a server before failing or being cancelled:
		// stop it before deleting its directory.
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Server) start(ctx context.Context) error {
	if err := s.prepare(); err != nil {
		return err
	}
	if err := s.run(ctx, "initdb", "-D", s.dataDir, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync", "--no-instructions"); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	s.port = port
	return s.startServer(ctx)
}

// newServer reaps the cluster directories whose owner has exited, then
// makes the new cluster's directory, marked with its owner
// (o.StopWhenGone, or this process) before anything else goes into it.
func newServer(binDir string, o Options) (*Server, error) {
	// PostgreSQL refuses to run as root; on a root shell (CI containers) run
	// the server as the postgres system user instead.
	var cred *syscall.Credential
	serverUID := os.Geteuid()
	if os.Geteuid() == 0 {
		var err error
		if cred, err = unprivileged(); err != nil {
			return nil, err
		}
		serverUID = int(cred.Uid)
	}
	pid := o.StopWhenGone
	if pid == 0 {
		pid = os.Getpid()
	}
	var own owner // none without /proc (not Linux): no watchdog, no reaping
	if hasProc() {
		var err error
		if own, err = processOf(pid); err != nil {
			return nil, fmt.Errorf("pgembed: the cluster's owner: %w", err)
		}
		// Best effort: a directory that cannot be reaped now is tried
		// again by the next start, and does not stop this one.
		_, _ = reapStale(serverUID)
	}
	base, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		return nil, fmt.Errorf("pgembed: temp dir: %w", err)
	}
	if own.pid != 0 {
		if err := writeOwner(base, own); err != nil {
			_ = os.RemoveAll(base)
			return nil, err
		}
	}
	return &Server{binDir: binDir, baseDir: base, dataDir: filepath.Join(base, "data"), cred: cred, owner: own, opts: o}, nil
}

// prepare makes s.baseDir the server user's and starts the watchdog.
func (s *Server) prepare() error {
	if s.cred != nil {
		if err := os.Chown(s.baseDir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			return fmt.Errorf("pgembed: chown %s: %w", s.baseDir, err)
		}
	}
	if s.owner.pid == 0 {
		return nil
	}
	return s.watch(s.owner)
}

// startServer starts the initialised cluster on s.port.
func (s *Server) startServer(ctx context.Context) error {
	settings := map[string]string{
		"listen_addresses":   "127.0.0.1",
		"fsync":              "off",
		"synchronous_commit": "off",
		"full_page_writes":   "off",
		"max_connections":    "200",
	}
	for k, v := range s.opts.Settings {
		settings[k] = v
	}
	names := make([]string, 0, len(settings))
	for k := range settings {
		names = append(names, k)
	}
	sort.Strings(names)
	args := []string{"-p", strconv.Itoa(s.port), "-k", s.baseDir}
	for _, k := range names {
		if strings.ContainsAny(k+settings[k], " '\"\\") {
			return fmt.Errorf("pgembed: setting %s=%q: names and values must not contain spaces or quotes", k, settings[k])
		}
		args = append(args, "-c", k+"="+settings[k])
	}
	return s.run(ctx, "pg_ctl", "-D", s.dataDir, "-l", filepath.Join(s.baseDir, "server.log"), "-o", strings.Join(args, " "), "-w", "-t", "60", "start")
}

// Shutdown modes of pg_ctl stop, for Restart.
const (
	ShutdownSmart     = "smart"     // wait for every client to disconnect
	ShutdownFast      = "fast"      // end every session (clients get an error), checkpoint, stop
	ShutdownImmediate = "immediate" // stop at once, as a crash does: the next start recovers from the WAL
)

// Restart stops the server in mode (ShutdownSmart, ShutdownFast or
// ShutdownImmediate) and starts it again on the same port with the same
// settings and data: what a restart or a crash of a production server does
// to its clients.
func (s *Server) Restart(ctx context.Context, mode string) error {
	switch mode {
	case ShutdownSmart, ShutdownFast, ShutdownImmediate:
	default:
		return fmt.Errorf("pgembed: restart: shutdown mode %q is not smart, fast or immediate", mode)
	}
	if err := s.StopMode(ctx, mode); err != nil {
		return err
	}
	if err := s.startServer(ctx); err != nil {
		return err
	}
	s.stopped = false
	return nil
}

// RestartAfter stops the server in mode, leaves it down for down (or until
// ctx ends), and starts it again on the same port and data: a restart that
// takes as long as a slow one in production.
func (s *Server) RestartAfter(ctx context.Context, mode string, down time.Duration) error {
	if err := s.StopMode(ctx, mode); err != nil {
		return err
	}
	t := time.NewTimer(down)
	select {
	case <-ctx.Done():
		t.Stop()
	case <-t.C:
	}
	if err := s.startServer(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	s.stopped = false
	return nil
}

// StopMode stops the server in mode (ShutdownSmart, ShutdownFast or
// ShutdownImmediate) and leaves it stopped, its directory kept: the primary
// of a failover that never comes back as it was (Follow can make it a
// standby of the new primary). Stop still deletes its directory.
func (s *Server) StopMode(ctx context.Context, mode string) error {
	switch mode {
	case ShutdownSmart, ShutdownFast, ShutdownImmediate:
	default:
		return fmt.Errorf("pgembed: stop: shutdown mode %q is not smart, fast or immediate", mode)
	}
	if err := s.run(ctx, "pg_ctl", "-D", s.dataDir, "-m", mode, "-w", "-t", "60", "stop"); err != nil {
		return err
	}
	s.stopped = true
	return nil
}

// Port is the server's TCP port on 127.0.0.1.
func (s *Server) Port() int { return s.port }

// URL returns a connection URL for database dbname on this server.
func (s *Server) URL(dbname string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, dbname)
}

// Stop shuts the server down and deletes its directory.
func (s *Server) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := s.run(ctx, "pg_ctl", "-D", s.dataDir, "-m", "immediate", "-w", "stop")
	if s.stopped {
		// Stopped by StopMode: pg_ctl finds no server, unless a start that
		// failed left one running, which it has stopped now.
		err = nil
	}
	s.cleanup()
	s.awaitWatchdogs(watchdogExitBound)
	return err
}

func (s *Server) cleanup() { _ = os.RemoveAll(s.baseDir) }

// watchdogExitBound is how long Stop waits for the watchdogs to see the
// directory gone and exit (they check twice a second).
const watchdogExitBound = 10 * time.Second

// awaitWatchdogs waits, at most d in all, for every watchdog to exit once
// the cluster directory is gone, so that Stop leaves no goroutine of its
// own behind (the one reaping each watchdog).
func (s *Server) awaitWatchdogs(d time.Duration) {
	s.mu.Lock()
	dogs := s.watchdogs
	s.mu.Unlock()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for _, done := range dogs {
		select {
		case <-done:
		case <-deadline.C:
			return
		}
	}
}

// StopWhenGone starts a detached watchdog that stops the server and deletes
// its directory once process pid has exited, however it exits: a test
// binary killed by its timeout never runs its cleanup, and its cluster
// would otherwise run on. After a Stop the watchdog finds nothing to do and
// ends. Every cluster already has one watching its owner
// (Options.StopWhenGone); this adds one for another process.
func (s *Server) StopWhenGone(pid int) error {
	p, err := processOf(pid)
	if err != nil {
		return fmt.Errorf("pgembed: stop when gone: %w", err)
	}
	return s.watch(p)
}

// watch starts a watchdog (watchdogScript) for owner o.
func (s *Server) watch(o owner) error {
	cmd := exec.Command("/bin/sh", "-c", watchdogScript, "pgembed-watchdog",
		strconv.Itoa(o.pid), strconv.FormatUint(o.start, 10), filepath.Join(s.binDir, "pg_ctl"), s.dataDir, s.baseDir)
	// A session of its own: the signals of the owner's terminal (Ctrl-C,
	// a hang-up) do not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: s.cred}
	if s.cred != nil {
		cmd.Env = append(os.Environ(), "HOME="+s.baseDir)
	}
	// No stdio: a reader of the test's output must not wait for the watchdog.
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, nil, nil
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgembed: start the watchdog: %w", err)
	}
	done := make(chan struct{})
	go func() { // reaps it when it ends; Stop waits for that
		_ = cmd.Wait()
		close(done)
	}()
	s.mu.Lock()
	s.watchdogs = append(s.watchdogs, done)
	s.mu.Unlock()
	return nil
}

func (s *Server) run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(s.binDir, name), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Dir = s.baseDir
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
		cmd.Env = append(os.Environ(), "HOME="+s.baseDir)
	}
	if len(s.opts.Env) > 0 {
		if cmd.Env == nil {
			cmd.Env = os.Environ()
		}
		cmd.Env = append(cmd.Env, s.opts.Env...)
	}
	if err := cmd.Run(); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.baseDir, "server.log"))
		return fmt.Errorf("pgembed: %s: %w\n%s%s", name, err, out.String(), log)
	}
	return nil
}

// FindBinDir locates the directory holding initdb and pg_ctl:
// $WORKQ_PG_BINDIR, then `pg_config --bindir`, then the newest
// /usr/lib/postgresql/*/bin, then $PATH.
func FindBinDir() (string, error) {
	var candidates []string
	if d := os.Getenv("WORKQ_PG_BINDIR"); d != "" {
		candidates = append(candidates, d)
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		candidates = append(candidates, strings.TrimSpace(string(out)))
	}
	versions, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(versions, func(i, j int) bool { return pgMajor(versions[i]) > pgMajor(versions[j]) })
	candidates = append(candidates, versions...)
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			candidates = append(candidates, filepath.Dir(real))
		}
	}
	for _, d := range candidates {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "pg_ctl")) && isExec(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", ErrNoBinaries
}

func pgMajor(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func isExec(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

func unprivileged() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgembed: running as root needs a 'postgres' system user to own the throwaway cluster: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgembed: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
