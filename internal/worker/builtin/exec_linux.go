package builtin

import (
	"os/exec"
	"syscall"
)

// dieWithWorker makes the kernel kill the command if the worker process
// dies, even by SIGKILL: otherwise the command would keep running while its
// job is claimed again after the lease expires, and two copies would run at
// once. (Pdeathsig fires when the thread that started the command exits;
// Go keeps its threads for the life of the process unless a goroutine
// locked to one exits, which the worker never does.)
func dieWithWorker(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
