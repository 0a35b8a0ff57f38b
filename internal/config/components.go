package config

import (
	"time"

	"github.com/workq/workq/internal/worker"
)

// noneIfZero maps a zero duration to the runtime's none (negative), for
// the Configs the engine's tests build in code: Default's values, or a 0
// set by a test that means none.
func noneIfZero(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// Worker returns the worker runtime's configuration of c, for the engine's
// tests that run a runtime without a workq.Client. The CLI's processes are
// workq.Clients: cmd/workq maps Config onto workq.Config (its
// clientSettings table), and the Client maps that onto the runtime.
func (c Config) Worker() worker.Config {
	return worker.Config{
		ID:                c.WorkerID,
		Queues:            c.Queues,
		Concurrency:       c.Concurrency,
		Batch:             c.Batch,
		Lease:             c.Lease,
		ExecTimeout:       noneIfZero(c.ExecTimeout),
		Poll:              c.Poll,
		PollOnly:          c.PollOnly,
		NoReclaim:         !c.Reclaim,
		FlushInterval:     c.FlushInterval,
		FlushBatch:        c.FlushBatch,
		DrainTimeout:      noneIfZero(c.DrainTimeout),
		RunsDir:           c.RunsDir,
		RetainRuns:        noneIfZero(c.RetainRuns),
		RetentionInterval: c.RetentionInterval,
		BackoffBase:       c.BackoffBase,
		BackoffCap:        c.BackoffCap,
	}
}
