package builtin

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/workq/workq/internal/worker"
)

// ExecKind is the job kind of the exec handler.
const ExecKind = "exec"

// ExecPayload is the payload of an exec job: which allow-listed command to
// run and its arguments. No shell is involved.
type ExecPayload struct {
	Command string   `json:"command"`
	Args    []string `json:"args"`
	Stdin   string   `json:"stdin"`
}

// Exec runs commands from an allow-list fixed on the worker's command line.
type Exec struct {
	allow map[string]string // name or path as listed -> resolved path
}

// NewExec resolves every allowed command now, so a typo fails at start-up
// rather than on the first job.
func NewExec(allow []string) (*Exec, error) {
	m := map[string]string{}
	for _, a := range allow {
		p, err := exec.LookPath(a)
		if err != nil {
			return nil, fmt.Errorf("exec-allow %q: %w", a, err)
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("exec-allow %q: %w", a, err)
		}
		m[a] = abs
	}
	return &Exec{allow: m}, nil
}

// Handle is the worker.HandlerFunc. Exit status 0 acks; a non-zero exit
// retries; a command off the allow-list fails permanently.
func (h *Exec) Handle(ctx context.Context, job *worker.Job) error {
	var p ExecPayload
	if err := job.Decode(&p); err != nil {
		return err
	}
	path, ok := h.allow[p.Command]
	if !ok {
		return worker.Permanent(fmt.Errorf("exec: command %q is not in this worker's --exec-allow list", p.Command))
	}
	cmd := exec.CommandContext(ctx, path, p.Args...)
	dieWithWorker(cmd)
	// When ctx ends the command is killed; a grandchild still holding its
	// output pipe must not keep the handler waiting past this.
	cmd.WaitDelay = 5 * time.Second
	cmd.Stdin = strings.NewReader(p.Stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	job.Logger().Info("exec finished", "command", p.Command, "args", p.Args, "output", tail(out.String(), 4096), "err", err)
	if err != nil {
		return fmt.Errorf("exec %s: %w: %s", p.Command, err, tail(out.String(), 512))
	}
	return nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
