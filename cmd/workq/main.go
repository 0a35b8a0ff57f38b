// Command workq is the one binary of workq: migrations, the worker, the
// reaper, the all-in-one `run`, enqueue, stats and the benchmark.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRoot(os.Stdout, os.Stderr).ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "workq: "+oneLine(err))
		os.Exit(1)
	}
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }
