package worker

import "sync/atomic"

// Stats counts what a worker did since it started.
//
// An attempt's outcome is counted once its completion statement has returned,
// so the database shows it (the row done, the run archived) a moment before
// Stats counts it: until then it is Pending. Options.OnResult runs after the
// count, so Stats read after a Result is reported includes it.
type Stats struct {
	Claimed         int64 `json:"claimed"`
	Done            int64 `json:"done"`
	Retried         int64 `json:"retried"`
	Failed          int64 `json:"failed"`
	Snoozed         int64 `json:"snoozed"`
	Released        int64 `json:"released"`
	Cancelled       int64 `json:"cancelled"`       // attempts that ended cancelled
	CancelRequests  int64 `json:"cancel_requests"` // running handlers cancelled because their job was cancelled
	LeaseLost       int64 `json:"lease_lost"`
	Panics          int64 `json:"panics"`
	ClaimErrors     int64 `json:"claim_errors"`
	ClaimsReleased  int64 `json:"claims_released"`  // rows of claims whose result was lost, released by token
	HeartbeatErrors int64 `json:"heartbeat_errors"` // failed heartbeat statements
	FlushErrors     int64 `json:"flush_errors"`     // failed completion statements (each is retried)
	Unflushed       int64 `json:"unflushed"`        // completions given up on: their leases expire and the reaper retries them
	InFlight        int64 `json:"in_flight"`        // attempts holding a handler slot
	Pending         int64 `json:"pending"`          // finished attempts whose completion is not flushed yet
}

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

// Add returns the field-by-field sum of s and o (the counters of several
// workers, such as the shards of a sharded Client).
func (s Stats) Add(o Stats) Stats {
	return Stats{
		Claimed: s.Claimed + o.Claimed, Done: s.Done + o.Done, Retried: s.Retried + o.Retried, Failed: s.Failed + o.Failed,
		Snoozed: s.Snoozed + o.Snoozed, Released: s.Released + o.Released, Cancelled: s.Cancelled + o.Cancelled,
		CancelRequests: s.CancelRequests + o.CancelRequests, LeaseLost: s.LeaseLost + o.LeaseLost,
		Panics: s.Panics + o.Panics, ClaimErrors: s.ClaimErrors + o.ClaimErrors, ClaimsReleased: s.ClaimsReleased + o.ClaimsReleased,
		HeartbeatErrors: s.HeartbeatErrors + o.HeartbeatErrors, FlushErrors: s.FlushErrors + o.FlushErrors,
		Unflushed: s.Unflushed + o.Unflushed, InFlight: s.InFlight + o.InFlight, Pending: s.Pending + o.Pending,
	}
}
