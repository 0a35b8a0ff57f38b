package config

import (
	"time"

	"github.com/workq/workq/internal/worker"
)

// The flat Config is the CLI's: flags and environment variables. Each
// component takes its own configuration; these methods adapt Config into
// them (after Validate).

// noneIfZero maps the CLI's "0 means none" to a component's "negative means
// none" (where zero takes the default).
func noneIfZero(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// Worker returns the worker runtime's configuration.
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
