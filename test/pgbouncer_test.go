package test

// Issue 11 scenario 4: workq through PgBouncer in transaction pooling mode.
// The processes connect through a PgBouncer the test starts; the test
// checks the outcome over a direct connection.

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/workq/workq/internal/testdb"
)

// TestPgBouncer runs the end-to-end demo (job runs with retries, the outbox
// relay with ordered keys and a fan-in join, the inbox processor, timers,
// a materialised schedule) and the maintenance leader's failover (reaps of
// expired leases, the row lock handed over under a greater token) with
// every connection of the workq processes going through PgBouncer in
// transaction pooling mode, poll-only, with pgx's exec query mode (the
// installed PgBouncer predates max_prepared_statements). A sampler asserts
// that no backend of the database ever holds an advisory lock.
func TestPgBouncer(t *testing.T) {
	t.Parallel()
	bin := buildWorkq(t)
	t.Run("workq run, poll-only, every table", func(t *testing.T) {
		// A cluster of its own: the demo's keyed outbox messages must be
		// delivered within its 4 s, which a transaction held open anywhere
		// else in the cluster (a parallel plan test filling 100k rows)
		// would prevent.
		url := testdb.NewClusterURL(t)
		bouncer := startPgBouncer(t, url)
		stop := watchAdvisoryLocks(t, url)
		checkRunDemo(t, bin, url, bouncer, true, "--poll-only")
		stop()
		bouncerServed(t, bouncer)
	})
	t.Run("maintenance leader failover", func(t *testing.T) {
		url := testdb.URL(t)
		bouncer := startPgBouncer(t, url)
		stop := watchAdvisoryLocks(t, url)
		leaderFailover(t, bin, url, bouncer)
		stop()
		bouncerServed(t, bouncer)
	})
}

// pgBouncerLog maps the URL startPgBouncer returned to its log file.
var pgBouncerLog = map[string]string{}

// startPgBouncer starts a PgBouncer in transaction pooling mode on a free
// loopback port in front of the database of dbURL and returns the URL to
// reach that database through it. It fails the test (never skips) when
// pgbouncer is not installed.
func startPgBouncer(t *testing.T, dbURL string) string {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		for _, p := range []string{"/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"} {
			if isExecutable(p) {
				bin, err = p, nil
				break
			}
		}
	}
	if err != nil {
		t.Fatalf("pgbouncer is not installed (Debian: apt-get install pgbouncer; .ci/run installs it): %v", err)
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	dbname := strings.TrimPrefix(u.Path, "/")
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "5432"
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := l.Addr().(*net.TCPAddr).Port
	l.Close()

	// Not t.TempDir: its parent is private to root, and pgbouncer runs as
	// postgres under a root shell.
	dir, err := os.MkdirTemp("", "workq-pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	logFile := filepath.Join(dir, "pgbouncer.log")
	conf := fmt.Sprintf(`[databases]
%s = host=%s port=%s dbname=%s user=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = any
pool_mode = transaction
max_client_conn = 500
default_pool_size = 20
logfile = %s
pidfile = %s
`, dbname, host, port, dbname, listen, logFile, filepath.Join(dir, "pgbouncer.pid"))
	confFile := filepath.Join(dir, "pgbouncer.ini")
	if err := os.WriteFile(confFile, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, confFile)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	// PgBouncer refuses to run as root: run it as the postgres system user.
	if os.Geteuid() == 0 {
		pu, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root needs a 'postgres' system user for pgbouncer: %v", err)
		}
		uid, _ := strconv.Atoi(pu.Uid)
		gid, _ := strconv.Atoi(pu.Gid)
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start pgbouncer: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		if t.Failed() {
			logText, _ := os.ReadFile(logFile)
			t.Logf("pgbouncer output:\n%s\nlog:\n%s", out.String(), logText)
		}
	})
	bouncer := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable&default_query_exec_mode=cache_describe", listen, dbname)
	awaitCond(t, 15*time.Second, "pgbouncer accepts connections", func() (bool, string) {
		select {
		case <-exited:
			t.Fatalf("pgbouncer exited: %s", out.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, bouncer)
		if err != nil {
			return false, err.Error()
		}
		defer c.Close(ctx)
		var one int
		if err := c.QueryRow(ctx, "select 1").Scan(&one); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	pgBouncerLog[bouncer] = logFile
	return bouncer
}

// bouncerServed checks that the processes did connect through PgBouncer:
// its log has their logins (with their application names).
func bouncerServed(t *testing.T, bouncer string) {
	t.Helper()
	logText, err := os.ReadFile(pgBouncerLog[bouncer])
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(logText), "login attempt"); n < 2 {
		t.Errorf("pgbouncer logged %d logins; want the processes' connections through it", n)
	}
}

// watchAdvisoryLocks samples pg_locks every 20ms until the returned
// function is called and fails the test if a backend of the database held
// an advisory lock: a session lock is unsafe behind transaction pooling.
func watchAdvisoryLocks(t *testing.T, url string) func() {
	t.Helper()
	db := openTestPool(t, url)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var samples, seen int
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			var n int
			err := db.QueryRow(ctx, `select count(*) from pg_locks l join pg_stat_activity a on a.pid = l.pid
				where l.locktype = 'advisory' and a.datname = current_database()`).Scan(&n)
			if err == nil {
				samples++
				seen += n
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		<-done
		if samples == 0 {
			t.Errorf("the advisory lock sampler took no sample")
		}
		if seen != 0 {
			t.Errorf("%d advisory locks seen over %d samples: workq must hold no session locks", seen, samples)
		}
		t.Logf("no advisory lock in %d samples of pg_locks", samples)
	}
	t.Cleanup(stop)
	return stop
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}
