package testutil

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// BuildWorkq builds cmd/workq of the module whose root is moduleRoot
// (relative to the test's package directory, where tests run) into the
// test's temporary directory and returns the binary's path.
func BuildWorkq(t testing.TB, moduleRoot string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "workq")
	start := time.Now()
	cmd := exec.Command(goBin, "build", "-o", bin, "./cmd/workq")
	cmd.Dir = moduleRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/workq: %v\n%s", err, out)
	}
	t.Logf("built workq in %s", time.Since(start).Round(time.Millisecond))
	return bin
}
