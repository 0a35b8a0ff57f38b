package test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	wqdb "github.com/workq/workq/internal/db"
	"github.com/workq/workq/internal/pgembed"
	"github.com/workq/workq/internal/testutil"
)

// failoverPGAF reports whether the pg_auto_failover scenario runs
// (WORKQ_FAILOVER_PGAF=1, make faults-failover).
func failoverPGAF() bool { return os.Getenv("WORKQ_FAILOVER_PGAF") == "1" }

// pgaf is a pg_auto_failover formation of the test's own: a monitor and two
// nodes, each a `pg_autoctl` process group (the keeper and its postgres)
// that the test can kill -9 and run again. On a root shell everything runs
// as the postgres system user, as pgembed's clusters do.
type pgaf struct {
	t       *testing.T
	dir     string
	env     []string
	cred    *syscall.Credential
	monitor string // the monitor's URL
	mport   int

	mu    sync.Mutex
	procs map[string]*pgafProc // monitor, n1, n2
	ports map[string]int
}

type pgafProc struct {
	cmd  *exec.Cmd
	out  testutil.Buffer
	done chan struct{}
}

// startPGAF starts the monitor and two nodes, n1 the primary and n2 its
// synchronous standby (pg_auto_failover's default: replication quorum,
// synchronous_standby_names 'ANY 1 (...)').
func startPGAF(t *testing.T) *pgaf {
	t.Helper()
	if _, err := exec.LookPath("pg_autoctl"); err != nil {
		t.Fatal("pg_autoctl is not installed: `make faults-failover` installs it (Debian package postgresql-<major>-auto-failover)")
	}
	binDir, err := pgembed.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "workq-pgaf-")
	if err != nil {
		t.Fatal(err)
	}
	c := &pgaf{t: t, dir: dir, procs: map[string]*pgafProc{}, ports: map[string]int{}}
	t.Cleanup(c.close)
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root needs a postgres system user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	c.env = append(os.Environ(), "PATH="+binDir+":"+os.Getenv("PATH"), "HOME="+dir,
		"XDG_CONFIG_HOME="+filepath.Join(dir, "config"), "XDG_DATA_HOME="+filepath.Join(dir, "data"),
		"XDG_RUNTIME_DIR="+filepath.Join(dir, "run"))
	for _, name := range []string{"monitor", "n1", "n2"} {
		c.ports[name] = freeTCPPort(t)
	}
	c.mport = c.ports["monitor"]
	c.monitor = fmt.Sprintf("postgres://autoctl_node@127.0.0.1:%d/pg_auto_failover?sslmode=disable", c.mport)
	c.start("monitor", "create", "monitor", "--pgdata", c.pgdata("monitor"), "--pgport", strconv.Itoa(c.mport),
		"--hostname", "127.0.0.1", "--auth", "trust", "--no-ssl", "--run")
	awaitCond(t, 2*time.Minute, "the pg_auto_failover monitor", func() (bool, string) {
		_, err := c.states()
		return err == nil, fmt.Sprint(err)
	})
	for _, n := range []string{"n1", "n2"} {
		c.start(n, "create", "postgres", "--pgdata", c.pgdata(n), "--pgport", strconv.Itoa(c.ports[n]), "--hostname", "127.0.0.1",
			"--name", n, "--auth", "trust", "--no-ssl", "--monitor", c.monitor, "--run")
		want := map[string]string{"n1": "single"} // alone
		if n == "n2" {
			want = map[string]string{"n1": "primary", "n2": "secondary"}
		}
		c.await(want, 2*time.Minute)
	}
	return c
}

func (c *pgaf) pgdata(name string) string { return filepath.Join(c.dir, name) }

// start runs pg_autoctl args in a process group of its own under name.
func (c *pgaf) start(name string, args ...string) {
	c.t.Helper()
	p := &pgafProc{done: make(chan struct{})}
	p.cmd = exec.Command("pg_autoctl", args...)
	p.cmd.Env, p.cmd.Dir = c.env, c.dir
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: c.cred}
	if err := p.cmd.Start(); err != nil {
		c.t.Fatalf("pg_autoctl %s: %v", strings.Join(args, " "), err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	c.mu.Lock()
	c.procs[name] = p
	c.mu.Unlock()
}

// kill kill -9s a node's process group: its keeper and its postgres, as a
// machine that dies.
func (c *pgaf) kill(name string) {
	c.t.Helper()
	c.mu.Lock()
	p := c.procs[name]
	c.mu.Unlock()
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		c.t.Fatalf("kill %s: %v", name, err)
	}
	<-p.done
}

// run runs one pg_autoctl command to completion.
func (c *pgaf) run(timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "pg_autoctl", args...)
	cmd.Env, cmd.Dir = c.env, c.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// states returns each node's reported and assigned state, "reported/assigned".
func (c *pgaf) states() (map[string]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/pg_auto_failover?sslmode=disable", c.mport))
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `select nodename, reportedstate::text || '/' || goalstate::text from pgautofailover.node`)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for rows.Next() {
		var n, s string
		if err := rows.Scan(&n, &s); err != nil {
			return nil, err
		}
		out[n] = s
	}
	return out, rows.Err()
}

// await waits until each named node reports and is assigned its state.
func (c *pgaf) await(want map[string]string, within time.Duration) {
	c.t.Helper()
	awaitCond(c.t, within, fmt.Sprintf("pg_auto_failover states %v", want), func() (bool, string) {
		got, err := c.states()
		if err != nil {
			return false, err.Error()
		}
		for n, s := range want {
			if got[n] != s+"/"+s {
				return false, fmt.Sprint(got)
			}
		}
		return true, ""
	})
}

