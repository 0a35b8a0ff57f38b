package pgembed

import (
	"os"
	"syscall"
	"testing"
)

// PrivateTempDir makes a directory for the throwaway clusters of one test
// (give it as TMPDIR, where clusters are made and reaped), so that the test
// sees only its own: like /tmp, writable by all and sticky (run as root,
// the servers and their watchdogs run as the postgres user), and short (a
// server's socket path must fit in 107 bytes). Anything left in it is
// stopped and deleted when the test ends.
func PrivateTempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "wq-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, pid := range ProcessesIn(dir) {
			_ = syscall.Kill(pid, syscall.SIGQUIT)
		}
		_ = os.RemoveAll(dir)
	})
	return dir
}
