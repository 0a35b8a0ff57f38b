// Command workq is the one binary of workq: migrations, the worker, the
// reaper, the all-in-one `run`, enqueue, stats and the benchmark.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// defaultGCPercent is the GC target of the workq processes when GOGC is not
// set. A worker's live heap is a few tens of MB, and at the default of 100 the
// collector took about 15% of the process's CPU under load; 400 lets the heap
// grow to roughly five times the live data (still flat over time) and gave
// 12-17% more jobs/s in the burn-down benchmark (docs/throughput.md).
const defaultGCPercent = 400

func main() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals()...)
	cmd, err := newRoot(os.Stdout, os.Stderr).ExecuteContextC(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, errorLine(cmd, err))
		code := 1
		var ec interface{ ExitCode() int }
		if errors.As(err, &ec) {
			code = ec.ExitCode() // a partial list of shards: 3
		}
		os.Exit(code)
	}
}

// errorLine is the one line a failed command prints: the command's path
// (workq enqueue) and the error, its line breaks and tabs folded.
func errorLine(cmd *cobra.Command, err error) string {
	path := "workq"
	if cmd != nil {
		path = cmd.CommandPath()
	}
	msg := strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", " ; ")), " ")
	msg = strings.ReplaceAll(msg, " ; ", "; ")
	if path != "workq" {
		msg = strings.TrimPrefix(msg, "workq: ") // the library's own prefix, under the command's
	}
	if strings.HasPrefix(msg, path+": ") || strings.HasPrefix(msg, path+" ") {
		return msg
	}
	return path + ": " + msg
}

// stopSignals are the signals that stop a command cleanly: SIGINT, SIGTERM
// and SIGHUP (the terminal of `make run` closed: left at its default it
// ended the process at once, so no command stopped cleanly and `workq run`
// left its throwaway PostgreSQL running, docs/design.md 7.1). Not SIGHUP
// when the process started with it ignored (nohup workq worker &): a
// handler would undo nohup, and the process would stop with its terminal.
func stopSignals() []os.Signal {
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	return sigs
}