// url is the formation's URL for database dbname: both nodes,
// target_session_attrs=read-write (what `pg_autoctl show uri` prints).
func (c *pgaf) url(dbname string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/%s?sslmode=disable&target_session_attrs=read-write",
		c.ports["n1"], c.ports["n2"], dbname)
}

// close stops every process group and deletes the directory; on failure it
// logs pg_autoctl's output first.
func (c *pgaf) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, p := range c.procs {
		select {
		case <-p.done:
		default:
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
		if c.t.Failed() {
			c.t.Logf("pg_autoctl %s:\n%s", name, p.out.String())
		}
	}
	// The postgres of a killed keeper may outlive it for a moment.
	for _, name := range []string{"monitor", "n1", "n2"} {
		if b, err := os.ReadFile(filepath.Join(c.pgdata(name), "postmaster.pid")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0])); err == nil && pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	_ = os.RemoveAll(c.dir)
}

// freeTCPPort returns a loopback port free now.
func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// The long version of scenario 9 (make faults-failover,
// WORKQ_FAILOVER_PGAF=1): the same load on a pg_auto_failover formation of
// a monitor and two nodes (the primary with a synchronous standby, as
// pg_auto_failover sets them up), through a planned failover (`pg_autoctl
// perform failover`) and then the kill -9 of the primary's keeper and
// postgres, which the monitor detects and fails over on its own; the
// killed node is run again and rejoins as the standby. The same checks as
// scenario 9: no process exits, every worker claims again after each
// failover, the leader's token never goes down, every acknowledged
// enqueue is done, and the history checker passes.
func testFaultFailoverPGAF(t *testing.T, bin string) {
	const lease = 10 * time.Second
	ctx := context.Background()
	c := startPGAF(t)
	admin, err := pgx.Connect(ctx, c.url("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "create database faults"); err != nil {
		t.Fatal(err)
	}
	admin.Close(ctx)
	url := c.url("faults")
	if _, err := wqdb.MigrateUp(ctx, url); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	r := startOutageRig(t, bin, url, "pgaf", 4000, lease)
	time.Sleep(3 * time.Second) // under load

	// 1. A planned failover: n1 demoted, n2 promoted.
	tok0 := r.leaderToken()
	start := time.Now()
	if out, err := c.run(2*time.Minute, "perform", "failover", "--pgdata", c.pgdata("monitor")); err != nil {
		t.Fatalf("pg_autoctl perform failover: %v\n%s", err, out)
	}
	done := time.Now()
	planned := done.Sub(start)
	resume1 := r.awaitClaims(done, "the planned failover")
	api1 := r.awaitAPI(done, "the planned failover")
	c.await(map[string]string{"n1": "secondary", "n2": "primary"}, 2*time.Minute)
	tok1 := r.leaderToken()
	time.Sleep(3 * time.Second)

	// 2. n2 dies (kill -9 of its keeper and postgres); the monitor notices
	// and promotes n1, which runs alone (wait_primary) until n2 is back.
	killed := time.Now()
	c.kill("n2")
	var promoted time.Time
	awaitCond(t, 3*time.Minute, "n1 promoted after n2 died", func() (bool, string) {
		st, err := c.states()
		if err == nil && (st["n1"] == "wait_primary/wait_primary" || st["n1"] == "primary/primary") {
			promoted = time.Now()
			return true, ""
		}
		return false, fmt.Sprint(st, err)
	})
	detect := promoted.Sub(killed)
	resume2 := r.awaitClaims(promoted, "the failover after the kill")
	api2 := r.awaitAPI(promoted, "the failover after the kill")
	c.start("n2", "run", "--pgdata", c.pgdata("n2"))
	rejoin := time.Now()
	c.await(map[string]string{"n1": "primary", "n2": "secondary"}, 3*time.Minute)
	rejoined := time.Since(rejoin)
	time.Sleep(2 * time.Second)
	r.drain(promoted)
	tok2 := r.checkLeader(promoted, 0)
	if tok1 < tok0 || tok2 < tok1 {
		t.Errorf("the leader's token went down: %d, %d, %d", tok0, tok1, tok2)
	}
	lost, committedAnyway := r.lostEnqueues()
	for _, l := range lost {
		t.Error(l)
	}
	h, stats := r.stop()
	h.check(t, historyOpts{AllDone: true})
	t.Logf("planned failover (pg_autoctl perform failover) took %s: workers claimed again %v after it returned, the API was ready %s after",
		planned.Round(time.Millisecond), roundAll(resume1), api1.Round(time.Millisecond))
	t.Logf("kill -9 of the primary: the monitor promoted the standby %s later; workers claimed again %v after that, the API was ready %s after; the killed node rejoined as the standby in %s",
		detect.Round(time.Second), roundAll(resume2), api2.Round(time.Millisecond), rejoined.Round(time.Second))
	t.Logf("leader tokens %d, %d, %d; %d backlog items and %d jobs enqueued during the failovers (%d through the API; %d enqueues failed, %d of those committed anyway) all done; %d answered items ran again; %s",
		tok0, tok1, tok2, r.backlog, len(r.prod.acked), len(r.prod.apiAcked), len(r.prod.failed), committedAnyway,
		len(h.answeredReruns()), h.summary())
	t.Logf("worker stats: %v", stats)
}
