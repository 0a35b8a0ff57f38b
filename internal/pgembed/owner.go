package pgembed

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A cluster never outlives the process that owns it (docs/design.md 7.1):
//
//   - every cluster's directory holds an owner file naming its owner by pid
//     and start time (written before anything else goes into the
//     directory), which marks the directory as pgembed's own;
//   - a watchdog (see watchdogScript), started before initdb, stops the
//     server and deletes the directory once the owner has exited, however it
//     exited (SIGKILL included);
//   - every start first reaps the directories whose owner is gone (their
//     watchdog was killed too, or the machine rebooted), stopping a server
//     still running in them.

// dirPrefix is how the name of every cluster directory starts, in
// os.TempDir().
const dirPrefix = "workq-pg-"

// ownerFile is the name of the owner file in a cluster directory, and
// ownerMagic its first line.
const (
	ownerFile  = "workq-owner"
	ownerMagic = "workq pgembed owner v1"
)

// owner is a process, told apart from a later process with the same pid by
// its start time (field 22 of /proc/PID/stat, in clock ticks since boot).
type owner struct {
	pid   int
	start uint64
}

// hasProc reports whether this system has Linux's /proc, which the
// watchdog and the reaping read; without it a cluster is deleted only by
// Stop.
func hasProc() bool {
	_, err := os.Stat("/proc/self/stat")
	return err == nil
}

// errNotRunning means a process has exited (or is a zombie).
var errNotRunning = errors.New("not running")

// processOf returns the running process pid as an owner.
func processOf(pid int) (owner, error) {
	start, state, err := procStat(pid)
	if err != nil {
		return owner{}, err
	}
	if state == "Z" || state == "X" {
		return owner{}, fmt.Errorf("process %d: %w", pid, errNotRunning)
	}
	return owner{pid: pid, start: start}, nil
}

// alive reports whether o still runs: the pid exists, has o's start time,
// and is not a zombie (an owner killed but not yet waited for by its parent
// is gone).
func (o owner) alive() bool {
	p, err := processOf(o.pid)
	return err == nil && p == o
}

// procStat reads the start time and state of process pid.
func procStat(pid int) (start uint64, state string, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return 0, "", fmt.Errorf("process %d: %w", pid, errNotRunning)
	}
	if err != nil {
		return 0, "", fmt.Errorf("pgembed: process %d: %w", pid, err)
	}
	// The command name (field 2) is in parentheses and may hold spaces and
	// parentheses itself: the fields after it follow the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	var f []string
	if i >= 0 {
		f = strings.Fields(s[i+1:])
	}
	if len(f) < 20 {
		return 0, "", fmt.Errorf("pgembed: /proc/%d/stat: unexpected format %q", pid, s)
	}
	start, err = strconv.ParseUint(f[19], 10, 64) // field 22
	if err != nil {
		return 0, "", fmt.Errorf("pgembed: /proc/%d/stat: start time: %w", pid, err)
	}
	return start, f[0], nil // field 3
}

// writeOwner marks dir as a cluster directory owned by o.
func writeOwner(dir string, o owner) error {
	text := fmt.Sprintf("%s\npid %d\nstart %d\n", ownerMagic, o.pid, o.start)
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(text), 0o644); err != nil {
		return fmt.Errorf("pgembed: owner file: %w", err)
	}
	return nil
}

