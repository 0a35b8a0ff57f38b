package testutil

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// BuildWorkq builds cmd/workq of the module whose root is moduleRoot
// (relative to the test's package directory, where tests run) into the
// test's temporary directory and returns the binary's path.
func BuildWorkq(t testing.TB, moduleRoot string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "workq")
	start := time.Now()
	cmd := exec.Command(GoBin(t), "build", "-o", bin, "./cmd/workq")
	cmd.Dir = moduleRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/workq: %v\n%s", err, out)
	}
	t.Logf("built workq in %s", time.Since(start).Round(time.Millisecond))
	return bin
}

// GoBin returns the path of the go command that runs the test: go test puts
// its GOROOT/bin first on the test's PATH.
func GoBin(t testing.TB) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH (go test puts its GOROOT/bin there): %v", err)
	}
	return goBin
}
