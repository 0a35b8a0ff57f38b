//go:build !linux

package builtin

import "os/exec"

// dieWithWorker has no portable equivalent off Linux: there a command
// outlives a worker killed by SIGKILL (docs/operations.md).
func dieWithWorker(*exec.Cmd) {}
