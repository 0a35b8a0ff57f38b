package worker

import (
	"sync/atomic"

	"github.com/workq/workq/workqtype"
)

// Stats counts what a worker did since it started (workqtype.Stats).
type Stats = workqtype.Stats

type counters struct {
	claimed, done, retried, failed, snoozed, released atomic.Int64
	cancelled, cancelRequests                         atomic.Int64
	leaseLost, panics, claimErrors, claimsReleased    atomic.Int64
	heartbeatErrors, flushErrors, unflushed           atomic.Int64
	inFlight, pending                                 atomic.Int64
}

func (c *counters) snapshot() Stats {
	return Stats{
		Claimed: c.claimed.Load(), Done: c.done.Load(), Retried: c.retried.Load(), Failed: c.failed.Load(),
		Snoozed: c.snoozed.Load(), Released: c.released.Load(), Cancelled: c.cancelled.Load(),
		CancelRequests: c.cancelRequests.Load(), LeaseLost: c.leaseLost.Load(),
		Panics: c.panics.Load(), ClaimErrors: c.claimErrors.Load(), ClaimsReleased: c.claimsReleased.Load(),
		HeartbeatErrors: c.heartbeatErrors.Load(), FlushErrors: c.flushErrors.Load(), Unflushed: c.unflushed.Load(),
		InFlight: c.inFlight.Load(), Pending: c.pending.Load(),
	}
}