// readOwner returns the owner written in dir's owner file. It fails unless
// the file is a regular file of this process's user in the exact format
// writeOwner writes: a directory without one is not pgembed's.
func readOwner(dir string) (owner, error) {
	path := filepath.Join(dir, ownerFile)
	fi, err := os.Lstat(path)
	if err != nil {
		return owner{}, err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !fi.Mode().IsRegular() || !ok || int(st.Uid) != os.Geteuid() {
		return owner{}, fmt.Errorf("%s: not a regular file of user %d", path, os.Geteuid())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return owner{}, err
	}
	var o owner
	if n, err := fmt.Sscanf(string(b), ownerMagic+"\npid %d\nstart %d\n", &o.pid, &o.start); err != nil || n != 2 || o.pid <= 0 {
		return owner{}, fmt.Errorf("%s: not an owner file", path)
	}
	return o, nil
}

// reapStale deletes the cluster directories in os.TempDir() whose owner has
// exited, after stopping a server still running in one. It touches only
// directories named workq-pg-* that are owned by this process's user (or by
// serverUID, the user the servers run as) and hold an owner file this
// user wrote (readOwner); it returns the directories it deleted and the
// first error met (the others are still reaped).
func reapStale(serverUID int) ([]string, error) {
	dirs, err := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	if err != nil {
		return nil, fmt.Errorf("pgembed: reap: %w", err)
	}
	var reaped []string
	var first error
	for _, dir := range dirs {
		fi, err := os.Lstat(dir)
		if err != nil || !fi.IsDir() {
			continue
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || (int(st.Uid) != os.Geteuid() && int(st.Uid) != serverUID) {
			continue
		}
		o, err := readOwner(dir)
		if err != nil || o.alive() {
			continue
		}
		err = stopPostmaster(filepath.Join(dir, "data"))
		if err == nil {
			err = os.RemoveAll(dir)
		}
		if err != nil {
			if first == nil {
				first = fmt.Errorf("pgembed: reap %s (its owner, process %d, has exited): %w", dir, o.pid, err)
			}
			continue
		}
		reaped = append(reaped, dir)
	}
	return reaped, first
}

// stopPostmaster stops the postmaster running in dataDir, if one is: the
// process its postmaster.pid names, only if that process still works in
// dataDir (a pid from before a reboot may belong to another process now).
// It sends SIGQUIT (an immediate shutdown, as pg_ctl -m immediate) and waits
// for the server to go, then SIGKILL.
func stopPostmaster(dataDir string) error {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return nil // not a postmaster.pid a server wrote: no server to stop
	}
	if !worksIn(pid, dataDir) {
		return nil
	}
	for _, sig := range []syscall.Signal{syscall.SIGQUIT, syscall.SIGKILL} {
		if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("signal the postmaster %d: %w", pid, err)
		}
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if len(ProcessesIn(dataDir)) == 0 {
				return nil
			}
		}
	}
	return fmt.Errorf("the server in %s is still running (postmaster %d)", dataDir, pid)
}

// worksIn reports whether process pid runs with its working directory in
// dir (a postmaster and its children work in their data directory).
func worksIn(pid int, dir string) bool {
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil {
		return false
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	cwd = strings.TrimSuffix(cwd, " (deleted)")
	return cwd == dir || strings.HasPrefix(cwd, dir+"/")
}

// ProcessesIn returns the pids of the processes working in dir or below it
// (those whose /proc/PID/cwd this process may read): a server and all its
// children work in its data directory. Tests use it to check that nothing of
// a cluster is left.
func ProcessesIn(dir string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if worksIn(pid, dir) {
			if _, state, err := procStat(pid); err == nil && state != "Z" {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// watchdogScript is the watchdog: $1 is the owner's pid, $2 its start time,
// $3 pg_ctl, $4 the data directory and $5 the cluster directory. While the
// owner runs (its /proc/PID/stat has the start time, its state is not
// zombie) and the directory exists (Stop deletes it) it checks twice a
// second; then it stops the server, if any, and deletes the directory. It
// reads /proc rather than using kill -0: it may run as the postgres user,
// which may not signal the owner.
const watchdogScript = `
alive() {
	read -r stat < /proc/"$1"/stat || return 1
	set -- ${stat##*") "}
	[ "$1" != Z ] && [ "$1" != X ] && [ "${20}" = "$start" ]
}
pid=$1 start=$2
while alive "$pid" && [ -d "$5" ]; do sleep 0.5; done
if [ -d "$5" ]; then
	"$3" -D "$4" -m immediate -w stop >/dev/null 2>&1
	rm -rf "$5"
fi
`
